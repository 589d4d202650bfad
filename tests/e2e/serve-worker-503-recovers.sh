# Shows that a worker that answers 503 for a while (dyn-mocker --fault-after 1 --fail-first 2)
# gives the client that 503 with an OpenAI-style error body and never a hang, that under hard
# affinity the failed dispatch invalidates the session's binding so the next turn rebinds to a
# live worker, and that once the worker recovers it serves new sessions again; the trace and the
# mocker's fault counter record each step. It runs with --disable-retries: a retried 503 never
# reaches the client (e2e serve-retry-before-first-byte shows that).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 50 --fault-after 1 --fail-first 2
start_mocker w1 --worker-id 1 --speedup-ratio 50
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 300 \
  --health-interval-ms 60000 --disable-retries --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
m='[{"role":"user","content":"Plan the migration of the billing service."}]'
echo "a turn 1: $(chat "$r_url" '{"x-session-id":"a"}' "$m")"
m=$(grow "$m" 1)
echo "a turn 2: $(chat "$r_url" '{"x-session-id":"a"}' "$m")"
jq -c '.error | {type, code}' body.txt
echo "a binding after the 503: $(curl -sS "$r_url/v1/bindings" | jq -c '[.bindings[] | select(.key == "a")] | length')"
m=$(grow "$m" 2)
echo "a turn 3: $(chat "$r_url" '{"x-session-id":"a"}' "$m")"
# b is placed on worker 0 by round-robin and meets its second injected 503; c finds it recovered.
echo "b turn 1: $(chat "$r_url" '{"x-session-id":"b"}' '[{"role":"user","content":"hello b"}]')"
echo "c turn 1: $(chat "$r_url" '{"x-session-id":"c"}' '[{"role":"user","content":"hello c"}]')"
echo "d turn 1: $(chat "$r_url" '{"x-session-id":"d"}' '[{"role":"user","content":"hello d"}]')"
curl -sS "$r_url/v1/bindings" | jq -r '.bindings[] | [.key, .worker] | @tsv'
echo "w0 injected failures: $(curl -sS "$w0_url/metrics" | awk '/^dyn_mocker_faults_failed_total/{print $2}')"
stop "$r_pid"
jq -r '[.agent_context.session_id, .request.worker.decode_worker_id, .dyn.status, (.dyn.error.code // "-"), .dyn.binding] | @tsv' tr
