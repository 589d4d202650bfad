# Shows that dyn-replay --tool-events-endpoint plays a harness against dyn-route serve: for each
# tool wait it replays (a row with tool_wait_ms) it PUSHes tool_start when the turn before ends
# and tool_end when the wait is over; the router traces them joined to the replayed sessions, and
# dyn-trace stats reports the tool time per session and per tool name from those harness rows.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
cat >w.jsonl <<'ROWS'
{"session_id":"a","timestamp":0,"input_length":100,"output_length":4,"hash_ids":[1]}
{"session_id":"a","tool_wait_ms":300,"input_length":600,"output_length":4,"hash_ids":[1,2]}
{"session_id":"a","delay":100,"input_length":1100,"output_length":4,"hash_ids":[1,2,3]}
{"session_id":"b","timestamp":0,"input_length":100,"output_length":4,"hash_ids":[7]}
{"session_id":"b","tool_wait_ms":300,"input_length":600,"output_length":4,"hash_ids":[7,8]}
{"session_id":"b","tool_wait_ms":300,"input_length":1100,"output_length":4,"hash_ids":[7,8,9]}
ROWS
start_mocker w --speedup-ratio 100
start_router r --worker "$w_url" --tool-events-endpoint tcp://127.0.0.1:0 --request-trace \
  --request-trace-file-path "$PWD/trace" --request-trace-file-format jsonl
ep=$(curl -s "$r_url/v1/tool_events" | jq -r .endpoint)
expect_status 0 dyn-replay w.jsonl --url "$r_url" --model mock-model --tool-events-endpoint "$ep" \
  --no-progress -o rows.jsonl 2>replay.err
grep -o 'tool events: [0-9]* sent' replay.err
jq -r '.dyn.status' rows.jsonl | sort | uniq -c | sed 's/^ *//'
sleep 0.5  # the last tool_end is sent as its turn starts; the router takes it on its own thread
curl -s "$r_url/v1/tool_events" | jq -c '.counters'
stop "$r_pid"
echo "== harness rows in the trace (times left out)"
jq -c 'select(.event_source == "harness") | {event_type, session: .agent_context.session_id,
  call: .tool.tool_call_id, tool: .tool.tool_class, status: .tool.status, known: .dyn.known_session,
  waited_300ms: (if .event_type == "tool_end" then .tool.duration_ms >= 290 else null end),
  joined: (.tool.started_at_unix_ms != null)}' trace | sort
echo "== dyn-trace stats: tool time per session and per tool name"
dyn-trace stats trace | jq -c 'select(.kind == "session" or .kind == "tool") |
  {kind, id: (.session_id // .tool), tool_events, calls, tool_source, waited_300ms_each: (.tool_ms >= 290 * (.tool_events // .calls))}'
echo "== --tool-events-endpoint is a usage error with --sim"
expect_status 2 dyn-replay w.jsonl --sim --tool-events-endpoint "$ep" 2>&1 | grep -o 'tool-events-endpoint[^;]*'
