# Shows that dyn-mocker with a G2 host tier (--num-g2-blocks with --kv-bytes-per-token) offloads
# the GPU blocks it evicts and onboards them before prefill (SPEC 8.7): a prompt whose blocks were
# pushed out of the GPU comes back as a cache hit counted on G2 (usage.dyn.cached_tokens_by_tier),
# and its KV events, fetched by an independent Python recorder (python3-zmq, python3-msgpack) and
# re-encoded byte for byte, carry the medium as Dynamo's router reads it ("GPU", "CPU_PINNED"),
# with every block stored on the host before it is removed from the GPU. /metrics has the tiers'
# gauges and transfer counters.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
py=/usr/bin/python3
kv="$DYN_ROOT/tests/e2e/helpers/vllm_kv_events.py"
p1='The quick brown fox jumps over the lazy dog'   # 43 bytes: 11 tokens, 2 full blocks of 4
# A different 31-token prompt needs all 8 GPU blocks: the first prompt's blocks go to G2.
p2=$(printf 'Pack my box with five dozen liquor jugs. %.0s' 1 2 3)

start_mocker w --block-size 4 --num-gpu-blocks-override 8 --num-g2-blocks 16 --kv-bytes-per-token 1024 \
  --speedup-ratio 100 --kv-events-endpoint 'tcp://127.0.0.1:*' --kv-events-replay-endpoint 'tcp://127.0.0.1:*'
rep=$(curl -s "$w_url/health" | jq -r .kv_events_replay_endpoint)
echo "== three prompts: p1, p2 (evicts p1 to G2), p1 again (onboarded from G2)"
for p in "$p1" "$p2" "$p1"; do
  curl -s "$w_url/v1/completions" -d "{\"prompt\":\"$p\",\"max_tokens\":1}" | jq -c .usage
done
sleep 0.3
echo "== tier metrics"
curl -s "$w_url/metrics" | grep -E '^dyn_mocker_kv_(tier|offloaded|onboarded)' | sed 's/worker_id="0",model="mock-model",//'
$py "$kv" fetch "$rep" >ev.txt
stop "$w_pid"
$py "$kv" reencode <ev.txt >re.txt
paste -d' ' <(awk '{print $1, $2}' ev.txt) <(awk 'NR % 2 == 1 {print $2}' re.txt) \
  | awk '{print "batch " $1 ": " ($2 == $3 ? "re-encoded bytes identical" : "DIFFERENT")}'
echo "== events in order (type, medium, blocks, parent given)"
awk 'NR % 2 == 0' re.txt | jq -c '.events[] | {type, medium, n: (.block_hashes | length), parent: (.parent_block_hash != null)}'
echo "== store before remove: each block leaving the GPU was stored on the host first"
awk 'NR % 2 == 0' re.txt | jq -c '.events[]' | $py -c '
import json, sys
where = {}  # block -> media holding it
checked = bad = 0
for line in sys.stdin:
    e = json.loads(line)
    for h in e["block_hashes"]:
        held = where.setdefault(json.dumps(h), set())
        if e["type"] == "BlockStored":
            held.add(e["medium"])
        else:
            checked += 1
            held.discard(e["medium"])
            if not held:
                bad += 1
print(f"{checked} removals, {bad} left a block on no tier")
'
