# Every run records its configuration (cli::run_config, as AIPerf records its input config):
# dyn-route decide --summary writes {"config", "summary"} like dyn-replay --summary, with counts
# that agree with the rows it wrote; dyn-route serve and dyn-trace capture serve theirs at the
# admin endpoint GET /v1/run-config and write it once beside their trace segments
# (PREFIX.run-config.json), including the trace settings taken from DYN_REQUEST_TRACE* variables.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
head -40 "$DYN_ROOT/data/quickstart/conversation-slice.jsonl" >w.jsonl
sha=$(sha256sum w.jsonl | cut -d' ' -f1)
echo "== dyn-route decide --summary"
DYN_ROUTER_MODE=kv expect_status 0 dyn-route decide w.jsonl --workers 2 --seed 7 --summary d.json >rows.jsonl
jq -c '{tool: .config.tool, sub: .config.subcommand, mode: .config.options["--router-mode"],
        from: .config.sources["--router-mode"], env: .config.environment, workers: .config.options["--workers"],
        seed: .config.options["--seed"], sha256_ok: (.config.inputs[0].sha256 == $sha),
        bytes_ok: (.config.inputs[0].bytes == $bytes)}' \
  --arg sha "$sha" --argjson bytes "$(stat -c %s w.jsonl)" d.json
jq -c '.summary | del(.routed_per_worker, .input_tokens, .cached_tokens, .prompt_cache_hit_pct)' d.json
# The counts agree with the rows written.
jq -s -c '{routed: length, per_worker: (group_by(.request.worker.decode_worker_id) | map(length)),
           input: (map(.request.input_tokens) | add), cached: (map(.request.cached_tokens) | add)}' rows.jsonl >from-rows.json
jq -c '{routed: .summary.routed, per_worker: .summary.routed_per_worker, input: .summary.input_tokens,
        cached: .summary.cached_tokens}' d.json | cmp - from-rows.json && echo "summary counts = counts of the rows"
jq -r '.summary | (.prompt_cache_hit_pct - 100 * .cached_tokens / .input_tokens | fabs < 1e-9)' d.json
# Rejected and malformed rows are counted and the exit status recorded.
{ head -3 w.jsonl; echo 'not json'; echo '{"timestamp": 99999999, "input_length": 10, "output_length": 2, "hash_ids": "x"}'; } >bad.jsonl
expect_status 3 dyn-route decide bad.jsonl --workers 2 --summary bad.json >/dev/null 2>&1
jq -c '.summary | {requests, routed, rejected, malformed_lines, exit_status}' bad.json
echo "== dyn-route serve: GET /v1/run-config and PREFIX.run-config.json"
start_mocker m --speedup-ratio 100
DYN_REQUEST_TRACE_FILE_ROLL_LINES=1000 start_router r --worker "$m_url" --router-mode kv \
  --router-session-affinity-ttl-secs 60 --request-trace --request-trace-file-path "$PWD/tr"
curl -sS "$r_url/v1/run-config" >served.json
jq -c '{tool, sub: .subcommand, workers: .options["--worker"], mode: .options["--router-mode"],
        ttl: .options["--router-session-affinity-ttl-secs"], seed: .options["--seed"], inputs,
        trace: (.trace | {enabled, prefix_ok: (.prefix == $p), gzip, roll_lines}),
        env: .environment}' --arg p "$PWD/tr" served.json | sed "s|$m_url|MOCKER_URL|"
jq -S . tr.run-config.json | cmp - <(jq -S . served.json) && echo "tr.run-config.json = GET /v1/run-config"
chat "$r_url" '{"x-dynamo-session-id":"s1"}' '[{"role":"user","content":"hello"}]'
stop "$r_pid"
ls tr.*
echo "rows in the segments (the record is not one of them): $(dyn-trace cat tr.*.jsonl.gz | wc -l)"
echo "== dyn-trace capture: the same record"
dyn-trace capture --upstream "$m_url" --port 0 --port-file c.port --request-trace-file-path "$PWD/cap" 2>c.log &
c_pid=$!
_dyn_pids+=("$c_pid")
wait_file c.port
curl -sS "http://127.0.0.1:$(cat c.port)/v1/run-config" |
  jq -c '{tool, sub: .subcommand, upstream: .options["--upstream"], trace: .trace.enabled}' | sed "s|$m_url|MOCKER_URL|"
stop "$c_pid"
jq -c '{tool, sub: .subcommand}' cap.run-config.json
