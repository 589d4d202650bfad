# Issue 18: dyn-replay --sim honours the live replay's load controls with the same meaning
# (SPEC 6.3): --speedup divides the schedule and session delays, the fixed-schedule offsets cut
# and shift it, --request-count keeps the first N rows, --request-rate replaces the timestamps by
# an arrival process (constant, Poisson, gamma; seeded), --concurrency caps requests in flight on
# the virtual clock (alone: a closed loop), --benchmark-duration stops sending and cancels what
# still runs after --benchmark-grace-period. A flag the
# simulator cannot honour is a usage error naming it (exit 2), never silently ignored: before
# this, every one of these flags was accepted and ignored.
set -u
# Ten independent requests one second apart, then a two-turn session with a 1 s delay.
for i in $(seq 0 9); do
  echo "{\"timestamp\": $((i * 1000)), \"input_length\": 512, \"output_length\": 16, \"hash_ids\": [$((i + 1))]}"
done > w.jsonl
cat > s.jsonl <<'ROWS'
{"timestamp": 0, "session_id": "s", "input_length": 512, "output_length": 8, "hash_ids": [1]}
{"session_id": "s", "delay": 1000, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]}
ROWS
sim() { dyn-replay --sim --sim-epoch-unix-ms 0 "$@" 2>err; }
# Starts (request_received_ms) in row order, and the span first start .. last start.
starts() { jq -s -c 'sort_by(.request.request_received_ms) | map(.request.request_received_ms)'; }
span() { jq -s 'map(.request.request_received_ms) | max - min'; }
# Most requests in flight at once (an end and a start at the same instant do not overlap).
overlap() {
  jq -s '[.[] | ([.request.request_received_ms, 1], [.event_time_unix_ms, -1])] | sort_by(.[0], .[1]) |
         reduce .[] as $e ({n: 0, max: 0}; .n += $e[1] | .max = ([.max, .n] | max)) | .max'
}

echo "== fixed schedule: span without and with --speedup 2"
sim w.jsonl | span
sim w.jsonl --speedup 2 | span
echo "== session delay 1000 ms: turn 1 starts this long after turn 0 ends, without and with --speedup 4"
for sp in 1 4; do
  sim s.jsonl --speedup $sp | jq -s 'sort_by(.dyn.turn) | .[1].request.request_received_ms - .[0].event_time_unix_ms'
done
echo "== --request-count 4: rows and their ids"
sim w.jsonl --request-count 4 | jq -s -c 'map(.request.request_id)'
echo "== offsets 3000..6000 (inclusive): the start offset becomes time 0"
sim w.jsonl --fixed-schedule-start-offset 3000 --fixed-schedule-end-offset 6000 | starts
grep -o 'not simulated: .*' err
echo "== --fixed-schedule-auto-offset on a schedule that begins at 5000 ms"
jq -c '.timestamp += 5000' w.jsonl > late.jsonl
sim late.jsonl --request-count 3 | starts
sim late.jsonl --request-count 3 --fixed-schedule-auto-offset | starts
echo "== --request-rate 10 (constant): one start every 100 ms in row order"
sim w.jsonl --request-rate 10 | starts
echo "== --request-rate 10 poisson, seed 7: deterministic, not evenly spaced, mean gap near 100 ms"
sim w.jsonl --request-rate 10 --request-rate-mode poisson --seed 7 | starts > p1
sim w.jsonl --request-rate 10 --request-rate-mode poisson --seed 7 | starts > p2
sim w.jsonl --request-rate 10 --request-rate-mode poisson --seed 8 | starts > p3
cmp -s p1 p2 && echo "same seed, same arrivals"
cmp -s p1 p3 || echo "another seed, other arrivals"
jq -c '[. as $s | range(1; length) | $s[.] - $s[. - 1]] | {distinct_gaps: (unique | length > 3), mean_gap_between_40_and_250: ((add / length) as $m | $m > 40 and $m < 250)}' p1
echo "== gamma arrivals (shape 4) start at 0 and run in row order"
sim w.jsonl --request-rate 10 --request-rate-mode gamma --request-rate-gamma-shape 4 --seed 7 | jq -s -c '{n: length, first: (map(.request.request_received_ms) | min)}'
echo "== most requests in flight: all ten at timestamp 0, then capped by --concurrency"
jq -c '.timestamp = 0' w.jsonl > burst.jsonl
sim burst.jsonl | overlap
sim burst.jsonl --fixed-schedule --concurrency 3 | overlap
sim burst.jsonl --concurrency 1 | overlap
sim w.jsonl --request-rate 1000 --concurrency 2 | overlap
echo "== --concurrency 1 serialises: each request starts when the one before ends"
sim burst.jsonl --concurrency 1 | jq -s 'sort_by(.request.request_received_ms) | . as $r |
  [range(1; length) | $r[.].request.request_received_ms - $r[. - 1].event_time_unix_ms] | map(. == 0 or . == 1) | all'
echo "== rows without timestamps run under --concurrency or --request-rate (and fail without)"
jq -c 'del(.timestamp)' w.jsonl > nots.jsonl
sim nots.jsonl --concurrency 2 | jq -s length
sim nots.jsonl --request-rate 5 | jq -s length
expect_status 3 sim nots.jsonl >/dev/null
echo "== --benchmark-duration 0.45 with --request-rate 10: starts at 0..400 ms are sent"
sim w.jsonl --request-rate 10 --benchmark-duration 0.45 | starts
grep -o 'not simulated: .*' err
echo "== and --benchmark-grace-period 0: requests still running at 0.45 s are cancelled (rows say so)"
sim w.jsonl --request-rate 10 --benchmark-duration 0.45 --benchmark-grace-period 0 |
  jq -r '[.request.request_received_ms, .dyn.status] | @tsv' | sort -n
grep -o '[0-9]* requests still in flight after --benchmark-grace-period were cancelled' err
echo "== usage errors (exit 2, naming the flag)"
for args in "--url http://127.0.0.1:9" "--no-streaming" "--warmup-request-count 2" "--session-headers claude" \
            "--request-rate 5 --fixed-schedule-start-offset 0" "--concurrency 2 --fixed-schedule-auto-offset" \
            "--fixed-schedule --request-rate 5" "--request-rate-mode poisson" \
            "--request-rate 5 --request-rate-gamma-shape 2"; do
  # shellcheck disable=SC2086
  expect_status 2 dyn-replay --sim w.jsonl $args >/dev/null 2>err
  sed 's/^dyn-replay: //' err | head -1
done
echo "== no load flag: the recorded schedule, as before"
sim w.jsonl | starts
