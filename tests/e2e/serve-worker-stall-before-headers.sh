# Shows that a worker that takes a request but sends no response headers (dyn-mocker
# --stall-before-headers-ms) gives the client a clean 504 with an OpenAI-style timeout error once
# the router's --upstream-read-timeout-secs passes (the request is not resent: it may be running
# there), and that the session's next turn goes to the other worker: under hard affinity the
# binding is invalidated and rebound, under soft affinity the stalled worker is no longer eligible.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
for mode in hard soft; do
  start_mocker s0 --worker-id 0 --speedup-ratio 50 --fault-after 1 --stall-before-headers-ms 8000
  start_mocker s1 --worker-id 1 --speedup-ratio 50
  start_router r --worker "$s0_url" --worker "$s1_url" --router-session-affinity-ttl-secs 300 \
    --router-session-affinity-mode "$mode" --upstream-read-timeout-secs 1 --health-interval-ms 60000 \
    --request-trace --request-trace-file-path "$PWD/tr-$mode" --request-trace-file-format jsonl
  echo "== $mode"
  m='[{"role":"user","content":"Summarize the incident report."}]'
  echo "turn 1: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
  m=$(grow "$m" 1)
  start=$SECONDS
  echo "turn 2: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
  echo "turn 2 answered within 4 s: $([[ $((SECONDS - start)) -le 4 ]] && echo yes || echo no)"
  jq -c '.error | {type, code}' body.txt
  m=$(grow "$m" 2)
  echo "turn 3: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
  echo "stalled requests at worker 0: $(curl -sS "$s0_url/metrics" | awk '/^dyn_mocker_faults_stalled_total/{print $2}')"
  stop "$r_pid"; stop "$s0_pid"; stop "$s1_pid"
  jq -r '[.request.worker.decode_worker_id, .dyn.status, (.dyn.error.type // "-"), (.dyn.error.code // "-"), .dyn.binding] | @tsv' "tr-$mode"
done
