# Shows that sessionize finds the known sessions of a hand-made trace (block size 4): turns that
# extend a previous turn's full blocks join its session, a row matching only the popular shared
# prefix [1] starts its own, a branch off an earlier turn becomes a fork with parent_session_id,
# and later turns get delay = gap after the previous turn's estimated end.
dyn-trace sessionize --block-size 4 "$DYN_ROOT/tests/fixtures/sessionize-known.jsonl" 2>err.txt
cat err.txt
echo "--- the result loads as a session workload"
dyn-trace sessionize --block-size 4 "$DYN_ROOT/tests/fixtures/sessionize-known.jsonl" 2>/dev/null |
  dyn-trace convert --from mooncake --to agentic --block-size 4 | jq -c '{request_id, wait_for, tool_wait_ms}'
echo "--- missing timestamps are an error"
printf '%s\n' '{"input_length":4,"output_length":1,"hash_ids":[1]}' | expect_status 3 dyn-trace sessionize >/dev/null 2>&1
