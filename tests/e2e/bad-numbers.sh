# Numbers at the edge of their range are per-row errors or finish at once, never a hang or a
# wrapped value (found by a new-user pass, session 17): a negative or 1e300 timestamp is an error
# naming its line in every reader; an input_length of 2^63 - 1 routes at once in decide (the end
# model looped once per 8,192-token chunk); an output_length of 2^64 - 1 is "never fits the KV
# pool" in the simulator (the block count wrapped to a small one and the request decoded for ever);
# --sim honours --lenient as the live replay does; dyn-trace sessionize writes the good rows.
# A Dynamo request_end record whose start lies past the range (1.8e16 ms, found by fuzz_workload)
# is an error naming its line in decide and --sim too (it was routed, and simulated 17 trillion s).
good() { echo "{\"timestamp\":$1,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,$2]}"; }
for ts in -100 1e300; do
  { good 0 2; echo "{\"timestamp\":$ts,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,4]}"; good 20 3; } >ts.jsonl
  echo "== timestamp $ts"
  expect_status 3 timeout 20 dyn-route decide --workers 2 ts.jsonl >d.jsonl 2>d.err
  grep -c route_decision d.jsonl
  jq -r 'select(.dyn.error) | "\(.event_time_unix_ms) \(.dyn.error.message)"' d.jsonl
  expect_status 3 timeout 20 dyn-replay --sim --workers 2 ts.jsonl >/dev/null 2>s.err
  grep -c "ts.jsonl:2: timestamp .* is out of range" s.err
  expect_status 3 timeout 20 dyn-trace sessionize ts.jsonl >z.jsonl 2>z.err
  grep -c "ts.jsonl:2: timestamp .* is out of range" z.err
  wc -l <z.jsonl  # the good rows still flow
done
echo "== input_length 2^63 - 1 in decide"
{ good 0 2; echo '{"timestamp":10,"input_length":9223372036854775807,"output_length":5,"hash_ids":[1,2]}'; good 20 3; } >in.jsonl
expect_status 0 timeout 20 dyn-route decide --workers 2 in.jsonl | grep -o '"input_tokens":[0-9]*'
echo "== output_length 2^64 - 1 in the simulator"
{ good 0 2; echo '{"timestamp":10,"input_length":600,"output_length":18446744073709551615,"hash_ids":[1,2]}'; good 20 3; } >out.jsonl
expect_status 0 timeout 20 dyn-replay --sim --workers 2 out.jsonl 2>/dev/null >sim.jsonl
jq -r '"\(.request.request_id) \(.dyn.error.message // "ok")"' sim.jsonl | sort
echo "== --sim --lenient"
{ echo '{"timestamp":0,"input_length":20,"output_length":5,"hash_ids":[1,2]}'; good 10 3; } >len.jsonl
expect_status 3 dyn-replay --sim len.jsonl >/dev/null 2>&1
expect_status 0 dyn-replay --sim --lenient len.jsonl 2>l.err | wc -l
grep -c "lenient: sending exactly input_length tokens" l.err
echo "== Dynamo record starting past the range"
rec() {
  echo "{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"event_time_unix_ms\":$1,\"request\":{\"request_id\":\"r$2\",\"output_tokens\":5,\"total_time_ms\":100,\"replay\":{\"trace_block_size\":64,\"input_length\":128,\"input_sequence_hashes\":[11,$2]}}}"
}
{ rec 1777312800000 1; rec 17773128012801000 2; rec 1777312800500 3; } >dyn.jsonl
expect_status 3 timeout 20 dyn-route decide --workers 2 dyn.jsonl >d.jsonl 2>d.err
jq -r '"\(.request.request_id) \(.dyn.error.message // "ok")"' d.jsonl
expect_status 3 timeout 20 dyn-replay --sim --workers 2 dyn.jsonl >/dev/null 2>s.err
grep -c "dyn.jsonl:2: request start .* is out of range" s.err
