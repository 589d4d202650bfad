# Shows dyn-trace capture in front of a dyn-mocker endpoint: responses pass through unchanged
# (streamed and not), each request gets one request_end row with the worker's usage and the
# session identity, nothing of the prompt, the response or the credentials is recorded, and a
# SIGTERM right after the last response still flushes every row (the flush interval is 60 s).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker up
rm -f cap.*.jsonl.gz
dyn-trace capture --upstream "$up_url/v1" --port 0 --port-file cap.port --request-trace-file-path "$PWD/cap" \
  --request-trace-file-flush-interval-ms 60000 2>cap.log &
cap_pid=$!
_dyn_pids+=("$cap_pid")
wait_file cap.port
cap_url="http://127.0.0.1:$(cat cap.port)"
for i in 1 2 3 4 5; do
  curl -sS -N -H 'authorization: Bearer sk-do-not-record' -H "x-claude-code-session-id: cc-root" \
    -H "x-claude-code-agent-id: a000000000000000$i" -H 'content-type: application/json' \
    "$cap_url/v1/chat/completions" \
    -d '{"model":"mock-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"secret prompt text"}]}' >s$i.txt
done
curl -sS -H 'content-type: application/json' "$cap_url/v1/chat/completions" \
  -d '{"model":"mock-model","max_tokens":3,"messages":[{"role":"user","content":"secret prompt text"}]}' | jq -c '.object, .usage.completion_tokens'
echo "streams ended with [DONE]: $(grep -l 'data: \[DONE\]' s*.txt | wc -l)"
echo "models listed through capture: $(curl -sS "$cap_url/v1/models" | jq -r '.data[0].id')"
stop "$cap_pid"
dyn-trace cat cap.*.jsonl.gz >rows.jsonl
echo "rows: $(wc -l <rows.jsonl)"
jq -c '[.agent_context.session_id, .agent_context.parent_session_id, .request.input_tokens, .request.output_tokens, .request.finish_reason_metadata.finish_reason, .dyn.status]' rows.jsonl
echo "secrets in trace: $(grep -c -e sk-do-not-record -e 'secret prompt' rows.jsonl)"
