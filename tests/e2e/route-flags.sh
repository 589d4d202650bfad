# Shows the router flag rules: flag > DYN_ROUTER_* environment > default, and out-of-range or unknown
# values (from a flag or the environment) are usage errors, exit 2, before any input is read.
# Two rows with the same two-block prefix, the first long finished: kv keeps the cache (0 0),
# round-robin alternates (0 1).
printf '%s\n' '{"timestamp":0,"input_length":1024,"output_length":1,"hash_ids":[1,2]}' \
  '{"timestamp":100000,"input_length":1024,"output_length":1,"hash_ids":[1,2]}' >w.jsonl
w() { jq -r '.request.worker.decode_worker_id' | paste -sd' '; }
echo "default round-robin: $(dyn-route decide --workers 2 w.jsonl | w)"
echo "env kv: $(DYN_ROUTER_MODE=kv dyn-route decide --workers 2 w.jsonl | w)"
echo "flag beats env: $(DYN_ROUTER_MODE=kv dyn-route decide --workers 2 --router-mode round-robin w.jsonl | w)"
for args in "--router-session-affinity-ttl-secs 0" "--router-session-affinity-ttl-secs 31536001" \
            "--router-session-affinity-mode sticky" "--router-mode kv-aware" "--router-temperature -1" \
            "--active-decode-blocks-threshold 1.5"; do
  expect_status 2 dyn-route decide --workers 2 $args w.jsonl >/dev/null 2>err.txt
  echo "$args: $(grep -c . err.txt) message line(s)"
done
DYN_ROUTER_SESSION_AFFINITY_TTL_SECS=0 expect_status 2 dyn-route decide --workers 2 w.jsonl >/dev/null 2>&1
DYN_ROUTER_SESSION_AFFINITY_MODE=sticky expect_status 2 dyn-route decide --workers 2 w.jsonl >/dev/null 2>&1
expect_status 0 dyn-route decide --workers 2 --router-session-affinity-ttl-secs 31536000 w.jsonl >/dev/null
