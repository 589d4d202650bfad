# Shows that Ctrl-C (SIGINT) or SIGTERM stops a live dyn-replay without losing a row: nothing more
# is sent, the requests in flight are cancelled (the worker sees them dropped) and still get their
# request_end row with dyn.status "cancelled" and dyn.error {499, "cancelled"}, the -o file is
# renamed into place with every row that was written, the summary counts planned = sent + not
# sent, and the exit status is 130. A second run is stopped with SIGTERM, the rows going to a pipe.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
# 40 requests of 400 output tokens at the mocker's real pace: each takes seconds, so 4 are always
# in flight when the signal comes.
jq -nc 'range(40) | {timestamp: 0, input_length: 300, output_length: 400, hash_ids: [.]}' >w.jsonl
start_mocker w --speedup-ratio 1
metric() { curl -sS "$w_url/metrics" | awk -v m="dyn_mocker_$1" 'index($1, m "{") == 1 {print $2}'; }

# interrupt SIGNAL OUT: replays w.jsonl 4 at a time into OUT ("-" = through a pipe into rows.jsonl)
# and sends SIGNAL once 6 requests have reached the worker; prints what the summary and the rows say.
interrupt() {
  local sig=$1 out=$2 before pid
  before=$(metric requests_total)
  if [[ $out == - ]]; then
    (set -o pipefail; dyn-replay w.jsonl --url "$w_url" --concurrency 4 --no-progress 2>err.txt | cat >rows.jsonl) &
  else
    dyn-replay w.jsonl --url "$w_url" --concurrency 4 --no-progress -o "$out" 2>err.txt &
  fi
  pid=$!
  for _ in $(seq 600); do (($(metric requests_total) - before >= 6)) && break; sleep 0.05; done
  if [[ $out == - ]]; then pkill "-$sig" -f "dyn-replay w.jsonl --url $w_url" ; else kill "-$sig" "$pid"; fi
  expect_status 130 wait "$pid"
  local f=$out; [[ $out == - ]] && f=rows.jsonl
  local sent not_sent
  sent=$(sed -n 's/.* requests planned: \([0-9]*\) sent.*/\1/p' err.txt)
  not_sent=$(sed -n 's/.*, \([0-9]*\) not sent.*/\1/p' err.txt)
  echo "summary: $(grep -o '40 requests planned: [0-9]* sent ([0-9]* ok, 0 errors, [0-9]* cancelled)' err.txt | sed 's/[0-9]* sent ([0-9]* ok/N sent (N ok/; s/, [0-9]* cancelled/, N cancelled/')"
  echo "planned = sent + not sent: $([[ $((sent + not_sent)) == 40 ]] && echo yes || echo "no ($sent + $not_sent)")"
  echo "rows: one per sent request: $([[ $(jq -c . "$f" | wc -l) == "$sent" ]] && echo yes || echo "no ($(wc -l <"$f") rows, $sent sent)")"
  echo "ok rows: $(jq -c 'select(.dyn.status == "ok")' "$f" | wc -l | awk '{print ($1 >= 2 ? "2 or more" : $1)}')"
  echo "cancelled rows: $(jq -c 'select(.dyn.status == "cancelled")' "$f" | wc -l | awk '{print ($1 >= 1 && $1 <= 4 ? "1 to 4" : $1)}')"
  echo "rows not ok: $(jq -r 'select(.dyn.status != "ok") | "\(.dyn.status) \(.dyn.error.code) \(.dyn.error.type)"' "$f" | sort -u)"
  echo "their messages: $(jq -r 'select(.dyn.status != "ok") | .dyn.error.message' "$f" |
    grep -cvE '^cancelled (mid-response after [0-9]+ bytes|before the response headers|before it was sent)$') unexpected"
  echo "interrupted notes: $(grep -c '^dyn-replay: interrupted' err.txt)"
}
echo "== SIGINT, -o rows.out.jsonl"
interrupt INT rows.out.jsonl
echo "left-over temporary files: $(find . -name '*.tmp.*' | wc -l)"
# The worker dropped the cancelled streams (they are not run to the end).
for _ in $(seq 100); do [[ $(metric num_requests_running) == 0 ]] && break; sleep 0.05; done
echo "worker: cancelled requests $(metric requests_cancelled_total | awk '{print ($1 >= 1 ? "1 or more" : $1)}'), running now $(metric num_requests_running)"
echo "== SIGTERM, rows through a pipe"
interrupt TERM -
