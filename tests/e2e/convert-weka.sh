# Shows that dyn-trace convert --from weka turns the bundled WEKA agent traces (real Claude Code
# sessions) into a workload: one session per conversation, subagents as child sessions with their
# parent, tool gaps after tool_use stops as tool_wait_ms, user think time as delay, the parent's
# turn after a subagent waiting for it; hash ids at 64-token blocks, local ids made global; and
# that dyn-replay --sim replays the converted slice with sensible figures.
d="$DYN_DATA/weka-kv-cache-tester"
expect_status 0 dyn-trace convert --from weka "$d"/trace_*.json.gz -o w.jsonl 2>err.txt
cat err.txt
echo "== rows, sessions, subagents"
jq -s -c '{rows: length, sessions: (map(.session_id) | unique | length),
  subagents: (map(select(.parent_session_id)) | map(.session_id) | unique | length),
  first_turns: map(select(.timestamp != null)) | length,
  tool_waits: map(select(.tool_wait_ms != null)) | length, think_delays: map(select(.delay != null)) | length,
  joins: map(select(.wait_for)) | length}' w.jsonl
echo "== every row's hash ids cover its input at 64 tokens a block"
jq -s -c 'map(((.hash_ids | length) - 1) * 64 < .input_length and .input_length <= (.hash_ids | length) * 64) | unique' w.jsonl
echo "== trace_0291: its two Explore subagents and the parent's turn that waits for both"
jq -c 'select(.session_id | startswith("trace_0291")) | select(.parent_session_id or .wait_for) |
  {request_id, parent_session_id, delay, tool_wait_ms, wait_for, input_length, blocks: (.hash_ids | length)}' w.jsonl | head -4
jq -c 'select(.request_id == "trace_0291:16") | {request_id, wait_for, tool_wait_ms}' w.jsonl
echo "== conversations share no blocks (hash_id_scope local)"
jq -s -c 'group_by(.session_id | split("/")[0]) | map(map(.hash_ids[]) | unique) | . as $g |
  {conversations: length, shared_ids: ([range(0; length) as $i | range($i + 1; length) as $j |
   $g[$i] - ($g[$i] - $g[$j]) | length] | add)}' w.jsonl
echo "== dyn-replay --sim over the slice"
expect_status 0 dyn-replay w.jsonl --sim --block-size 64 --kv-cache-block-size 64 --workers 2 --summary s.json -o rows.jsonl 2>/dev/null
# The recorded conversations span up to 51 minutes (trace_0504 waits 51 min after a tool call,
# a tool wait the replay keeps); the simulated engines answer faster than the recorded API did, and most of each prompt is its session's earlier turns (Dynamo's experiment on
# these traces reports 78.5 % prefix reuse without hints).
jq -c '.summary | {requests, errors, simulated_min: (.simulated_s / 60 | floor),
  prompt_cache_hit_pct: (.prompt_cache_hit_pct | floor), theoretical_hit_pct: (.theoretical_hit_pct | floor)}' s.json
jq -s -c '{rows: length, sessions: (map(.agent_context.session_id) | unique | length),
  with_parent: map(select(.agent_context.parent_session_id)) | length}' rows.jsonl
echo "== errors: a truncated conversation names its request; another block size is a usage error"
gzip -dc "$d/trace_0504.json.gz" | jq -c 'del(.requests[1].out)' >bad.json
expect_status 3 dyn-trace convert --from weka bad.json 2>&1 | sed 's|^.*/bad.json|bad.json|'
expect_status 2 dyn-trace convert --from weka --block-size 512 bad.json 2>&1 | head -1
