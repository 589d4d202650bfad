# Shows that the admin listener's worker verbs change the fleet at run time: GET /v1/workers lists
# each worker with its state, load and bound sessions; POST /v1/workers adds one (201; another
# spelling of the same URL is the same worker, 200); POST /v1/workers/drain drains one (its
# session moves at its next turn, "rebound" with reason "drained", and nothing new lands on it);
# DELETE /v1/workers removes one (its binding dropped and counted, the session's next turn a
# "rebound" with reason "removed"); bad bodies are 400s, unknown workers 404s, and the router keeps
# serving throughout. dyn-bind live --workers shows the workers and their state.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
start_router r --worker "$w0_url" --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
admin() {  # admin METHOD PATH [BODY]: prints the status and the answer's chosen fields
  local body=${3:-}
  curl -sS -o ans.json -w '%{http_code}' -X "$1" "$r_url$2" ${body:+-H 'content-type: application/json' -d "$body"}
  echo " $(jq -c '.error.message // ([.workers[]? // .worker | {worker, url: .url, state, source, bound_sessions}] + (if .bindings_dropped != null then [{bindings_dropped}] else [] end))' ans.json | sed -E 's/127\.0\.0\.1:[0-9]+/H:P/g')"
}
m='[{"role":"user","content":"tell me about caches"}]'
echo "turn 1: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
admin GET /v1/workers
port1=${w1_url##*:}
admin POST /v1/workers "{\"url\":\"HTTP://127.0.0.1:$port1/v1/\"}"
admin POST /v1/workers "{\"url\":\"http://127.0.0.1:$port1\"}"
admin POST /v1/workers/drain "{\"url\":\"$w0_url/\"}"
echo "turn 2: $(chat "$r_url" '{"x-session-id":"s"}' "$(grow "$m" 1)")"
echo "a new session: $(chat "$r_url" '{"x-session-id":"t"}' "$m")"
admin GET /v1/workers
dyn-bind live --url "$r_url" --workers --format table | sed -E 's/127\.0\.0\.1:[0-9]+/H:P/g'
admin DELETE /v1/workers "{\"url\":\"$w1_url\"}"
admin POST /v1/workers "{\"url\":\"$w0_url\"}"
echo "turn 3: $(chat "$r_url" '{"x-session-id":"s"}' "$(grow "$(grow "$m" 1)" 2)")"
echo "errors:"
admin DELETE /v1/workers "{\"url\":\"$w1_url\"}"
admin POST /v1/workers/drain '{"url":"http://127.0.0.1:1","extra":1}'
admin POST /v1/workers '{"url":"ftp://x"}'
admin POST /v1/workers 'not json'
admin POST /v1/workers '{"block_size":16}'
echo "still serving: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
curl -sS "$r_url/metrics" | grep -E '^dyn_worker_(draining|circuit_state)' | sed 's/url="[^"]*"/url=U/'
stop "$r_pid"
jq -r '[.agent_context.session_id, .request.worker.decode_worker_id, .dyn.binding, (.dyn.rebind_reason // "-")] | @tsv' tr
grep -E 'added|draining|removed|serving again' r.log | sed -E 's/127\.0\.0\.1:[0-9]+/H:P/g'
