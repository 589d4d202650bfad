# Shows a workload row's priority reaching the engine through the router (SPEC 3.4, 6.3, 8): live
# dyn-replay sends it as nvext.agent_hints.priority, dyn-route serve resolves it and, with
# --worker-priority-polarity, forwards it as the body's `priority` in the polarity the engine
# schedules by. dyn-mocker --max-num-seqs 1 runs one sequence at a time, so three rows that arrive
# while a long one (a) runs (b priority 1, c 5, d 3; higher is more important) are served in the
# engine's admission order, most important first: c d b, both under vLLM's --scheduling-policy
# priority with lower-first (the router negates) and under SGLang's --enable-priority-scheduling
# with higher-first (forwarded the wrong way round, vLLM would serve b d c). A warm-up request
# goes first, so no first-connection cost delays a. The router's request_end rows carry each
# row's priority, read from the body, and so do the client's. An unknown polarity is a usage error.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
cat >w.jsonl <<'ROWS'
{"request_id":"a","session_id":"a","timestamp":0,"input_length":64,"output_length":400,"hash_ids":[1]}
{"request_id":"b","session_id":"b","timestamp":300,"input_length":64,"output_length":2,"hash_ids":[2],"priority":1}
{"request_id":"c","session_id":"c","timestamp":800,"input_length":64,"output_length":2,"hash_ids":[3],"priority":5}
{"request_id":"d","session_id":"d","timestamp":1300,"input_length":64,"output_length":2,"hash_ids":[4],"priority":3}
ROWS
run() {  # run NAME POLARITY [MOCKER FLAGS...]: the order b, c, d end in
  local name=$1 polarity=$2 u
  start_mocker "w_$name" --max-num-seqs 1 --block-size 64 "${@:3}"
  u="w_${name}_url"
  start_router "r_$name" --worker "${!u}" --kv-cache-block-size 64 --worker-priority-polarity "$polarity" \
    --request-trace --request-trace-file-path "$PWD/$name.trace.jsonl" --request-trace-file-format jsonl
  u="r_${name}_url"
  dyn-replay w.jsonl -u "${!u}" -m mock-model --block-size 64 --ignore-eos --warmup-request-count 1 -o "$name.jsonl" 2>"$name.err" || cat "$name.err"
  local p="r_${name}_pid"; stop "${!p}"
  p="w_${name}_pid"; stop "${!p}"
  echo "$name ($polarity${3:+, ${*:3}}): $(jq -r 'select(.request.request_id != "a" and (.dyn.warmup | not)) | .request.request_id' "$name.jsonl" | paste -sd' ')"
}
run vllm lower-first --scheduling-policy priority
run sglang higher-first --enable-priority-scheduling
echo "== the router's rows and the client's (vllm)"
jq -c 'select(.request.x_request_id) | {id: .request.x_request_id, priority: .agent_context.priority, source: .dyn.priority_source}' \
  vllm.trace.jsonl |
  sort
jq -c 'select(.dyn.warmup | not) | {id: .request.request_id, priority: .agent_context.priority}' vllm.jsonl | sort
expect_status 2 dyn-route serve --worker http://127.0.0.1:9 --worker-priority-polarity sideways 2>/dev/null
echo "unknown polarity: 2"
