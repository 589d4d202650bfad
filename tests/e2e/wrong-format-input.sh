# Shows wrong-format input (issue 21.8): a CSV given as a Mooncake workload (dyn-replay live and
# --sim, dyn-route decide) and AIPerf's JSON summary export given to dyn-bench report read zero
# usable rows: exit 3 naming the expected format and the way out. A --where that does not parse
# is a usage error (2); a --where field no row has warns once; an integer past 64 bits names its
# field and line and the workload is refused (3); the reader summary counts rows read, rows
# skipped and NUL bytes.
c="$DYN_ROOT/tests/fixtures/cases/42-jsonl-utf8-bom"
tail -c +4 "$c/azure-bom.csv" >trace.csv
printf '{\n  "time_to_first_token": {"unit": "ms", "avg": 12.5},\n  "request_count": {"unit": "requests", "avg": 3}\n}\n' >profile_export_aiperf.json
# run STATUS COMMAND...: COMMAND must exit STATUS; prints it and what it said on stderr.
run() {
  expect_status "$1" "${@:2}" >out.txt 2>err.txt
  echo "== ${*:2}"
  grep -v ': malformed JSON row' err.txt | grep -v 'warning: .* malformed rows skipped'
}
run 3 dyn-replay --url http://127.0.0.1:9 --model m trace.csv
run 3 dyn-replay --sim trace.csv
run 3 dyn-route decide --workers 2 trace.csv
run 3 dyn-bench report profile_export_aiperf.json
printf '%s\n' '{"event_type":"request_end","request":{"request_id":"a","input_tokens":5}}' >rows.jsonl
run 2 dyn-trace filter --where 'request.input_tokens >> 3' rows.jsonl
run 0 dyn-trace filter --where 'request.input_tokns > 3' rows.jsonl
printf '%s\n' '{"timestamp":0,"input_length":64,"output_length":2,"hash_ids":[1]}' \
  '{"timestamp":1,"input_length":18446744073709551616,"output_length":2,"hash_ids":[2]}' >big.jsonl
run 3 dyn-replay --sim big.jsonl
printf '{"timestamp":0,"input_length":64,"output_length":2,"hash_ids":[1]}\n\0\0\0\0\0\0\0\0\n{"timestamp":1,"input_length":64,"output_length":2,"hash_ids":[2]}\n' >nul.jsonl
dyn-trace cat nul.jsonl 2>&1 >/dev/null | grep 'rows read'
dyn-route decide --workers 1 nul.jsonl 2>&1 >/dev/null | grep 'rows read'
