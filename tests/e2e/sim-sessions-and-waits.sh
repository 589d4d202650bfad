# Shows that the simulator honours SPEC 6.1: timestamped arrivals, closed-loop session turns that
# start after the previous turn completes plus its delay, wait_for dependencies with tool_wait_ms,
# session affinity through the real router, cached tokens for a turn that extends its prefix, and
# a clear error naming the line for an unknown wait_for id.
set -u
cat > w.jsonl <<'ROWS'
{"timestamp": 0, "session_id": "s1", "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}
{"session_id": "s1", "delay": 500, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 0, "request_id": "a", "input_length": 300, "output_length": 5, "hash_ids": [9]}
{"timestamp": 0, "request_id": "b", "wait_for": ["a"], "tool_wait_ms": 1000, "input_length": 300, "output_length": 5, "hash_ids": [9]}
ROWS
expect_status 0 dyn-replay w.jsonl --sim --workers 2 --router-mode kv --router-session-affinity-ttl-secs 60 > out.jsonl
# start offsets in ms (received - epoch), rounded, and who waited for whom
jq -c '{id: .request.request_id, turn: .dyn.turn, worker: .request.worker.decode_worker_id,
        start: .request.request_received_ms, end: .event_time_unix_ms, cached: .request.cached_tokens,
        out: .request.output_tokens, binding: .dyn.binding}' out.jsonl | sort
jq -s 'map({key: .request.request_id, value: .}) | from_entries as $r |
  {turn1_after_turn0_plus_delay: ($r["s1:1"].request.request_received_ms - $r["s1:0"].event_time_unix_ms | . >= 499 and . <= 501),
   b_after_a_plus_tool_wait: ($r.b.request.request_received_ms - $r.a.event_time_unix_ms | . >= 999 and . <= 1001),
   same_worker_for_session: ($r["s1:0"].request.worker.decode_worker_id == $r["s1:1"].request.worker.decode_worker_id)}' -c out.jsonl
echo '{"timestamp": 0, "request_id": "c", "wait_for": ["nope"], "input_length": 10, "output_length": 1, "hash_ids": [1]}' > bad.jsonl
expect_status 3 dyn-replay bad.jsonl --sim 2>&1 >/dev/null | sed 's/^dyn-replay: //'
