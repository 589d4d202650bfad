# Shows that cat unwraps {"timestamp","event"} envelopes, skips and counts malformed lines with
# file:line, and --sort orders rows stably by event_time_unix_ms.
printf '%s\n' '{"timestamp":1,"event":{"event_type":"request_end","event_time_unix_ms":30,"request":{"request_id":"c"}}}' \
  '{"event_type":"request_end","event_time_unix_ms":10,"request":{"request_id":"a"}}' \
  'not json' \
  '{"event_type":"request_end","event_time_unix_ms":20,"request":{"request_id":"b1"}}' \
  '{"event_type":"request_end","event_time_unix_ms":20,"request":{"request_id":"b2"}}' >in.jsonl
dyn-trace cat in.jsonl
echo "--- sorted"
dyn-trace cat --sort in.jsonl 2>/dev/null | jq -r .request.request_id | tr '\n' ' '; echo
dyn-trace cat -o out.jsonl in.jsonl 2>/dev/null && wc -l <out.jsonl
