# Shows that KV events on the host and disk tiers change where dyn-route serve routes: an
# independent vLLM-format publisher per worker (python3-zmq, python3-msgpack) stores a prompt's
# first block on worker 0's GPU, then all 3 of its blocks on worker 1's host tier (medium "CPU"):
# with the default host weight 0.75 the prompt goes to worker 1 (credit 2.25 blocks against 1).
# Moved to disk (store "DISK" before remove "CPU", as engines order it) they are worth 0.75: back
# to worker 0. Worker 1 stores block 0 on its GPU too: GPU 1 + disk 2 x 0.25 (the disk run
# continues where the GPU run stopped; block 0, on both tiers, counts once) = 1.5 wins. A shared
# pool store (EXTERNAL) is not credited without --shared-cache-type, an unknown medium is skipped
# and counted, and AllBlocksCleared sends the prompt back to worker 0. dyn-route decide on the
# recorded batches makes the same choices and --explain shows each candidate's per-tier overlap;
# with both weights 0 (GPU-only credit) the lower tiers count for nothing; with
# --shared-cache-type events the pool's blocks past each GPU run are shown and credited.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
prompt=$(printf "alpha %.0s" $(seq 40))   # 240 bytes: 3 blocks of 16 four-byte tokens
store() {  # store IDS MEDIUM [BYTES]: BlockStored of the prompt's first BYTES bytes (default all)
  echo "{\"type\":\"StoreText\",\"text\":\"${prompt:0:${3:-240}}\",\"block_size\":$bs,\"ids\":[$1],\"medium\":\"$2\"}"
}
ids=101,102,103
start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)"
sync_pubs 0 1
: >decide.jsonl
t=0
batch() {  # batch WORKER EVENTS_JSON: publish, wait until applied, record as a kv_event row
  t=$((t + 1000))
  local s
  s=$(send "$1" "{\"events\":[$2]}")
  wait_seq "$1" "$s"
  echo "{\"kv_event\":{\"worker\":$1,\"payload_hex\":\"$(tail -1 "p$1.out" | awk '{print $3}')\"},\"timestamp\":$t}" >>decide.jsonl
}
route() {  # route LABEL: send the prompt live, print LABEL and the worker; record the request row
  t=$((t + 1000))
  local body="{\"model\":\"m\",\"prompt\":\"$prompt\",\"max_tokens\":1}"
  curl -s -D h.txt -o /dev/null "$r_url/v1/completions" -H 'content-type: application/json' -d "$body"
  echo "$1 -> worker $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')"
  echo "{\"headers\":{\"x-request-id\":\"$1\"},\"body\":$body,\"timestamp\":$t,\"output_length\":1}" >>decide.jsonl
}
echo "== live: dyn-route serve"
batch 0 "$(store 1 GPU 64)"
route gpu-only
batch 1 "$(store "$ids" CPU)"
route host
batch 1 "$(store "$ids" DISK),{\"type\":\"BlockRemoved\",\"block_hashes\":[$ids],\"medium\":\"CPU\"}"
route disk
batch 1 "$(store 201 GPU 64)"
route gpu-and-disk
batch 1 "$(store 301,302,303 EXTERNAL),$(store 401 TAPE 64)"
route pool
batch 1 '{"type":"AllBlocksCleared"}'
route cleared
curl -s "$r_url/metrics" | grep '^dyn_kv_events_skipped_total' | sed 's/url="[^"]*",//' | awk '$2 != 0'
stop "$r_pid"
echo "== offline: dyn-route decide --explain on the recorded batches"
decide() { dyn-route decide --workers 2 --router-mode kv --kv-cache-block-size $bs --router-kv-events --explain "$@" decide.jsonl; }
decide 2>decide.err | jq -c '[.request.x_request_id, .request.worker.decode_worker_id,
  (.dyn.explain.workers[] | del(.prefill_blocks, .decode_blocks, .eligible))]'
grep -o 'KV events not applied.*' decide.err
echo "== offline, GPU-only credit (both weights 0)"
decide --router-host-cache-hit-weight 0 --disk-cache-hit-weight 0 2>/dev/null |
  jq -c '[.request.x_request_id, .request.worker.decode_worker_id, [.dyn.explain.workers[].cost]]'
echo "== offline, a shared pool learned from EXTERNAL events (multiplier 0.5)"
decide --shared-cache-type events 2>/dev/null | jq -c 'select(.request.x_request_id == "pool" or .request.x_request_id == "cleared") |
  [.request.x_request_id, .request.worker.decode_worker_id, (.dyn.explain.workers[] | del(.prefill_blocks, .decode_blocks, .eligible))]'
echo "== the weights come from the environment too, and are checked"
DYN_ROUTER_HOST_CACHE_HIT_WEIGHT=0 DYN_ROUTER_DISK_CACHE_HIT_WEIGHT=0 decide 2>/dev/null | jq -r .request.worker.decode_worker_id | tr '\n' ' '; echo
expect_status 2 decide --router-host-cache-hit-weight 1.5 2>&1 | head -1
expect_status 2 dyn-route decide --workers 2 --router-mode kv --router-kv-events --router-host-ttl-secs 600 decide.jsonl 2>&1 | head -1
expect_status 2 dyn-route decide --workers 2 --router-mode kv --shared-cache-multiplier 0.5 decide.jsonl 2>&1 | head -1
expect_status 2 dyn-route decide --workers 2 --router-mode kv --shared-cache-type events decide.jsonl 2>&1 | head -1
