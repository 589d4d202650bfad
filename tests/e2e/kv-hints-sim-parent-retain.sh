# Shows that dyn-replay --sim --kv-policy parent-retain keeps a parent's blocks while its subagent
# runs (SPEC 6.4): subagent c of session p spawns at 1 s; another session then needs room in the
# 12-block pool and LRU evicts p's blocks (the oldest) without a hint, so p's next turn recomputes
# its prefix; with the policy the spawn's lease keeps them and p's next turn finds 256 tokens cached.
cat >wl.jsonl <<'ROWS'
{"timestamp":0,"session_id":"p","request_id":"p:0","input_length":256,"output_length":1,"hash_ids":[1,2,3,4]}
{"timestamp":1000,"session_id":"c","parent_session_id":"p","request_id":"c:0","input_length":384,"output_length":1,"hash_ids":[11,12,13,14,15,16]}
{"timestamp":2000,"session_id":"f","request_id":"f:0","input_length":384,"output_length":1,"hash_ids":[21,22,23,24,25,26]}
{"timestamp":4000,"session_id":"p","request_id":"p:1","input_length":320,"output_length":1,"hash_ids":[1,2,3,4,5]}
ROWS
# shellcheck source=helpers/sim_cached.sh
source "$DYN_ROOT/tests/e2e/helpers/sim_cached.sh"
echo "== no hints"
sim_cached none
echo "== parent-retain"
sim_cached parent --kv-policy parent-retain
echo "== parent-retain, TTL 0.5 s (the lease ends before the pressure)"
sim_cached short --kv-policy parent-retain --kv-policy-parent-ttl-s 0.5
