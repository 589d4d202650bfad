# Shows that every JSONL tool (dyn-trace cat, dyn-route decide, dyn-replay --sim, dyn-bench
# report, dyn-bind show) meets bad rows the same way: a non-UTF-8 row, a 100,000-deep nested row
# (no stack overflow) and a 70 MB line (over the 64 MiB line limit, skipped in constant memory)
# are each reported as file:line and skipped, unknown fields and blank lines are ignored, and the
# good rows around them still flow; an empty file is an empty input (exit 0) for the streaming
# tools and a clear "no rows" error (exit 3) for the report tools.
# bad FILE GOOD-ROWS...: the good rows with the bad lines between them.
bad() {
  local out=$1; shift
  {
    echo "$1"
    printf '{"timestamp":1,"session_id":"s2","note":"\xff\xfe"}\n'
    head -c 100000 /dev/zero | tr '\0' '['; echo
    head -c $((70 * 1024 * 1024)) /dev/zero | tr '\0' ' '; echo
    jq -c '. + {"x_unknown_field": {"a": 1}}' <<<"$2"
    echo
  } >"$out"
}
bad workload.jsonl '{"timestamp":0,"session_id":"s1","input_length":100,"output_length":10,"hash_ids":[1]}' \
  '{"timestamp":2,"session_id":"s3","input_length":100,"output_length":10,"hash_ids":[3]}'
mapfile -t rows < <(head -2 "$DYN_ROOT/tests/fixtures/bench/affinity-hard.jsonl")
bad trace.jsonl "${rows[0]}" "${rows[1]}"
: >empty.jsonl
# Each entry: the status wanted for the empty file, then the command.
for entry in "0 dyn-trace cat trace.jsonl" "0 dyn-route decide --workers 2 workload.jsonl" \
             "0 dyn-replay --sim --workers 2 workload.jsonl" "3 dyn-bench report --format json trace.jsonl" \
             "3 dyn-bind show trace.jsonl"; do
  empty_status=${entry%% *} cmd=${entry#* }
  echo "== $cmd"
  expect_status 0 $cmd >out.txt 2>err.txt
  echo "output lines $(wc -l <out.txt)"
  grep -o '[a-z]*.jsonl:[0-9]*: .*' err.txt
  grep -o '[0-9]* malformed rows skipped' err.txt
  expect_status "$empty_status" ${cmd% *} empty.jsonl >out.txt 2>err.txt
  echo "empty file: output lines $(wc -l <out.txt) $(grep -o 'error: .*' err.txt)"
done
