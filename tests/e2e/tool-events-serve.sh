# Shows that dyn-route serve takes a harness's tool events as Dynamo does: an independent Python
# publisher (python3-zmq, python3-msgpack) PUSHes agent-tool-events frames to the router's PULL
# socket; each event becomes its own trace row (event_source harness) joined to its session (a
# tool_end without started_at gets its tool_start's, and a duration; a tool_call_id that the
# session's response called names that request); the session is ACTING
# between tool_start and tool_end (GET /v1/tool_events, and the ThunderAgent program's status);
# malformed frames are counted and reported while the router keeps serving.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
pub="/usr/bin/python3 $DYN_ROOT/tests/e2e/helpers/tool_events.py"
echo '{"match": "list the files", "tool_call": {"name": "Bash", "arguments": {"command": "ls"}}}' >replies.jsonl
start_mocker w --speedup-ratio 100 --replies replies.jsonl
start_router r --worker "$w_url" --tool-events-endpoint tcp://127.0.0.1:0 --admission thunderagent \
  --admission-kv-blocks 1000 --request-trace --request-trace-file-path "$PWD/trace" \
  --request-trace-file-format jsonl
ep=$(curl -s "$r_url/v1/tool_events" | jq -r .endpoint)
[[ $ep =~ ^tcp://127\.0\.0\.1:[0-9]+$ ]] && echo "bound: tcp://127.0.0.1:PORT"
echo "== one turn of session s1, then its harness runs a tool"
chat "$r_url" '{"x-dynamo-session-id":"s1"}' '[{"role":"user","content":"list the files"}]'
call=$(grep -o '"id":"call[^"]*"' body.txt | head -1 | cut -d'"' -f4)
echo "the reply called a tool: ${call:+yes}"
curl -s "$r_url/v1/programs" | jq -c '.programs[] | {program_id, status, tools_running}'
ev() {  # ev TYPE SESSION CALL TIME [TOOL_JSON_EXTRA]
  local extra=${5:-}
  [[ -n $extra ]] || extra='{}'
  jq -nc --arg t "$1" --arg s "$2" --arg c "$3" --argjson at "$4" --argjson x "$extra" \
    '{schema: "dynamo.request.trace.v1", event_type: $t, event_time_unix_ms: $at, session_id: $s,
      tool: ({tool_call_id: $c, tool_class: "Bash"} + $x)}'
}
ev tool_start s1 "$call" 1000 '{"status":"running"}' | $pub send "$ep"
sleep 0.3
curl -s "$r_url/v1/tool_events" | jq -c '.sessions[] | {session_id, status, running: [.running[] | .tool_call_id]}'
curl -s "$r_url/v1/programs" | jq -c '.programs[] | {program_id, status, tools_running}'
echo "== malformed frames: two frames, a short sequence, bad msgpack, another schema, another topic"
topic=$(printf agent-tool-events | xxd -p -c 256)
bad_schema=$(/usr/bin/python3 -c 'import msgpack,sys; sys.stdout.write(msgpack.packb({"schema":"other.v9","event_type":"tool_end","event_time_unix_ms":1,"session_id":"s1","tool":{"tool_call_id":"x","tool_class":"y"}}).hex())')
{
  echo "{\"raw\": [\"$topic\", \"0000000000000001\"]}"
  echo "{\"raw\": [\"$topic\", \"0001\", \"80\"]}"
  echo "{\"raw\": [\"$topic\", \"0000000000000001\", \"c1\"]}"
  echo "{\"raw\": [\"$topic\", \"0000000000000001\", \"$bad_schema\"]}"
  echo "{\"raw\": [\"$(printf other | xxd -p)\", \"0000000000000001\", \"80\"]}"
} | $pub send "$ep"
echo "== the tool ends (no started_at: the router joins it to its tool_start); an unknown session's event"
{ ev tool_end s1 "$call" 1500 '{"status":"ok"}'; ev tool_start nobody call-9 2000; } | $pub send "$ep"
sleep 0.3
curl -s "$r_url/v1/tool_events" | jq -c '.counters, .last_error,
  (.sessions[] | {session_id, status, tool_events, tool_ms})'
curl -s "$r_url/v1/programs" | jq -c '.programs[] | {program_id, status, tools_running}'
curl -s "$r_url/metrics" | grep -E '^dyn_tool_(events_total|sessions_acting)'
echo "== the router still serves"
chat "$r_url" '{"x-dynamo-session-id":"s1"}' '[{"role":"user","content":"and now?"}]'
stop "$r_pid"
grep -c 'malformed tool event' r.log
echo "== the trace's harness rows"
rid=$(jq -r 'select(.event_type == "request_end") | .request.request_id' trace | head -1)
jq -c --arg rid "$rid" --arg call "$call" 'select(.event_source == "harness") | del(.schema) |
  .tool.tool_call_id |= (if . == $call then "CALL" else . end) |
  if .dyn.request_id then .dyn.request_id |= (if . == $rid then "the first turn" else "another" end) else . end' trace
jq -r '.event_type' trace | sort | uniq -c | sed 's/^ *//'
