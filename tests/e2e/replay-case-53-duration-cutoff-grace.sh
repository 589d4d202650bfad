# Shows case 53 (mlcommons/endpoints#78, ai-dynamo/aiperf#240 and #255): dyn-replay
# --benchmark-duration follows AIPerf. A row planned after the cut-off does not stop the session
# turns that become due before it (control run: a3, a4 and b3 are sent although r3, at 1.5 s, is
# planned past the 1.4 s cut-off); nothing is sent after the cut-off; a request in flight at the
# cut-off that ends within --benchmark-grace-period counts (a4), one still hung when it ends (b2,
# whose worker sends nothing for 40 s) is cancelled: its row says cancelled, the worker sees its
# connection close, and it neither stretches the run nor the measured duration (dyn-bench report:
# 7 requests over about 1.6 s, not 40 s; the bounds leave room for a loaded machine). The grace
# period is 2 s here (AIPerf's default 30 s, shown in --help), and without --benchmark-duration it
# is a usage error.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
c="$DYN_CASES/53-duration-cutoff-grace"
start_scripted w "$c/script.json"
ids() { jq -r "select($1) | .request.request_id" "$2" | sort | paste -sd' '; }

echo "== control: no stall"
expect_status 0 dyn-replay "$c/workload-no-stall.jsonl" --url "$w_url" --model m --benchmark-duration 1.4 \
  --no-progress -o control.jsonl 2>control.err
echo "sent: $(ids true control.jsonl)"
grep -o '12 requests planned: .* not sent' control.err

echo "== a worker that stalls b2 for 40 s"
start=$(date +%s.%N)
expect_status 0 dyn-replay "$c/workload.jsonl" --url "$w_url" --model m --benchmark-duration 1.4 \
  --benchmark-grace-period 2 --no-progress -o rows.jsonl --summary summary.json 2>run.err
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "run ended within 10 s (grace 2 s after the 1.4 s cut-off, not b2's 40 s): $(echo "$took < 10" | bc | sed 's/1/yes/; s/0/no/')"
echo "sent: $(ids true rows.jsonl)"
echo "ok: $(ids '.dyn.status == "ok"' rows.jsonl)"
echo "cancelled: $(ids '.dyn.status == "cancelled"' rows.jsonl)"
jq -r 'select(.dyn.status == "cancelled") | "b2 row: \(.dyn.error.code) \(.dyn.error.type): \(.dyn.error.message)"' rows.jsonl
# Sends happen at their scheduled times, all at or before the cut-off (a little scheduling lag
# allowed); a5 would be due at about 1.6 s.
echo "last send within the duration after the first: $(jq -s 'map(.request.request_received_ms) | (max - min) <= 1450' rows.jsonl)"
grep -o '12 requests planned: .* not sent' run.err
sed -n 's/^dyn-replay: \(--benchmark-[a-z-]* [0-9.]* s [a-z]*\).*/\1/p' run.err
jq -c '.summary | {sent, ok, errors, cancelled, not_sent, duration_about_1_6: (.duration_s > 1.45 and .duration_s < 2.5)}' summary.json
# The worker saw b2's connection closed while it stalled (an engine aborts the request then).
jq -r 'select(.client_closed) | "worker saw the close at: \(.at), after \(if .after_ms > 2000 and .after_ms < 5000 then "the grace period" else .after_ms end)"' w.requests.jsonl

echo "== dyn-bench report: the hung request sets neither the count nor the duration"
dyn-bench report rows.jsonl --format json 2>/dev/null |
  jq -c '{request_count: .request_count.avg, errors: .error_request_count.avg,
          duration_about_1_6: (.benchmark_duration.avg > 1.45 and .benchmark_duration.avg < 2.5),
          throughput_about_4_4: (.request_throughput.avg > 2.8 and .request_throughput.avg < 4.9)}'

echo "== flags"
dyn-replay --help | grep -A1 -- '--benchmark-grace-period' | tr -s ' ' | head -2
expect_status 2 dyn-replay "$c/workload.jsonl" --url "$w_url" --model m --benchmark-grace-period 5 2>&1
expect_status 2 dyn-replay "$c/workload.jsonl" --url "$w_url" --model m --benchmark-duration 1 \
  --benchmark-grace-period -1 2>&1 | head -1
