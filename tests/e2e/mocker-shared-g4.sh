# Shows that dyn-mocker --num-workers 2 runs two engines in one process that share one G4 pool
# (SPEC 8.7, as dyn-replay --sim shares it between its workers): each engine has its own listener
# (--port-file lists both ports, engine order), worker id (--worker-id + i), KV event sockets
# ("tcp://127.0.0.1:*": each a free port) and metrics, and a prefix offloaded from engine 0 (G1 ->
# G2, written through to G4) is onboarded on engine 1 from G4: usage.dyn.cached_tokens_by_tier
# says g4 on a request to engine 1, which never saw the prompt. Each engine publishes its own
# events: engine 0 the pool stores (EXTERNAL) its write-through made, engine 1 the G1 slots it
# reserved for onboarding (GPU) and the blocks staged on its own G2 (CPU_PINNED).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
py=/usr/bin/python3
kv="$DYN_ROOT/tests/e2e/helpers/vllm_kv_events.py"
p1='The quick brown fox jumps over the lazy dog'   # 11 tokens: 2 full blocks of 4
p2=$(printf 'Pack my box with five dozen liquor jugs. %.0s' 1 2 3)  # needs all 8 GPU blocks
_start_server w 1 dyn-mocker --num-workers 2 --worker-id 5 --block-size 4 --num-gpu-blocks-override 8 \
  --num-g2-blocks 16 --num-g4-blocks 32 --kv-bytes-per-token 1024 --speedup-ratio 100 \
  --kv-events-endpoint 'tcp://127.0.0.1:*' --kv-events-replay-endpoint 'tcp://127.0.0.1:*'
mapfile -t ports <w.port
echo "== port file: ${#ports[@]} ports"
u0="http://127.0.0.1:${ports[0]}" u1="http://127.0.0.1:${ports[1]}"
for u in "$u0" "$u1"; do curl -s "$u/health" | jq -c '{worker_id, kv_block_size}'; done
e0=$(curl -s "$u0/health" | jq -r .kv_events_replay_endpoint)
e1=$(curl -s "$u1/health" | jq -r .kv_events_replay_endpoint)
[[ $e0 != "$e1" ]] && echo "each engine has its own KV event sockets"
complete() {  # complete URL PROMPT: one completion; prints the worker header and the usage
  curl -s -D h.txt "$1/v1/completions" -d "{\"prompt\":\"$2\",\"max_tokens\":1}" | jq -c .usage >u.txt
  echo "worker $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}'): $(cat u.txt)"
}
echo "== engine 0: p1, then p2 (evicts p1 to G2), then a short prompt (engine 0 steps: p1's copy has landed on G2 and goes on to G4)"
complete "$u0" "$p1"
complete "$u0" "$p2"
sleep 0.2
complete "$u0" "ok"
sleep 0.2
echo "== engine 1: p1, never sent there, comes from the shared G4"
complete "$u1" "$p1"
sleep 0.3
echo "== metrics per engine (worker label; g4 is the one pool)"
for u in "$u0" "$u1"; do
  curl -s "$u/metrics" | grep -E '^dyn_mocker_kv_tier_(blocks_used|onboarded_blocks_total)\{.*tier="g4"' \
    | sed 's/model="mock-model",//'
done
echo "== KV events per engine (type, medium, blocks)"
for e in "$e0" "$e1"; do
  $py "$kv" fetch "$e" | $py "$kv" reencode | awk 'NR % 2 == 0' | jq -c '[.events[] | "\(.type) \(.medium // "") \(.block_hashes | length)"]'
done
stop "$w_pid"
tail -1 w.log
