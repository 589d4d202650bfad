# Shows that dyn-route serve sees a client hang up while its worker sends nothing (issue 51.4):
# during a long prefill (no response headers yet), in a silent gap mid-stream, and while a
# non-streaming answer is computed. Each client gives up 0.3 s after the worker has its request
# (not after a fixed time from its start: on a loaded machine a request could still be on its way
# then, and the worker would see no close at all); the worker (which would next write only after
# 5 s) sees its connection closed well before that, the request's row says cancelled and its load
# is released at once. A client that stays gets its answer on the same
# watched connections (the control), and so does one that leaves once it has the API's end event.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/client-hangup/script.json"
start_router r --worker "$w_url" \
  --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
body() { printf '{"model":"m","stream":%s,"max_tokens":8,"messages":[{"role":"user","content":"%s"}]}' "$1" "$2"; }
gauge() { curl -sS "$r_url/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
closes() { grep -c '"client_closed"' w.requests.jsonl 2>/dev/null; }
arrived() { grep -c "\"$1\"" w.requests.jsonl 2>/dev/null; }
i=0
for kind in long-prefill silent-gap whole-body; do
  stream=true; [[ $kind == whole-body ]] && stream=false
  curl -sS -N -o /dev/null -m 10 -H 'content-type: application/json' "$r_url/v1/chat/completions" \
    -d "$(body $stream $kind)" 2>/dev/null &
  client=$!
  for _ in $(seq 1 100); do [[ $(arrived $kind) -ge 1 ]] && break; sleep 0.05; done
  sleep 0.3  # a stream's first chunks are sent: the silent gap has begun
  kill "$client"
  wait "$client" 2>/dev/null
  i=$((i + 1))
  for _ in $(seq 1 60); do [[ $(closes) -ge $i ]] && break; sleep 0.05; done
done
# The worker would next write at 5 s: a close it saw before 2 s came from the hang-up, not a write.
jq -r 'select(.client_closed) | "worker saw the close at \(.at) before its next write: \(.after_ms < 2000)"' w.requests.jsonl
echo "frontend in flight after the hang-ups: $(gauge dyn_frontend_in_flight_requests)"
echo "== a client that stays"
curl -sS -N -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$(body true stays)" |
  grep -o '"content": "ok"'
curl -sS -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$(body false stays)" -o /dev/null \
  -w 'non-streaming status %{http_code}\n'
# A client that leaves once it has the end event ([DONE]) while the worker still holds its stream
# open has its whole answer: its row says ok.
curl -sS -N -m 2 -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$(body true done-then-tail)" |
  grep -c '^data: \[DONE\]'
stop "$r_pid"
echo "rows: $(jq -r .dyn.status r.jsonl | sort | uniq -c | awk '{print $2, $1}' | paste -sd' ')"
