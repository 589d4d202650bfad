# Shows that a live dyn-replay refuses load flags it cannot honour, as --sim does, with exit 2
# naming the flag and before it contacts the endpoint (the URL here has no server: a request would
# be exit 4): --fixed-schedule with --request-rate (the schedule used to win silently), and the
# fixed-schedule offsets with --request-rate, with --concurrency, or on a workload without
# timestamps (they used to be ignored with a warning); --request-rate-mode and
# --request-rate-gamma-shape without the rate they shape (accepted and ignored before).
printf '%s\n' '{"timestamp":0,"input_length":10,"output_length":2,"hash_ids":[1]}' \
              '{"timestamp":100,"input_length":10,"output_length":2,"hash_ids":[2]}' >w.jsonl
jq -c 'del(.timestamp)' w.jsonl >nots.jsonl
for args in "w.jsonl --fixed-schedule --request-rate 5" "w.jsonl --request-rate 5 --fixed-schedule-start-offset 0" \
            "w.jsonl --concurrency 2 --fixed-schedule-auto-offset" "nots.jsonl --fixed-schedule-end-offset 5" \
            "w.jsonl --request-rate-mode poisson" "w.jsonl --request-rate 5 --request-rate-gamma-shape 2"; do
  # shellcheck disable=SC2086
  expect_status 2 dyn-replay $args --url http://127.0.0.1:9 --model m >/dev/null 2>err
  sed 's/^dyn-replay: //' err | head -1
done
