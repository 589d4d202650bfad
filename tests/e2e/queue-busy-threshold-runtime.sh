# Shows busy thresholds changed at run time (SPEC 3.4, Dynamo's POST /busy_threshold shape): with no
# threshold a second request shares the one worker with a running stream; after POST
# /v1/busy_threshold {"active_requests_threshold": 1} the next one waits in the router queue, and
# raising the threshold to 2 releases it (200, before the 5 s queue limit); set back to 1, a request
# gets 503 all_workers_overloaded once the limit passes. Bad bodies get 415, 422 and 400 and change
# nothing; /metrics shows the threshold in force.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --speedup-ratio 0.5
start_router r --worker "$w_url" --queue-timeout-secs 5
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
short='{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"short"}]}'
ask() { curl -sS -o "$1.txt" -w '%{http_code}' -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$short"; }
set_t() {  # set_t BODY [CONTENT-TYPE]: the status, then the answer (its thresholds, or the error's message)
  local code
  code=$(curl -sS -o t.json -w '%{http_code}' -H "content-type: ${2:-application/json}" "$r_url/v1/busy_threshold" -d "$1")
  echo "$code $(jq -c 'if .error then .error.message else del(.model) end' t.json)"
}
pending() { curl -sS "$r_url/metrics" | awk 'index($1, "dyn_router_queue_pending_requests") == 1 {s += $2} END {print s + 0}'; }
echo "GET: $(curl -sS "$r_url/v1/busy_threshold" | jq -c .)"
curl -sS -N -o s.txt -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$long" &
s=$!
for i in $(seq 1 200); do [[ -s s.txt ]] && break; sleep 0.05; done
echo "no threshold, beside the stream: $(ask a)"
echo "set 1: $(set_t '{"model":"mock-model","active_requests_threshold":1}')"
ask b >b.code &
b=$!
for i in $(seq 1 200); do [[ $(pending) == 1 ]] && break; sleep 0.05; done
echo "waiting under threshold 1: $(pending)"
echo "set 2: $(set_t '{"model":"mock-model","active_requests_threshold":2}')"
wait "$b"
echo "the waiting request once raised: $(cat b.code)"
echo "set 1: $(set_t '{"model":"mock-model","active_requests_threshold":1}')"
echo "under threshold 1 past the limit: $(ask c) $(jq -r '.error.type' c.txt)"
echo "== bad bodies"
set_t '{"model":"mock-model","active_requests_threshold":3}' text/plain
set_t '{"active_requests_threshold":3}'
set_t '{"model":"mock-model","active_requests_threshold":"3"}'
set_t '{"model":"mock-model","active_decode_blocks_threshold":2}'
set_t '{"model":"mock-model","active_requests_threshold":0}'
echo "GET: $(curl -sS "$r_url/v1/busy_threshold" | jq -c .)"
curl -sS "$r_url/metrics" | grep -E '^dyn_router_busy_threshold'
kill "$s"; wait "$s" 2>/dev/null
stop "$r_pid"
grep -c 'busy thresholds set' r.log
