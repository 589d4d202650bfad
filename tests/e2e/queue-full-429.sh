# Shows the router queue's 429 (SPEC 3.4): with --max-concurrent-requests 1 and --queue-size 1, a
# request arriving while one stream holds the only slot waits in the queue; the next one finds the
# queue full and gets 429 with Retry-After: 1 and the reason (concurrency_limit) as its error type;
# the waiting request is dispatched (200) as soon as the slot frees, and /metrics counts both.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --speedup-ratio 0.5
start_router r --worker "$w_url" --max-concurrent-requests 1 --queue-size 1
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
short='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"short"}]}'
metric() { curl -sS "$r_url/metrics" | awk -v k="$1" 'index($1, k) == 1 {s += $2} END {print s + 0}'; }
curl -sS -N -o a.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$long" &
a=$!
for i in $(seq 1 200); do [[ -s a.txt ]] && break; sleep 0.05; done
curl -sS -o b.txt -w '%{http_code}' -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$short" >b.code &
b=$!
for i in $(seq 1 200); do [[ $(metric dyn_router_queue_pending_requests) == 1 ]] && break; sleep 0.05; done
echo "waiting: $(metric dyn_router_queue_pending_requests)"
curl -sS -D c.h -o c.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$short"
echo "third request: $(head -1 c.h | awk '{print $2}') $(jq -r '.error.type' c.txt), Retry-After: $(tr -d '\r' <c.h | awk -F': ' 'tolower($1)=="retry-after"{print $2}')"
jq -r '.error.message' c.txt
kill "$a"; wait "$a" 2>/dev/null
wait "$b"
echo "queued request once the slot freed: $(cat b.code) $(jq -r '.object' b.txt)"
curl -sS "$r_url/metrics" | grep -E '^dyn_router_queue_(rejected_total|requests_total)'
stop "$r_pid"
