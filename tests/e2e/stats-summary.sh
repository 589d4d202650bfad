# Shows dyn-trace stats: per-session and per-worker summaries (requests, tokens, cached ratio,
# TTFT/latency percentiles by linear interpolation, tool calls and tool events), JSONL and table.
row() {  # session worker input cached output ttft total tools
  local tc=""
  [[ $8 -gt 0 ]] && tc=',"finish_reason_metadata":{"finish_reason":"tool_calls","tool_calls":[{"choice_index":0,"tool_call_index":0,"id":"c","name":"t"}]}'
  printf '{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":%s,"agent_context":{"session_id":"%s"},"request":{"request_id":"r","input_tokens":%s,"output_tokens":%s,"cached_tokens":%s,"ttft_ms":%s,"total_time_ms":%s,"worker":{"decode_worker_id":%s}%s}}\n' \
    1000 "$1" "$3" "$5" "$4" "$6" "$7" "$2" "$tc"
}
{
  row a 0 1000 0 10 100 500 1
  row a 0 2000 1000 20 50 300 0
  row a 1 3000 2000 30 80 400 1
  row b 1 100 0 5 10 20 0
  echo '{"schema":"dynamo.request.trace.v1","event_type":"tool_end","event_time_unix_ms":1500,"agent_context":{"session_id":"a"},"tool":{"tool_call_id":"c","tool_class":"t","duration_ms":42.5}}'
  echo '{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1600,"agent_context":{"session_id":"b"},"request":{"request_id":"e","input_tokens":9},"dyn":{"status":"error"}}'
  echo '{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1700,"request":{"request_id":"w","input_tokens":9},"dyn":{"warmup":true}}'
} | gzip -c >t.jsonl.gz
dyn-trace stats t.jsonl.gz
echo "--- table"
dyn-trace stats --format table t.jsonl.gz
