# Shows that dyn-bench compare puts affinity-off (round-robin) and affinity-on (hard) runs of the
# same workload side by side with differences and ratios, as a table and as JSON; with one run a
# side the better side is only indicative ("(b)"), and with repeats (A1 A2 --vs B1 B2) it shows
# mean ± sd per side and marks a side only where the difference exceeds the spread ("~" within it).
cp "$DYN_ROOT/tests/fixtures/bench/affinity-hard.jsonl" hard.jsonl
cp "$DYN_ROOT/tests/fixtures/bench/affinity-rr.jsonl" rr.jsonl
dyn-bench compare rr.jsonl hard.jsonl --label-a affinity-off --label-b affinity-on --format table 2>&1
dyn-bench compare rr.jsonl hard.jsonl --format json 2>/dev/null |
  jq -c '.a, .b, (.metrics[] | select(.tag == "prompt_cache_hit_rate" or (.tag == "time_to_first_token" and .stat == "avg")))'
echo "== repeats: mean ± sd per side; a difference is marked only beyond the spread"
# A second affinity-off run whose TTFTs are 60 % longer: TTFT spreads widely on that side, the hit
# rate does not (the same cache hits).
jq -c 'if .request.ttft_ms then .request.ttft_ms *= 1.6 else . end' rr.jsonl >rr2.jsonl
cp hard.jsonl hard2.jsonl
dyn-bench compare rr.jsonl rr2.jsonl --vs hard.jsonl hard2.jsonl --label-a affinity-off --label-b affinity-on \
  --format table 2>/dev/null | grep -E '^(A|B):|^Metric|^Time to First Token \(ms\) +(avg|p90)|^Prompt Cache Hit|^better'
dyn-bench compare rr.jsonl rr2.jsonl --vs hard.jsonl hard2.jsonl --format json 2>/dev/null |
  jq -c '{a_runs, b_runs, a_view}, (.metrics[] | select(.tag == "prompt_cache_hit_rate" or (.tag == "time_to_first_token" and .stat == "avg")) | {tag, a, a_sd, b, b_sd, better, exceeds_spread})'
expect_status 2 dyn-bench compare rr.jsonl rr2.jsonl hard.jsonl 2>&1
