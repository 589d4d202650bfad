# Shows case 27 (envoyproxy/ai-gateway#1631): a scripted worker streams /v1/messages whose final
# message_delta carries usage {output_tokens: 12} (A), the cumulative form with input_tokens 25 (B)
# or input_tokens 0 (C). Through dyn-route serve and through dyn-trace capture the client gets each
# stream byte for byte, and every request_end row has input_tokens 25 (message_start's count: a
# later 0 never replaces it) and output_tokens 12 (cumulative, not 1 + 12).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
c="$DYN_ROOT/tests/fixtures/cases/27-anthropic-delta-input-zero"
start_scripted w "$c/script.json"
start_router r --worker "$w_url" --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
start_capture cap --upstream "$w_url" --request-trace-file-path "$PWD/cap.jsonl" --request-trace-file-format jsonl
for front in r cap; do
  url="${front}_url"
  for v in A B C; do
    curl -sS -N -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
      "${!url}/v1/messages" --data-binary @"$c/request-$v.json" >"$front-$v.sse"
    if cmp -s "$front-$v.sse" "$c/stream-$v.sse"; then same=yes; else same=no; fi
    echo "$front $v: client stream byte for byte: $same"
  done
done
stop "$r_pid"
stop "$cap_pid"
for front in r cap; do
  echo "== $front rows"
  jq -c '[.event_source, .request.input_tokens, .request.output_tokens, .request.finish_reason_metadata.finish_reason, .dyn.status, (.dyn | has("input_tokens_estimated"))]' $front.jsonl
done
