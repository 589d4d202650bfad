# Shows that dyn-replay takes an AIPerf user's habits: `dyn-replay profile WORKLOAD ...` runs as
# `dyn-replay WORKLOAD ...`; AIPerf's single_turn and multi_turn files are recognised by their rows
# and random_pool is read when named (--custom-dataset-type), each turned into text requests
# (multi_turn turns go after the conversation so far, live replies included, as AIPerf sends them);
# what cannot be sent (an image) or mixed formats are refused naming the type and line; AIPerf's
# flag spellings work (--input-file, --model-names, --random-seed, --num-warmup-requests,
# --arrival-pattern, --output-artifact-dir) and --rate suggests --request-rate.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --speedup-ratio 100
cat >multi.jsonl <<'J'
{"session_id": "s1", "turns": [{"text": "Hello there, what is deep learning?", "output_length": 5}, {"text": "Explain it like I am five.", "delay": 50, "output_length": 5}]}
{"session_id": "s2", "turns": [{"texts": ["Who", "are you?"], "output_length": 3}]}
J
cat >single.jsonl <<'J'
{"text": "What is deep learning?", "output_length": 4}
{"text": "Who are you?", "delay": 20, "output_length": 4}
J
cat >pool.jsonl <<'J'
{"text": "alpha"}
{"text": "beta gamma"}
{"texts": [{"name": "query", "contents": ["delta", "epsilon zeta"]}]}
J
rows() { jq -c '{id: .request.request_id, session: .agent_context.session_id, in: .request.input_tokens, status: .dyn.status}'; }

echo "== profile verb, multi_turn: the second turn carries the first turn and its reply"
dyn-replay profile multi.jsonl --url "$w_url" --model-names mock-model --no-progress 2>err.txt | rows | sort
grep -o 'multi_turn: each turn is sent after the conversation so far, live replies included (--history delta)' err.txt
echo "== single_turn, AIPerf's spellings"
dyn-replay --input-file single.jsonl --url "$w_url" --random-seed 7 --num-warmup-requests 1 --no-progress \
  --output-artifact-dir art 2>/dev/null
jq -c 'select(.dyn.warmup != true) | {id: .request.request_id, in: .request.input_tokens, max: .request.output_tokens}' art/requests.jsonl
ls art | sort | tr '\n' ' '; echo
echo "== random_pool, named: --conversation-num draws, the same seed the same draws"
for i in 1 2; do
  dyn-replay pool.jsonl --custom-dataset-type random_pool --conversation-num 6 --random-seed 3 --url "$w_url" \
    --no-progress 2>/dev/null | jq -r '.request.input_tokens' | tr '\n' ' '; echo
done
dyn-replay pool.jsonl --custom-dataset-type random_pool --conversation-num 4 --url "$w_url" --no-progress 2>&1 >/dev/null |
  grep -o 'random_pool: 4 requests drawn with replacement from 3 entries (seed 0)'
echo "== refused, naming the type and line"
printf '{"text": "Describe", "image": "cat.png"}\n' >image.jsonl
expect_status 3 dyn-replay image.jsonl --url "$w_url" 2>&1 | head -1
cat single.jsonl multi.jsonl >mixed.jsonl
expect_status 3 dyn-replay mixed.jsonl --url "$w_url" 2>&1 | head -1
expect_status 3 dyn-replay multi.jsonl --custom-dataset-type mooncake_trace --url "$w_url" 2>&1 | head -1
expect_status 2 dyn-replay multi.jsonl --sim --concurrency 1 2>&1 | tail -1
expect_status 2 dyn-replay single.jsonl --conversation-num 5 --url "$w_url" 2>&1
mkdir pools && cp pool.jsonl pools/
expect_status 2 dyn-replay pools --custom-dataset-type random_pool --url "$w_url" 2>&1
expect_status 2 dyn-replay single.jsonl --custom-dataset-type sharegpt --url "$w_url" 2>&1 | head -1
echo "== AIPerf's flags where the meaning is the same"
expect_status 2 dyn-replay single.jsonl --url "$w_url" --rate 3 2>&1
dyn-replay single.jsonl --url "$w_url" --request-rate 50 --arrival-pattern poisson --no-progress 2>/dev/null | wc -l
expect_status 2 dyn-replay single.jsonl --url "$w_url" --model-names a,b 2>&1
