# Shows that dyn-mocker publishes its KV events in vLLM's format, byte for byte, in both of vLLM's
# encodings: by default as current vLLM does (batch and events as msgpack maps, with
# data_parallel_rank 0), and with --kv-events-encoding array as older vLLM and SGLang do (arrays,
# no rank). An independent Python recorder (python3-zmq, python3-msgpack, written from vLLM's
# documented event classes) fetches the mocker's batches from its replay socket, decodes them,
# re-encodes them with its own encoder in the layout it found and gets the very same bytes; the
# BlockStored carries the prompt's token ids, and an evicted prefix comes back as BlockRemoved.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
py=/usr/bin/python3
kv="$DYN_ROOT/tests/e2e/helpers/vllm_kv_events.py"
p1='The quick brown fox jumps over the lazy dog'   # 43 bytes: 11 tokens, 2 full blocks of 4
# A different 31-token prompt needs all 8 blocks: the first prompt's cached blocks are evicted.
p2=$(printf 'Pack my box with five dozen liquor jugs. %.0s' 1 2 3)

record() {  # record NAME MOCKER_FLAGS...: two prompts, then the batches the replay socket holds
  local name=$1; shift
  echo "== dyn-mocker ${*:-(default encoding)}"
  start_mocker w --block-size 4 --num-gpu-blocks-override 8 --speedup-ratio 100 \
    --kv-events-endpoint 'tcp://127.0.0.1:*' --kv-events-replay-endpoint 'tcp://127.0.0.1:*' "$@"
  curl -s "$w_url/health" | jq -c '{kv_block_size, pub: (.kv_events_endpoint | test("^tcp://127.0.0.1:[0-9]+$")),
                                     replay: (.kv_events_replay_endpoint | test("^tcp://127.0.0.1:[0-9]+$"))}'
  local rep
  rep=$(curl -s "$w_url/health" | jq -r .kv_events_replay_endpoint)
  curl -s "$w_url/v1/completions" -d "{\"prompt\":\"$p1\",\"max_tokens\":1}" | jq -c .usage
  curl -s "$w_url/v1/completions" -d "{\"prompt\":\"$p2\",\"max_tokens\":1}" | jq -c .usage
  sleep 0.3
  $py "$kv" fetch "$rep" >"$name.txt"
  stop "$w_pid"
  echo "batches recorded: $(wc -l <"$name.txt")"
  $py "$kv" reencode <"$name.txt" >"$name.re.txt"
  paste -d' ' <(awk '{print $1, $2}' "$name.txt") <(awk 'NR % 2 == 1 {print $2}' "$name.re.txt") \
    | awk '{print "batch " $1 ": " ($2 == $3 ? "re-encoded bytes identical" : "DIFFERENT")}'
  echo "first payload byte: $(head -c 2 <(awk 'NR == 1 {print $2}' "$name.txt")) (0x9_: array, 0x8_: map)"
  echo "-- batches (ts left out)"
  awk 'NR % 2 == 0' "$name.re.txt" | jq -c '{layout, data_parallel_rank}' | sort | uniq -c | sed 's/^ *//'
  awk 'NR % 2 == 0' "$name.re.txt" | jq -c '.events[] | {type, n: (.block_hashes // [] | length),
      parent: (.parent_block_hash != null), token_ids, block_size, lora_id, medium}'
  echo "-- the first BlockStored holds the first prompt's 4-byte token ids"
  local want got
  want=$($py "$kv" tokens "$p1" | jq -c '.[0:8]')
  got=$(awk 'NR == 2' "$name.re.txt" | jq -c '.events[0].token_ids')
  [[ "$want" == "$got" ]] && echo "token ids match" || echo "token ids differ: $want vs $got"
}

record current
record older --kv-events-encoding array
echo "== an unknown encoding is a usage error"
expect_status 2 dyn-mocker --kv-events-endpoint 'tcp://127.0.0.1:*' --kv-events-encoding msgspec 2>&1 | head -1
echo "== the encoding without an endpoint is a usage error"
expect_status 2 dyn-mocker --kv-events-encoding array 2>&1 | head -1
