# Shows that dyn-bench compare puts affinity-off (round-robin) and affinity-on (hard) runs of the
# same workload side by side with differences and ratios, as a table and as JSON.
cp "$DYN_ROOT/tests/fixtures/bench/affinity-hard.jsonl" hard.jsonl
cp "$DYN_ROOT/tests/fixtures/bench/affinity-rr.jsonl" rr.jsonl
dyn-bench compare rr.jsonl hard.jsonl --label-a affinity-off --label-b affinity-on --format table 2>&1
dyn-bench compare rr.jsonl hard.jsonl --format json 2>/dev/null |
  jq -c '.a, .b, (.metrics[] | select(.tag == "prompt_cache_hit_rate" or (.tag == "time_to_first_token" and .stat == "avg")))'
