# Shows per-token ITL with multi-token chunks (issue 21.4): a scripted worker streams chunks at
# about 100, 250, 400 and 430 ms carrying 2, 1, 3 and 1 tokens (vLLM-style per-chunk cumulative
# usage). dyn-replay's row and dyn-route serve's row both record dyn.chunk_tokens [2,1,3,1];
# dyn-bench reports the per-token ITL that leaves out the first chunk's 2 tokens (about 330 / 5 =
# 66 ms) beside AIPerf's (330 / 6 = 55 ms), each labelled; rows without per-chunk usage give a
# per-token figure labelled estimated. (The values are timings; their ratio, 6 / 5, is exact.)
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/serve/per-chunk-usage.json"
start_router r --worker "$w_url" --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
printf '%s\n' '{"timestamp":0,"input_length":8,"output_length":7,"hash_ids":[1]}' >wl.jsonl
dyn-replay --url "$r_url" --model m wl.jsonl >client.jsonl 2>/dev/null
stop "$r_pid"
echo "client row chunk_tokens: $(jq -c .dyn.chunk_tokens client.jsonl)"
echo "router row chunk_tokens: $(jq -c .dyn.chunk_tokens r.jsonl)"
for f in client.jsonl r.jsonl; do
  dyn-bench report --format json "$f" 2>/dev/null |
    jq -r --arg f "$f" '"\($f): per-token ITL / AIPerf ITL = \(.inter_token_latency_per_token.avg / .inter_token_latency.avg * 1000 | round / 1000)"'
done
dyn-bench report --format table client.jsonl 2>/dev/null | grep -o 'Inter Token Latency[^0-9]*(ms)'
jq -c 'del(.dyn.chunk_tokens)' client.jsonl >no-chunk-usage.jsonl
dyn-bench report --format table no-chunk-usage.jsonl 2>/dev/null | grep -o 'Inter Token Latency per[^0-9]*(ms)'
