# Shows program-aware admission (ThunderAgent, SPEC 9) live in dyn-route serve: two dyn-mocker
# workers whose KV caches hold 1,024 tokens (64 blocks of 16), the router told the same capacity.
# Three agent sessions grow until worker 0 is over --pause-threshold: the scheduler tick pauses
# the smallest idle program (GET /v1/programs shows it paused, with its worker and tokens), and
# its next request waits -- woken by a tick, not polling -- until the other program's idle
# context has decayed and it fits again, then completes on its worker. The wait is recorded as
# dyn.pause_ms > 0 in that request's request_end row; every request completes 200/ok. A new
# program too big for any worker waits in admission; SIGTERM wakes it (503, recorded) and the
# router exits 0 with the trace flushed.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --block-size 16 --num-gpu-blocks-override 64
start_mocker w1 --worker-id 1 --block-size 16 --num-gpu-blocks-override 64
rm -f trace.*.jsonl.gz
start_router r --worker "$w0_url" --worker "$w1_url" --kv-cache-block-size 16 \
  --admission thunderagent --admission-kv-blocks 64 --admission-buffer-tokens 16 \
  --scheduler-interval-seconds 0.1 --acting-decay-tau-seconds 0.2 --resume-timeout-seconds 20 \
  --request-trace --request-trace-file-path "$PWD/trace"

# msg CHARS: one user message of CHARS characters (about CHARS/4 prompt tokens, SPEC 4.2).
msg() { jq -cn --argjson n "$1" '[{"role":"user","content":("tool output " * ($n / 12 | floor))}]'; }
turn() {  # turn SESSION CHARS LABEL
  echo "$3: $(chat "$r_url" "{\"x-dynamo-session-id\":\"$1\"}" "$(msg "$2")")"
}
# programs: state, worker and token total of each program (times and exact counts vary).
programs() {
  curl -sS "$r_url/v1/programs" |
    jq -c '.admission, (.programs[] | {program_id, state, worker, tokens_over_500: (.token_total > 500), pause_count})'
}

turn agent-a 800 "a turn 1"
turn agent-b 1600 "b turn 1"
sleep 0.3   # a's and b's idle contexts decay on the resume side: c goes to the emptier worker 0
turn agent-c 800 "c turn 1"
turn agent-a 2320 "a turn 2"
turn agent-c 2400 "c turn 2"
sleep 1     # ticks: worker 0 (a ~600 + c ~600 tokens) is over 0.95 x 1,024 -> a (smaller, idle) pauses
echo "== after worker 0 went over the pause threshold"
programs
echo "== a's next turn waits in admission until a tick resumes it"
turn agent-a 2800 "a turn 3"
echo "== after"
curl -sS "$r_url/v1/programs" | jq -c '.programs[] | select(.program_id == "agent-a") | {state, worker, pause_count, paused_ms_total_positive: (.paused_ms_total > 0)}'
curl -sS "$r_url/v1/programs" | jq -c '.stats | {pauses_at_least_1: (.pauses >= 1), resumes_at_least_1: (.resumes >= 1), waited, forced}'
echo "== a new program too big for any worker waits; SIGTERM wakes it (503) and the router exits"
curl -sS -o d.body -w '%{http_code}\n' -H 'x-dynamo-session-id: agent-d' -H 'content-type: application/json' \
  "$r_url/v1/chat/completions" -d "{\"model\":\"mock-model\",\"max_tokens\":4,\"messages\":$(msg 8000)}" >d.status &
d_pid=$!
for i in $(seq 1 100); do
  [[ $(curl -sS "$r_url/v1/programs" | jq '[.programs[] | select(.program_id == "agent-d" and .waiting_requests == 1)] | length') == 1 ]] && break
  sleep 0.05
done
curl -sS "$r_url/v1/programs" | jq -c '.programs[] | select(.program_id == "agent-d") | {state, worker, waiting_requests}'
kill "$r_pid"
expect_status 0 wait "$r_pid"
wait "$d_pid"
echo "agent-d: HTTP $(cat d.status) $(jq -c '.error.type' d.body)"
dyn-trace cat trace.*.jsonl.gz >rows.jsonl
echo "rows: $(wc -l <rows.jsonl)"
jq -c '[.agent_context.session_id, .dyn.status, .request.worker.decode_worker_id, (if .dyn.pause_ms > 0 then "paused" else "not paused" end)]' rows.jsonl
