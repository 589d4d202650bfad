# Shows that dyn-replay --sim --kv-policy evict-on-final puts a finished session's own blocks first
# out (SPEC 6.4): session d ends (one turn) while session o waits for its next turn; when session f
# needs room in the 12-block pool, LRU evicts o's older blocks without a hint, so o's next turn
# recomputes half its 256-token prefix; with the policy d's blocks go first and o's next turn finds
# all 256 tokens of its prefix cached.
cat >wl.jsonl <<'ROWS'
{"timestamp":0,"session_id":"o","request_id":"o:0","input_length":256,"output_length":1,"hash_ids":[1,2,3,4]}
{"timestamp":1000,"session_id":"d","request_id":"d:0","input_length":256,"output_length":1,"hash_ids":[11,12,13,14]}
{"timestamp":2000,"session_id":"f","request_id":"f:0","input_length":384,"output_length":1,"hash_ids":[21,22,23,24,25,26]}
{"timestamp":3000,"session_id":"o","request_id":"o:1","input_length":320,"output_length":1,"hash_ids":[1,2,3,4,5]}
ROWS
# shellcheck source=helpers/sim_cached.sh
source "$DYN_ROOT/tests/e2e/helpers/sim_cached.sh"
echo "== no hints"
sim_cached none
echo "== evict-on-final"
sim_cached final --kv-policy evict-on-final
