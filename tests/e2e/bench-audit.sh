# Shows dyn-bench audit on the bundled workload (data/quickstart, 152 requests in 32 sessions):
# replayed in the simulator with the KV router over 2 workers whose caches are too small to keep
# every session, each run's prefill is split into reusable (an infinite cache at the engine block
# size), predicted and delivered, and the misses into cold (workload), routing choice and stale
# index, each from its own evidence, with what is left reported as unexplained. Hard affinity keeps
# turns on workers that hold less than another (routing misses appear); decide --explain's trace has
# no engine, so delivered, stale and unexplained are n/a rather than guessed. The table and the JSON
# agree; a trace with no request rows is refused (exit 3).
wl="$DYN_ROOT/data/quickstart/conversation-slice.jsonl"
sim=(--sim --workers 2 --num-gpu-blocks-override 2048 --router-mode kv)
dyn-replay "$wl" "${sim[@]}" -o kv.jsonl 2>/dev/null
dyn-replay "$wl" "${sim[@]}" --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard -o hard.jsonl 2>/dev/null
dyn-route decide --workers 2 --router-mode kv --explain "$wl" >decide.jsonl 2>/dev/null
echo "== table (run and worker rows)"
dyn-bench audit kv.jsonl hard.jsonl decide.jsonl --kv-block-size 64 --format table | grep -v '^session '
echo "== json: the run totals"
dyn-bench audit kv.jsonl hard.jsonl --kv-block-size 64 --format json |
  jq -c '.runs[] | {file, requests: .total.requests, attributed: .total.attributed_requests,
          share: (.total.unexplained_share * 1000 | round / 10),
          sum: (.total.cold_tokens + .total.routing_tokens + .total.stale_tokens + .total.unexplained_tokens
                - .total.over_attributed_tokens == .total.miss_tokens)}'
echo "== per session: 32 sessions, their sums equal the run's"
dyn-bench audit hard.jsonl --kv-block-size 64 --format json |
  jq -c '.runs[0] | {sessions: (.sessions | length),
          miss: (([.sessions[].miss_tokens] | add) == .total.miss_tokens),
          routing: (([.sessions[].routing_tokens] | add) == .total.routing_tokens)}'
echo "== the summary's decision quality agrees with the rows"
jq -c '.summary.decision_quality | {decisions, kv_optimal, avoidable: .avoidable_prefill_tokens, affinity: .non_max_overlap_selections.affinity}' \
  <(dyn-replay "$wl" "${sim[@]}" --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard \
      --summary /dev/stdout -o /dev/null 2>/dev/null)
jq -s -c '{decisions: length, kv_optimal: ([.[] | select(.dyn.kv_optimal)] | length),
           avoidable: ([.[].dyn.avoidable_prefill_tokens] | add),
           affinity: ([.[] | select(.dyn.non_max_cause == "affinity")] | length)}' hard.jsonl
echo "== errors"
echo '{"event_type":"kv_event"}' >empty.jsonl
expect_status 3 dyn-bench audit empty.jsonl 2>&1 | head -1
expect_status 2 dyn-bench audit kv.jsonl --kv-block-size 0 2>&1 | head -1
