# Shows --tokenizer-url: the router hashes the token ids an OpenAI-compatible POST /tokenize
# returns (here a stand-in tokenizer with one token per character, so its ids differ from the
# 4-byte convention), so a request goes to the worker whose vLLM-format BlockStored events hold
# those ids; chat requests are tokenized as messages, completions as the prompt. A tokenizer that
# goes away costs no request (4-byte hashing, counted and warned). A worker whose reported block
# size differs from the router's is refused with an error and gets no request.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
$py "$DYN_ROOT/tests/e2e/helpers/char_tokenizer.py" & tok_pid=$!; _dyn_pids+=("$tok_pid")
wait_file tok.port
start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)" \
  --tokenizer-url "http://127.0.0.1:$(cat tok.port)"
sync_pubs 0 1
worker() { tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}'; }
complete() { curl -s -H "content-type: application/json" -D h.txt -o /dev/null -w '%{http_code}' "$r_url/v1/completions" -d "{\"prompt\":\"$1\",\"max_tokens\":1}"; echo " worker $(worker)"; }
chat() { curl -s -H "content-type: application/json" -D h.txt -o /dev/null -w '%{http_code}' "$r_url/v1/chat/completions" \
           -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}],\"max_tokens\":1}"; echo " worker $(worker)"; }
pa=$(printf 'alpha %.0s' $(seq 12)); pb=$(printf 'bravo %.0s' $(seq 12)); pc=$(printf 'charlie %.0s' $(seq 10))
s=$(send 1 "$(stored "$pa" 1,2,3,4)"); wait_seq 1 "$s"
s=$(send 0 "$(stored "$pb" 5,6,7,8)"); wait_seq 0 "$s"
s=$(send 1 "$(stored "user:$pc" 9,10,11,12,13)"); wait_seq 1 "$s"
echo "== routed by the tokenizer's ids"
echo "completions alpha: $(complete "$pa")"
echo "completions bravo: $(complete "$pb")"
echo "chat charlie: $(chat "$pc")"
echo "== what the tokenizer was asked"
sort -u tok.log
echo "tokenizer errors: $(curl -s "$r_url/metrics" | awk '$1=="dyn_tokenizer_errors_total"{print $2}')"
echo "== the tokenizer goes away"
stop "$tok_pid"
echo "completions alpha: $(complete "$pa" | cut -d' ' -f1)"
echo "tokenizer errors: $(curl -s "$r_url/metrics" | awk '$1=="dyn_tokenizer_errors_total"{print $2}')"
grep -c "warning: tokenizer: POST .*/tokenize failed" r.log
stop "$r_pid"
echo "== a worker with another block size is refused"
start_mocker w2 --worker-id 2 --block-size 32 --speedup-ratio 100
start_router r2 --worker "$w0_url" --worker "$w2_url" --kv-cache-block-size $bs --health-interval-ms 50
r_url=$r2_url
for _ in $(seq 100); do grep -q "is refused" r2.log && break; sleep 0.05; done
grep -o "error: worker 1 (http://127.0.0.1:[0-9]*) has KV block size 32 (GET /health kv_block_size) but the router's --kv-cache-block-size is 16: the worker is refused" r2.log \
  | sed -E 's/:[0-9]+\)/:PORT)/'
for i in 1 2 3 4; do complete "$pa" | cut -d' ' -f2-; done | sort | uniq -c | awk '{print $1, $2, $3}'
curl -s "$r2_url/metrics" | grep '^dyn_worker_block_size' | sed 's/,url="[^"]*"//'
stop "$r2_pid"
start_router r3 --worker "$w0_url" --worker "$w2_url" --kv-cache-block-size $bs --health-interval-ms 50 --allow-block-size-mismatch
for _ in $(seq 100); do grep -q "approximate" r3.log && break; sleep 0.05; done
grep -c "warning: worker 1 .* has KV block size 32 .*routing to it stays approximate (--allow-block-size-mismatch)" r3.log
