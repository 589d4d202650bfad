# Shows that the README's main job (scripts/quickstart.sh) runs to the end on a shortened slice:
# four live runs, one after another, through dyn-route serve over two dyn-mocker workers, each
# with its one-sentence explanation; dyn-bind check on each router trace (TTL and mode from the
# run-config where the router had affinity); the comparison table, what affinity bought and cost,
# the hard-against-soft comparison saying single runs are indicative, and report.html comparing
# the four runs side by side (one series each); each run's summary.json recording its
# configuration, with every process stopped afterwards. (The full replays take about 23 s each;
# here the first 4 sessions at a higher speedup.)
export DYN_QUICKSTART_SPEEDUP=400
export DYN_QUICKSTART_SESSIONS=4
export DYN_SETUP_SKIP=1
bash "$DYN_ROOT/scripts/quickstart.sh" out >log.txt 2>&1 || { cat log.txt; exit 1; }
grep -c '^round-robin\|^kv \|^kv-affinity\|^kv-soft-affinity' log.txt
grep -o '^== [a-z-]*: [A-Za-z-]* [a-z]*' log.txt
grep -o '^What hard affinity buys\|^What it c\|^Soft affinity answers that\|only indicative\|^A: [a-z-]*\|^B: [a-z-]*' log.txt
for n in round-robin kv kv-affinity kv-soft-affinity; do
  echo "$n rows: $(wc -l <out/$n/rows.jsonl) errors: $(jq -r 'select(.dyn.status != "ok")' out/$n/rows.jsonl | grep -c .)"
done
echo "kv-affinity violations: $(grep -c . out/kv-affinity/violations.jsonl)"
[[ -s out/report.html ]] && echo "report.html written"
grep -o '<th>Metric</th><th>round-robin</th><th>kv</th><th>kv-affinity</th><th>kv-soft-affinity</th>' out/report.html
grep -o 'TTL 300 s, [a-z]* affinity, from [^ ]*run-config.json' out/*/bind.log | sed 's|from .*/out/|from out/|' 
jq -r '.config | "\(.tool) records: version \(.version != null), --url \(.options["--url"] != null), input sha256 \(.inputs[0].sha256 | length) hex digits"' out/kv/summary.json
jq -r '"summary: \(.summary.ok) ok of \(.summary.requests_planned)"' out/kv/summary.json
grep -o 'listening on http://127.0.0.1:[0-9]*; 2 workers; router mode kv, session affinity hard TTL 300 s; trace' out/kv-affinity/router.log | sed 's/:[0-9]*;/:PORT;/' 
sleep 0.5
pgrep -f "port-file out/" >/dev/null && echo "processes left running" || echo "no processes left"
