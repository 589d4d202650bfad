# Issue 21.6 end to end: requests scheduled at the same instant are sent in file order. 200 rows
# against a live dyn-mocker over 32 connections: rows 0-119 at timestamp 0 (every third with a
# long prompt, which takes its thread longer to build), rows 120-199 at 2000 and 1000 alternately
# (not in time order in the file; --speedup 50 makes them due at 40 and 20 ms). Each row's send
# offset from the run's start, dyn.scheduled_ms + dyn.schedule_lag_ms (microseconds), must be
# non-decreasing in (scheduled time, file order). The exact hand-over order is pinned by the unit
# tests "issue 21.6: ..." (test_replay) with a recording transport; this checks the real client.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
jq -nc 'range(200) as $i |
  {timestamp: (if $i < 120 then 0 elif $i % 2 == 0 then 2000 else 1000 end),
   input_length: (if $i % 3 == 0 then 6000 else 8 end), output_length: 2,
   hash_ids: (if $i % 3 == 0 then [range(12)] else [0] end)}' >w.jsonl
start_mocker w --speedup-ratio 100
expect_status 0 dyn-replay w.jsonl --url "$w_url" --speedup 50 --max-connections 32 --no-progress >rows.jsonl 2>err.txt
echo "rows: $(wc -l <rows.jsonl)  ok: $(jq -c 'select(.dyn.status == "ok")' rows.jsonl | wc -l)"
jq -s -r 'group_by(.dyn.scheduled_ms) | map("\(.[0].dyn.scheduled_ms) ms: \(length)") | "due: " + join(", ")' rows.jsonl
# In (scheduled time, file row) order, count each row sent before the row ahead of it.
jq -s -r 'map({t: .dyn.scheduled_ms, i: (.request.request_id | ltrimstr("row-") | tonumber),
               sent: (.dyn.scheduled_ms + .dyn.schedule_lag_ms)}) | sort_by(.t, .i) as $r |
  [range(1; $r | length) | select($r[.].sent < $r[. - 1].sent) | "\($r[. - 1].i) then \($r[.].i)"] |
  "sent out of order: \(length)", (.[0:5][] | "  " + .)' rows.jsonl
jq -c 'select(.dyn.status != "ok") | {request_id: .request.request_id, dyn}' rows.jsonl >&2
