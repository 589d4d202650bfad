# Shows --kv-eviction session (SPEC 8): the blocks of a session that has ended
# (x-dynamo-session-final on its last turn) are evicted before any other cached block, in the
# simulator and in dyn-mocker alike.
# 1. Live, through dyn-route serve: a 10-block pool holds session A's prompt, then session B's last
#    turn; a third prompt needs room. Under lru A's blocks (the oldest) go and A's next turn misses;
#    under session B's go and A's next turn is a full hit. The router forwards the header.
# 2. --sim on agent sessions whose contexts outgrow the cluster: the hit rate rises with session
#    eviction and kv + affinity then beats one pooled LRU cache of the whole cluster's blocks.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
# 256 bytes = 64 tokens = 4 blocks of 16 (SPEC 4.2).
text() { printf "%-255s." "$1"; }
send() {  # send URL SESSION WORD [FINAL]: one completion; prints its cached prompt tokens
  local h=(-H "x-dynamo-session-id: $2")
  [[ -n ${4:-} ]] && h+=(-H "x-dynamo-session-final: true")
  curl -sS "$1/v1/completions" "${h[@]}" -H 'content-type: application/json' \
    -d "{\"model\":\"mock-model\",\"max_tokens\":1,\"prompt\":\"$(text "$3")\"}" |
    jq -r '.usage.prompt_tokens_details.cached_tokens // 0'
}
echo "== 1. live, a 10-block pool"
for ev in lru session; do
  start_mocker "w_$ev" --block-size 16 --num-gpu-blocks-override 10 --kv-eviction "$ev"
  u="w_${ev}_url"
  start_router "r_$ev" --worker "${!u}" --router-mode round-robin --kv-cache-block-size 16
  r="r_${ev}_url"
  send "${!r}" a alpha >/dev/null
  send "${!r}" b bravo final >/dev/null
  send "${!r}" c charlie >/dev/null
  echo "$ev: session a's next turn finds $(send "${!r}" a alpha) of 64 prompt tokens cached"
done
expect_status 2 dyn-mocker --kv-eviction mru --port 0 2>/dev/null

echo "== 2. simulated agent sessions, 4 workers (the workload of bench/admission-experiment.sh)"
dyn-trace generate --seed 1 --block-size 64 --sessions 48 --session-rate 5 --turns-min 6 --turns-max 14 \
  --system-prompt-tokens 2048 --task-tokens 1024 --tool-output-tokens 2500 --output-tokens 300 \
  --tool-gap-ms 8000 --subagent-probability 0.1 --subagent-turns-min 2 --subagent-turns-max 5 \
  --max-context-tokens 60000 --wait-for > w.jsonl
sim() {
  dyn-replay --sim w.jsonl --block-size 64 --kv-cache-block-size 64 --workers 4 --num-gpu-blocks-override 2048 \
    --router-mode kv --router-session-affinity-ttl-secs 3600 --router-session-affinity-mode hard --seed 1 \
    --reference pooled --kv-eviction "$1" --summary "$1.summary.json" > "$1.jsonl" 2> "$1.err"
}
sim lru
sim session
jq -s -c '{session_hit_above_lru: (.[1].summary.prompt_cache_hit_pct > .[0].summary.prompt_cache_hit_pct),
           lru_of_pooled_lru_below_1: (.[0].summary.references.pooled.run_ratio < 1),
           session_of_pooled_lru_above_1: (.[1].summary.references.pooled.run_ratio > 1),
           same_requests: (.[0].summary.requests == .[1].summary.requests)}' lru.summary.json session.summary.json
