# Shows --kv-eviction priority (SPEC 8.6, SGLang's --radix-eviction-policy priority): the cached
# blocks of the least important requests go first, in dyn-mocker and in --sim alike. A 10-block
# pool holds a lead's prompt (important), then a background prompt; a third background prompt
# needs room. Under lru the lead's blocks (the oldest) go and its next turn misses; under
# priority the background's go and the lead's next turn is a full hit, in vLLM's polarity (lower
# values first) and in SGLang's (--enable-priority-scheduling: higher first). --sim takes the
# workload's priority on Dynamo's scale (higher is more important) and converts it.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
# 256 bytes = 64 tokens = 4 blocks of 16 (SPEC 4.2).
text() { printf "%-255s." "$1"; }
send() {  # send URL WORD PRIORITY: one completion; prints its cached prompt tokens
  curl -sS "$1/v1/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"mock-model\",\"max_tokens\":1,\"priority\":$3,\"prompt\":\"$(text "$2")\"}" |
    jq -r '.usage.prompt_tokens_details.cached_tokens // 0'
}
echo "== dyn-mocker, a 10-block pool"
n=0
for flags in "--kv-eviction lru" "--kv-eviction priority" "--kv-eviction priority --enable-priority-scheduling"; do
  lead=-5 bg=5
  [[ $flags == *enable-priority* ]] && lead=5 bg=-5
  n=$((n + 1))
  # shellcheck disable=SC2086
  start_mocker "w$n" --block-size 16 --num-gpu-blocks-override 10 $flags
  u="w${n}_url"
  w_url=${!u}
  send "$w_url" alpha "$lead" >/dev/null
  send "$w_url" bravo "$bg" >/dev/null
  send "$w_url" charlie "$bg" >/dev/null
  echo "$flags: the lead's next turn finds $(send "$w_url" alpha "$lead") of 64 prompt tokens cached"
  p="w${n}_pid"
  stop "${!p}"
done
echo "== --sim, the same pool"
printf '%s\n' \
  '{"timestamp":0,"request_id":"lead","input_length":64,"output_length":1,"hash_ids":[1],"priority":5}' \
  '{"timestamp":100,"request_id":"bg-1","input_length":64,"output_length":1,"hash_ids":[2],"priority":0}' \
  '{"timestamp":200,"request_id":"bg-2","input_length":64,"output_length":1,"hash_ids":[3],"priority":0}' \
  '{"timestamp":300,"request_id":"lead-again","input_length":64,"output_length":1,"hash_ids":[1],"priority":5}' >wl.jsonl
for flags in "--kv-eviction lru" "--kv-eviction priority" "--kv-eviction priority --enable-priority-scheduling"; do
  # shellcheck disable=SC2086
  expect_status 0 dyn-replay --sim --workers 1 --block-size 64 --kv-cache-block-size 16 --num-gpu-blocks-override 10 \
    $flags wl.jsonl >out.jsonl 2>/dev/null
  echo "$flags: lead-again finds $(jq -r 'select(.request.request_id == "lead-again") | .request.cached_tokens' out.jsonl) of 64"
done
