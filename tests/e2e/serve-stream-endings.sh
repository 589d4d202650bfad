# Shows stream completeness and errors inside streams (issue 21.2, 21.3) through dyn-route serve,
# dyn-trace capture and dyn-replay, against a scripted worker (tests/fixtures/serve/
# stream-endings.json). For each API a stream with its terminal event is ok; one that finished
# (finish reason) but lacks the terminal event ([DONE], message_stop) is ok with dyn.warning; one
# cut cleanly before any finish is an error "stream_incomplete", never a success (dyn-bench counts
# it as an error). An error inside a 200 stream (Anthropic overloaded_error, an OpenAI error chunk)
# keeps the upstream's type and message in dyn.error, and counts as the worker's error in /metrics.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/serve/stream-endings.json"
start_router r --worker "$w_url" --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
start_capture cap --upstream "$w_url" --request-trace-file-path "$PWD/cap.jsonl" --request-trace-file-format jsonl
send() {  # send URL PATH MARKER
  local body
  case $2 in
    /v1/chat/completions) body="{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":\"user\",\"content\":\"$3\"}]}" ;;
    /v1/messages) body="{\"model\":\"m\",\"stream\":true,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"$3\"}]}" ;;
    /v1/responses) body="{\"model\":\"m\",\"stream\":true,\"input\":\"$3\"}" ;;
  esac
  curl -sS -N -o /dev/null -H 'content-type: application/json' -H "x-request-id: $3" "$1$2" -d "$body"
}
cases=(/v1/chat/completions:chat-complete /v1/chat/completions:chat-no-done /v1/chat/completions:chat-cut
       /v1/chat/completions:chat-error-chunk /v1/messages:msg-complete /v1/messages:msg-no-stop /v1/messages:msg-cut
       /v1/messages:msg-overloaded /v1/responses:rsp-complete /v1/responses:rsp-cut)
for front in r cap; do
  url="${front}_url"
  for c in "${cases[@]}"; do send "${!url}" "${c%%:*}" "${c#*:}"; done
done
echo "router /metrics: $(curl -sS "$r_url/metrics" | grep -E '^dyn_worker_errors_total' | sed 's/,url="[^"]*"//')"
stop "$r_pid"
stop "$cap_pid"
for front in r cap; do
  echo "== $front"
  jq -r '[.request.x_request_id, .dyn.status, (.dyn.error.type // "-"), (.dyn.error.message // "-"), (.dyn.warning // "-")] | @tsv' $front.jsonl
  dyn-bench report --format json $front.jsonl 2>/dev/null | jq -c '{requests: .request_count.avg, errors: .error_request_count.avg}'
done
echo "== dyn-replay (chat)"
# Each entry: the script, then the exit status dyn-replay must give (4: no request succeeded).
for entry in chat-complete:0 chat-no-done:0 chat-cut:4 chat-error-chunk:4; do
  m=${entry%:*}
  printf '{"timestamp":0,"input_length":8,"output_length":2,"text_input":"%s"}\n' "$m" >wl.jsonl
  expect_status "${entry#*:}" dyn-replay --url "$w_url" --model m wl.jsonl 2>/dev/null >row.jsonl
  echo "$m: $(jq -r '[.dyn.status, (.dyn.error.type // "-"), (.dyn.error.message // "-"), (.dyn.warning // "-")] | @tsv' row.jsonl)"
done
