# Shows that dyn-mocker publishes its KV events in vLLM's format, byte for byte: an independent
# Python recorder (python3-zmq, python3-msgpack, written from vLLM's documented event classes)
# fetches the mocker's batches from its replay socket, decodes them, re-encodes them with its own
# encoder and gets the very same bytes; the BlockStored carries the prompt's token ids, and an
# evicted prefix comes back as BlockRemoved.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
py=/usr/bin/python3
kv="$DYN_ROOT/tests/e2e/helpers/vllm_kv_events.py"
start_mocker w --block-size 4 --num-gpu-blocks-override 8 --speedup-ratio 100 \
  --kv-events-endpoint 'tcp://127.0.0.1:*' --kv-events-replay-endpoint 'tcp://127.0.0.1:*'
curl -s "$w_url/health" | jq -c '{kv_block_size, pub: (.kv_events_endpoint | test("^tcp://127.0.0.1:[0-9]+$")),
                                   replay: (.kv_events_replay_endpoint | test("^tcp://127.0.0.1:[0-9]+$"))}'
rep=$(curl -s "$w_url/health" | jq -r .kv_events_replay_endpoint)
p1='The quick brown fox jumps over the lazy dog'   # 43 bytes: 11 tokens, 2 full blocks of 4
curl -s "$w_url/v1/completions" -d "{\"prompt\":\"$p1\",\"max_tokens\":1}" | jq -c .usage
# A different 31-token prompt needs all 8 blocks: the first prompt's cached blocks are evicted.
p2=$(printf 'Pack my box with five dozen liquor jugs. %.0s' 1 2 3)
curl -s "$w_url/v1/completions" -d "{\"prompt\":\"$p2\",\"max_tokens\":1}" | jq -c .usage
sleep 0.3
$py "$kv" fetch "$rep" >recorded.txt
echo "batches recorded: $(wc -l <recorded.txt)"
$py "$kv" reencode <recorded.txt >reencoded.txt
paste -d' ' <(awk '{print $1, $2}' recorded.txt) <(awk 'NR % 2 == 1 {print $2}' reencoded.txt) \
  | awk '{print "batch " $1 ": " ($2 == $3 ? "re-encoded bytes identical" : "DIFFERENT")}'
echo "== events (ts left out)"
awk 'NR % 2 == 0' reencoded.txt | jq -c '.events[] | {type, n: (.block_hashes // [] | length), parent: (.parent_block_hash != null),
                                                     token_ids, block_size, lora_id, medium}'
echo "== the first BlockStored holds the first prompt's 4-byte token ids"
want=$($py "$kv" tokens "$p1" | jq -c '.[0:8]')
got=$(awk 'NR == 2' reencoded.txt | jq -c '.events[0].token_ids')
[[ "$want" == "$got" ]] && echo "token ids match" || echo "token ids differ: $want vs $got"
stop "$w_pid"
