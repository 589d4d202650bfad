# Shows that dyn-route serve's request_end row for a request has every field dyn-replay's client
# row for the same request has (issue 21.11), against a dyn-mocker (usage, cached tokens, tool-less
# chat) and against a scripted worker that sends no usage at all (both rows then say the counts
# are estimated: dyn.output_tokens_estimated was lost in the router's rows). The only fields a
# router cannot know are the client's schedule (dyn.scheduled_ms, dyn.schedule_lag_ms) and the
# workload row's own ids (dyn.hash_ids, dyn.block_size, dyn.turn): listed here, nothing else may
# be missing.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
client_only='["dyn.block_size","dyn.hash_ids","dyn.schedule_lag_ms","dyn.scheduled_ms","dyn.turn"]'
printf '%s\n' '{"timestamp":0,"session_id":"s1","input_length":300,"output_length":6,"hash_ids":[1]}' \
  '{"session_id":"s1","delay":10,"input_length":700,"output_length":6,"hash_ids":[1,2]}' \
  '{"timestamp":20,"session_id":"s2","input_length":100,"output_length":3,"hash_ids":[9]}' >wl.jsonl
cat >no-usage.json <<'JSON'
{"routes": [{"match": {"path": "/v1/chat/completions"}, "status": 200,
  "headers": [["Content-Type", "text/event-stream"]], "framing": "chunked",
  "segments": [
    {"data": "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"},
    {"data": "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello there, \"}}]}\n\n", "sleep_ms": 5},
    {"data": "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"general kenobi\"}}]}\n\n", "sleep_ms": 5},
    {"data": "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"},
    {"data": "data: [DONE]\n\n"}]}]}
JSON
start_mocker m --worker-id 0
start_scripted s no-usage.json
for w in m s; do
  url="${w}_url"
  rm -f tr.jsonl
  start_router r --worker "${!url}" --request-trace --request-trace-file-path "$PWD/tr.jsonl" --request-trace-file-format jsonl
  expect_status 0 dyn-replay --url "$r_url" --model mock-model wl.jsonl >client.jsonl 2>replay.err
  echo "== worker $w: client rows $(wc -l <client.jsonl)"
  stop "$r_pid"
  jq -c '{id: .request.x_request_id, keys: [paths(type != "object") | map(select(type == "string")) | join(".")] | unique}' client.jsonl >ck.jsonl
  jq -c '{id: .request.x_request_id, keys: [paths(type != "object") | map(select(type == "string")) | join(".")] | unique}' tr.jsonl >rk.jsonl
  jq -n -c --slurpfile c ck.jsonl --slurpfile r rk.jsonl --argjson only "$client_only" '
    $c[] as $row | ($r | map(select(.id == $row.id)) | first) as $rr
    | {id: $row.id, router_row: ($rr != null),
       missing_in_router: (($row.keys - ($rr.keys // [])) - $only)}' | sort
  echo "estimated flags (client, router): $(jq -c '[.dyn.input_tokens_estimated, .dyn.output_tokens_estimated]' client.jsonl | sort -u | tr '\n' ' ')/ $(jq -c '[.dyn.input_tokens_estimated, .dyn.output_tokens_estimated]' tr.jsonl | sort -u | tr '\n' ' ')"
done
