# Shows that examples/rate-sweep.sh (the load sweep of issue 18) runs on a small agent workload:
# one table row per (policy, request rate), TTFT p90 rising with the rate for every policy, kv +
# affinity keeping the best hit rate at each rate, and one HTML page whose sweep charts draw one
# line per policy through its rates.
set -u
dyn-trace generate --seed 3 --sessions 48 --block-size 64 --turns-min 4 --turns-max 8 \
  --tool-output-tokens 2000 --tool-gap-ms 4000 --subagent-probability 0.1 --wait-for -o w.jsonl
expect_status 0 bash "$DYN_ROOT/examples/rate-sweep.sh" w.jsonl "0.25 4" sweep.html >table.txt 2>err.txt
cat table.txt
# per policy: p90 at 4 req/s above p90 at 0.25 req/s
awk 'NR > 1 && NF == 5 { p90[$1" "$2] = $3; pol[$1] = 1 }
     END { for (p in pol) print p, (p90[p" 4"] > p90[p" 0.25"]) ? "TTFT p90 rises with the rate" : "TTFT p90 does not rise" }' \
  table.txt | sort
awk 'NR > 1 && NF == 5 { hit[$1" "$2] = $4 }
     END { n = split("0.25 4", rs, " ");
           for (i = 1; i <= n; i++) { best = hit["kv+affinity "rs[i]] >= hit["kv "rs[i]] && hit["kv+affinity "rs[i]] >= hit["round-robin "rs[i]];
             print "at " rs[i] " req/s: " (best ? "kv+affinity has the best hit rate" : "kv+affinity is not the best") } }' table.txt
# the page: one line per policy in each sweep chart (hit %, TTFT p90, req/s)
for g in round-robin kv kv+affinity; do
  printf '%s: %s sweep lines\n' "$g" "$(grep -o "<text[^>]*>$g \(hit %\|TTFT p90\|req/s\)</text>" sweep.html | wc -l)"
done
