# Shows dyn-bench report on request_end rows: warmup rows excluded, error rows only in the error
# summary, per-worker and per-session breakdowns, goodput from --goodput SLOs, theoretical and
# prompt-cache hit rates, the same numbers from gzip/enveloped stdin, and usage errors.
cp "$DYN_ROOT/tests/fixtures/bench/affinity-hard.jsonl" hard.jsonl
dyn-bench report hard.jsonl --per-session --goodput 'time_to_first_token:100 request_latency:720' --format table 2>&1
echo "== json"
dyn-bench report hard.jsonl --format json 2>/dev/null >a.json
jq -c '{count: .request_count.avg, errors: .error_request_count.avg, summary: .error_summary,
        hit: .prompt_cache_hit_rate.avg, theoretical: .theoretical_cache_hit_rate.avg,
        workers: [.dyn.per_worker[] | [.worker, .requests, .share_pct]], sessions: (.dyn.per_session | length)}' a.json
jq -c '{timestamp: 1, event: .}' hard.jsonl | gzip | dyn-bench report --format json 2>/dev/null | cmp - a.json && echo "stdin gzip envelopes: same"
echo "== aiperf export of request_end rows reads back the same"
dyn-bench report hard.jsonl --aiperf-export out >/dev/null 2>&1
dyn-bench report out/profile_export.jsonl --format csv | head -4 | tr -d '\r'
echo "== errors"
expect_status 2 dyn-bench report hard.jsonl --goodput 'nonsense:1' 2>&1
echo '{"event_type":"route_decision"}' | expect_status 3 dyn-bench report 2>&1
