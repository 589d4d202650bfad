# Shows that dyn-trace stats reports tool time per session and per tool name: from harness
# tool_end/tool_error rows where a session has them, else inferred from the gap between a reply
# that stopped for a tool (finish_reason tool_calls, or tool calls listed) and the session's next
# request; in the JSON and the table forms.
cat >t.jsonl <<'ROWS'
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":2000,"agent_context":{"session_id":"x"},"request":{"request_id":"x1","request_received_ms":1000,"input_tokens":10,"output_tokens":5,"finish_reason_metadata":{"finish_reason":"tool_calls","tool_calls":[{"choice_index":0,"tool_call_index":0,"id":"c1","name":"Bash"}]}}}
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":3500,"agent_context":{"session_id":"x"},"request":{"request_id":"x2","request_received_ms":2700,"input_tokens":20,"output_tokens":5,"finish_reason_metadata":{"finish_reason":"tool_calls","tool_calls":[{"choice_index":0,"tool_call_index":0,"id":"c2","name":"Read"},{"choice_index":0,"tool_call_index":1,"id":"c3","name":"Bash"}]}}}
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5000,"agent_context":{"session_id":"x"},"request":{"request_id":"x3","request_received_ms":4000,"input_tokens":30,"output_tokens":5,"finish_reason_metadata":{"finish_reason":"stop"}}}
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":9000,"agent_context":{"session_id":"x"},"request":{"request_id":"x4","request_received_ms":8000,"input_tokens":40,"output_tokens":5}}
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":2000,"agent_context":{"session_id":"y"},"request":{"request_id":"y1","request_received_ms":1000,"input_tokens":10,"output_tokens":5,"finish_reason_metadata":{"finish_reason":"tool_calls"}}}
{"schema":"dynamo.request.trace.v1","event_type":"tool_start","event_time_unix_ms":2010,"event_source":"harness","agent_context":{"session_id":"y"},"tool":{"tool_call_id":"t1","tool_class":"Bash"}}
{"schema":"dynamo.request.trace.v1","event_type":"tool_end","event_time_unix_ms":2310,"event_source":"harness","agent_context":{"session_id":"y"},"tool":{"tool_call_id":"t1","tool_class":"Bash","duration_ms":300}}
{"schema":"dynamo.request.trace.v1","event_type":"tool_error","event_time_unix_ms":2500,"event_source":"harness","agent_context":{"session_id":"y"},"tool":{"tool_call_id":"t2","tool_class":"WebFetch","status":"error","duration_ms":150}}
{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":4000,"agent_context":{"session_id":"y"},"request":{"request_id":"y2","request_received_ms":3000,"input_tokens":20,"output_tokens":5}}
ROWS
echo "== x: inferred (700 ms after x1's Bash, 500 ms after x2's Read+Bash; x3 stopped: its gap is no tool's)"
echo "== y: harness rows (Bash 300 ms, WebFetch 150 ms), its 1000 ms gap not counted twice"
dyn-trace stats t.jsonl --format json | jq -c 'select(.kind != "worker") | {kind, id: (.session_id // .tool // "total"),
  tool_calls, tool_events, calls, tool_ms, mean_ms, tool_source}'
echo "== table"
dyn-trace stats t.jsonl --format table | awk '{print $1, $2, $(NF-1), $NF}'
