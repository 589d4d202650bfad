# Shows that dyn-route serve learns each worker's KV size from its engine (SPEC 3.3): a dyn-mocker
# started with --num-gpu-blocks-override 40 reports vLLM's vllm:cache_config_info gauge on GET
# /metrics, the router shows kv_blocks 40 in GET /v1/workers, says so on stderr, and its
# approximate index keeps at most 40 blocks for the worker (pruned to 32 when over); with
# --router-worker-kv-blocks the flag wins: nothing is learned and the index keeps every block.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --num-gpu-blocks-override 40
curl -sS "$w_url/metrics" | grep '^vllm:cache_config_info' | sed 's/ 1$/ ONE/'
# kv_blocks of worker 0 once a health poll has read it ("null" while unknown, up to 10 s).
kv_blocks() {
  local v i
  for i in $(seq 1 100); do
    v=$(curl -sS "$1/v1/workers" | jq -c '.workers[0].kv_blocks')
    [[ $v != null ]] && break
    sleep 0.1
  done
  echo "$v"
}
# Six sessions of distinct ~3 KB prompts: about 12 router blocks each, 72 in all.
send() {
  local s
  for s in 1 2 3 4 5 6; do
    m=$(jq -cn --arg s "$s" '[{"role":"user","content":("session " + $s + " " + ("distinct words of session " + $s + " ") * 120)}]')
    chat "$1" "{\"x-session-id\":\"s$s\"}" "$m" >>status.txt
  done
}
index_blocks() { curl -sS "$1/metrics" | awk '$1 == "dyn_router_index_blocks{worker=\"0\"}" {print $2}'; }
start_router learned --worker "$w_url" --router-mode kv --health-interval-ms 100
echo "learned: kv_blocks $(kv_blocks "$learned_url")"
send "$learned_url"
echo "learned: index blocks $(index_blocks "$learned_url") (at most 40)"
stop "$learned_pid"
grep -o 'worker 0 ([^)]*) has 40 KV blocks of 64 tokens (GET /metrics vllm:cache_config_info num_gpu_blocks)' learned.log |
  sed "s|$w_url|URL|"
start_router flagged --worker "$w_url" --router-mode kv --health-interval-ms 100 --router-worker-kv-blocks 16384
sleep 0.5  # a few health polls
echo "flagged: kv_blocks $(curl -sS "$flagged_url/v1/workers" | jq -c '.workers[0].kv_blocks')"
send "$flagged_url"
echo "flagged: index blocks $(index_blocks "$flagged_url")"
stop "$flagged_pid"
echo "flagged: notes about KV blocks: $(grep -c 'KV blocks of' flagged.log)"
echo "requests not 200: $(awk '$2 != 200' status.txt | wc -l) of $(wc -l <status.txt)"
