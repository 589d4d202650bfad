# Shows the command-line conventions a user of AIPerf and of Unix tools expects: an unknown flag
# is a usage error that suggests the closest flag; AIPerf's spellings (--input-file,
# --custom-dataset-type, --num-requests, --random-seed, --artifact-dir) work as their dyn
# equivalents; a bad value in an environment variable names the variable; a setting taken from
# the environment is said on stderr and recorded in the run's summary with the input's SHA-256;
# tables only on a terminal (JSON in a pipe) and never HTML to a terminal; servers print one
# start-up line (naming the one file of a jsonl trace); errors name what the user typed.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
head -12 "$DYN_ROOT/data/quickstart/conversation-slice.jsonl" >w.jsonl
echo "== unknown flags"
expect_status 2 dyn-replay w.jsonl --num-request 3 2>&1
expect_status 2 dyn-route serve --router-mod kv 2>&1
expect_status 2 dyn-bench report --formt json w.jsonl 2>&1
expect_status 2 dyn-trace filter --completely-unknown x 2>&1
echo "== environment variables: a bad value names the variable; a good one is said and recorded"
DYN_ROUTER_MODE=round-rob expect_status 2 dyn-replay w.jsonl --sim 2>&1 >/dev/null
DYN_ROUTER_MODE=kv dyn-replay w.jsonl --sim --summary s.json 2>&1 >env.jsonl | grep -o 'settings from the environment: .*'
jq -c '{mode: .config.options["--router-mode"], from: .config.sources["--router-mode"], env: .config.environment,
        workers: .config.options["--workers"], seed: .config.options["--seed"], tool: .config.tool,
        sha256_ok: (.config.inputs[0].sha256 == $sha), requests: .summary.requests}' \
  --arg sha "$(sha256sum w.jsonl | cut -d' ' -f1)" s.json
dyn-replay w.jsonl --sim --router-mode kv 2>/dev/null | cmp - env.jsonl && echo "same rows as --router-mode kv"
echo "== AIPerf spellings (--sim): --input-file, --custom-dataset-type, --random-seed, --artifact-dir"
dyn-replay w.jsonl --sim --seed 3 2>/dev/null >a.jsonl
dyn-replay --input-file w.jsonl --custom-dataset-type mooncake_trace --sim --random-seed 3 --artifact-dir art 2>/dev/null
cmp a.jsonl art/requests.jsonl && echo "artifact rows identical"
ls art
jq -c '{tool: .input_config.tool, seed: .input_config.options["--seed"], count: .request_count.avg}' art/profile_export_aiperf.json
expect_status 2 dyn-replay --custom-dataset-type multi_turn w.jsonl --sim 2>&1 >/dev/null
expect_status 3 dyn-replay --custom-dataset-type single_turn w.jsonl --sim 2>&1 >/dev/null
echo "== AIPerf spelling --num-requests (live)"
start_mocker m --speedup-ratio 100
dyn-replay w.jsonl --url "$m_url" --num-requests 3 --speedup 100 --no-progress 2>/dev/null | wc -l
grep -c 'listening on' m.log
echo "== formats: json in a pipe, a table on a terminal, no HTML to a terminal"
dyn-bench report a.jsonl | jq -r 'has("time_to_first_token")'
script -qec "dyn-bench report a.jsonl" /dev/null | grep -c 'Time to First Token'
script -qec "dyn-bench compare a.jsonl env.jsonl" /dev/null | grep -c 'B/A'
dyn-bench compare a.jsonl env.jsonl | jq -r 'type'
expect_status 2 script -qec "dyn-bench plot a.jsonl" /dev/null | tr -d '\r'
dyn-bench plot a.jsonl | grep -c '<svg'
echo "== servers: one start-up line"
start_router r --worker "$m_url" --router-mode kv --router-session-affinity-ttl-secs 60
grep 'listening on' r.log | sed 's/:[0-9]*;/:PORT;/'
dyn-trace capture --upstream "$m_url/v1" --port 0 --port-file c.port 2>c.log &
_dyn_pids+=($!)
wait_file c.port
sleep 0.2
grep 'listening on' c.log | sed 's/:[0-9]*;/:PORT;/; s/upstream http:\/\/127.0.0.1:[0-9]*/upstream URL/'
echo "== a jsonl trace: the start-up line names its one file; a glob over the prefix skips the run config"
start_router j --worker "$m_url" --request-trace --request-trace-file-format jsonl \
  --request-trace-file-path "$PWD/jt.jsonl" --request-trace-file-flush-interval-ms 60000
grep 'listening on' j.log | sed "s/:[0-9]*;/:PORT;/; s|$PWD/||"
chat "$j_url" '{}' '[{"role":"user","content":"hi"}]' >/dev/null
stop "$j_pid"
ls jt*
dyn-trace cat jt* 2>cat.err | jq -r .event_type
sed "s|$PWD/||" cat.err
expect_status 3 dyn-trace cat jt.jsonl.run-config.json 2>&1  # only the run configuration: nothing to read
echo "== messages that name what the user typed"
expect_status 2 dyn-replay w.jsonl --sim --speedup -1 2>&1
expect_status 2 dyn-replay w.jsonl --url "$m_url" -H 'X-Dynamo-Session-ID: mine' 2>&1
expect_status 4 dyn-trace cat w.jsonl -o /nonexistent/out.jsonl 2>&1
script -qec "dyn-trace cat" /dev/null </dev/null | tr -d '\r' | grep '^Usage'
expect_status 2 dyn-replay w.jsonl --url "$m_url" -H 'X-Foo : bar' 2>&1
expect_status 2 dyn-replay w.jsonl --url "$m_url" --kv-eviction session 2>&1
expect_status 2 dyn-route serve --worker "$m_url" --upstream-read-timeout-secs 0 2>&1
expect_status 2 dyn-mocker --speedup-ratio inf 2>&1
echo "== an unwritable --summary fails before the run (no rows, no run summary), a bad threshold names its value"
expect_status 4 dyn-replay w.jsonl --sim --summary /nonexistent/s.json 2>&1
expect_status 4 dyn-route decide --workers 2 --summary /nonexistent/s.json w.jsonl 2>&1
expect_status 2 dyn-replay w.jsonl --sim --admission thunderagent --pause-threshold 3 2>&1
