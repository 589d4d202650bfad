# Shows that dyn-replay's progress follows the schedule: a fixed-schedule replay says its length
# before anything is sent (4 requests over 3.0 s, whatever the replies take), its first ETA is the
# schedule's rest (not "?" and not the rate so far) and the ETA only shrinks until 0; a
# concurrency run says it estimates from the work left. The AIPerf console table goes to stderr at
# the end when stderr is a terminal (or with --summary-table), never to stdout, whose rows a
# pipeline reads unchanged; without a terminal there is no table.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --speedup-ratio 100
for t in 0 1000 2000 3000; do
  echo "{\"timestamp\": $t, \"input_length\": 64, \"output_length\": 4, \"hash_ids\": [$t]}"
done >sched.jsonl
dyn-replay sched.jsonl --url "$w_url" --block-size 64 --progress 2>err.txt >rows.jsonl
echo "== the schedule's length, said at the start"
grep -o 'fixed schedule: 4 requests over 3.0 s as scheduled' err.txt
tr '\r' '\n' <err.txt | grep -o 'ETA [0-9.]* s' | awk '{print $2}' >eta.txt
# The first tick comes 0.25 s in (later on a loaded machine): the schedule leaves about 2.75 s, while
# an estimate from the rate so far (1 reply in 0.25 s, 3 left) would say about 0.75 s.
echo "== the first ETA is the schedule's rest"
head -1 eta.txt | awk '{print ($1 >= 1.5 && $1 <= 3.0) ? "first ETA from the schedule" : "first ETA " $1 " s"}'
echo "== it never grows by more than a tick, and ends at 0"
awk 'NR > 1 && $1 > prev + 0.3 {bad++} {prev = $1} END {print (bad ? bad " rises" : "never rises"); print "last ETA " prev " s"}' eta.txt
echo "== stdout holds the 4 rows only"
jq -c '.request.request_id' rows.jsonl
grep -c 'LLM Metrics' err.txt || true

echo "== concurrency mode estimates from the work left"
dyn-replay sched.jsonl --url "$w_url" --block-size 64 --concurrency 2 --progress 2>&1 >/dev/null |
  grep -o '4 requests, 2 at a time: the ETA estimates from the requests left and the rate so far'

echo "== --summary-table: the table on stderr, the rows on stdout unchanged"
dyn-replay sched.jsonl --url "$w_url" --block-size 64 --concurrency 4 --summary-table 2>err2.txt | jq -c '.event_type' | uniq -c | sed 's/^ *//'
grep -o 'dyn-replay | LLM Metrics | client view' err2.txt
grep -E '^(Metric|Time to First Token|Request Count) ' err2.txt | sed 's/  .*//'
echo "== on a terminal, the table comes without asking"
script -qec "dyn-replay sched.jsonl --url $w_url --block-size 64 --concurrency 4 -o tty-rows.jsonl" /dev/null |
  tr -d '\r' | grep -c 'LLM Metrics'
wc -l <tty-rows.jsonl
