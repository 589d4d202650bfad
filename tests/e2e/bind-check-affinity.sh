# Shows that dyn-bind check passes (exit 0) a run with hard affinity and fails (exit 1, violations
# as JSONL) the same workload routed round-robin over two workers; that subagents are checked under
# their parent group; that the TTL comes from --ttl-secs or DYN_ROUTER_SESSION_AFFINITY_TTL_SECS;
# and that a gap longer than the TTL is not a violation.
cp "$DYN_ROOT/tests/fixtures/bench/affinity-hard.jsonl" hard.jsonl
cp "$DYN_ROOT/tests/fixtures/bench/affinity-rr.jsonl" rr.jsonl
expect_status 0 dyn-bind check --ttl-secs 300 hard.jsonl
expect_status 1 dyn-bind check --ttl-secs 300 rr.jsonl >v.jsonl
echo "violations: $(wc -l <v.jsonl)"
head -2 v.jsonl
jq -r '.key' v.jsonl | sort | uniq -c
echo "== TTL 1 s: session gaps (1.8 s) expire the binding; overlapping subagents still violate"
expect_status 1 dyn-bind check --ttl-secs 1 rr.jsonl | jq -c '[.key, .previous.request_id, .next.request_id, .gap_ms]'
echo "== TTL from the environment, gzip and envelopes on stdin"
jq -c '{timestamp: 0, event: .}' rr.jsonl | gzip | DYN_ROUTER_SESSION_AFFINITY_TTL_SECS=300 dyn-bind check | wc -l
echo "== no TTL at all"
expect_status 2 dyn-bind check hard.jsonl 2>&1
expect_status 2 dyn-bind check --ttl-secs 0 hard.jsonl 2>&1
echo "== show"
dyn-bind show --format table rr.jsonl
dyn-bind show hard.jsonl | head -2
