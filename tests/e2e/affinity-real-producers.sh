# Shows the affinity checks over real producer output: one multi-turn workload (3 sessions x 6
# turns, each turn extending its session's prefix) routed offline by dyn-route decide over two
# workers passes dyn-bind check with hard affinity and fails it round-robin; the same workload
# replayed in the simulator (dyn-replay --sim) with and without affinity is compared by
# dyn-bench compare (what affinity buys: prompt-cache hit rate and TTFT).
for s in 0 1 2; do
  for t in 0 1 2 3 4 5; do
    n=$((t + 2))
    ids=$(seq -s, $((s * 100)) $((s * 100 + n - 1)))
    if [[ $t == 0 ]]; then when="\"timestamp\":$((s * 200))"; else when='"delay":500'; fi
    echo "{\"session_id\":\"sess-$s\",$when,\"input_length\":$((n * 512 - 100)),\"output_length\":20,\"hash_ids\":[$ids]}"
  done
done >workload.jsonl
echo "== dyn-route decide | dyn-bind check"
dyn-route decide --workers 2 --router-mode round-robin --router-session-affinity-ttl-secs 300 workload.jsonl 2>/dev/null >hard.jsonl
dyn-route decide --workers 2 --router-mode round-robin workload.jsonl 2>/dev/null >rr.jsonl
expect_status 0 dyn-bind check --ttl-secs 300 hard.jsonl 2>/dev/null
dyn-bind check --ttl-secs 300 rr.jsonl 2>/dev/null | wc -l | sed 's/^/round-robin violations: /'
expect_status 1 dyn-bind check --ttl-secs 300 rr.jsonl >/dev/null 2>&1
dyn-bind show --format table rr.jsonl
echo "== dyn-replay --sim | dyn-bench compare"
dyn-replay --sim --workers 2 --router-mode round-robin workload.jsonl 2>/dev/null >sim-off.jsonl
dyn-replay --sim --workers 2 --router-mode round-robin --router-session-affinity-ttl-secs 300 workload.jsonl 2>/dev/null >sim-on.jsonl
expect_status 0 dyn-bind check --ttl-secs 300 sim-on.jsonl 2>/dev/null
expect_status 1 dyn-bind check --ttl-secs 300 sim-off.jsonl >/dev/null 2>&1
dyn-bench compare sim-off.jsonl sim-on.jsonl --format json |
  jq -r '.metrics[] | select((.tag == "time_to_first_token" and .stat == "avg") or .tag == "prompt_cache_hit_rate" or .tag == "theoretical_cache_hit_rate")
         | "\(.header) \(.stat): off \(.a * 100 | round / 100) on \(.b * 100 | round / 100) better \(.better)"'
