# Shows that KV event batches are applied event by event, whatever else a batch holds, and the same
# way by dyn-route serve (live ZMQ) and dyn-route decide (recorded kv_event rows), in each layout
# vLLM has published (array_like, tagged-map events, map batches). A batch with a GPU store, a CPU
# placeholder of the same engine ids and an event type the router does not know keeps its store; a
# hybrid model's sliding-window group stores and evicts the full-attention group's engine ids
# without dropping them; blocks stored under a LoRA adapter are hits for requests to that adapter
# (model = its name), never for the base model; an adapter known only by id is skipped. Both
# routers count the skipped events by reason.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
text() { printf "$1 %.0s" $(seq 40); }   # 3 blocks of 16 tokens
store() { echo "{\"type\":\"StoreText\",\"text\":\"$(text "$1")\",\"block_size\":$bs,\"ids\":[$2]${3:+,$3}}"; }
start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs \
  --seed 7 --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)"
sync_pubs 0 1
: >decide.jsonl
t=0
batch() {  # batch WORKER LAYOUT EVENTS_JSON
  t=$((t + 1000))
  local s
  s=$(send "$1" "{\"events\":$(jq -c . <<<"$3"),\"encoding\":\"$2\",\"ts\":$t}")
  wait_seq "$1" "$s"
  echo "{\"kv_event\":{\"worker\":$1,\"payload_hex\":\"$(tail -1 "p$1.out" | awk '{print $3}')\"},\"timestamp\":$t}" >>decide.jsonl
}
batch 1 array "[$(store alpha 101,102,103),
  {\"type\":\"BlockStored\",\"block_hashes\":[101,102],\"parent_block_hash\":null,\"token_ids\":[],\"block_size\":0,\"medium\":\"CPU\"},
  {\"type\":\"BlockMigrated\",\"block_hashes\":[101],\"destination\":\"peer\"}]"
batch 0 map-events "[$(store bravo 201,202,203 '"group_idx":0,"kv_cache_spec_kind":"full_attention"'),
  $(store bravo 201,202,203 '"group_idx":1,"kv_cache_spec_kind":"sliding_window","kv_cache_spec_sliding_window":32'),
  {\"type\":\"BlockRemoved\",\"block_hashes\":[201,202,203],\"medium\":\"GPU\",\"group_idx\":1}]"
batch 1 map "[$(store charlie 301,302,303 '"lora_id":7,"lora_name":"sql-lora"'),
  $(store delta 401,402,403 '"lora_id":3')]"
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1)"
echo "== placements: prompt model -> live offline"
: >live.txt
for q in "alpha m" "bravo m" "charlie m" "charlie sql-lora" "delta m"; do
  read -r word model <<<"$q"
  t=$((t + 1000))
  body="{\"model\":\"$model\",\"prompt\":\"$(text "$word")\",\"max_tokens\":1}"
  curl -s -D h.txt -o /dev/null "$r_url/v1/completions" -H 'content-type: application/json' -d "$body"
  echo "$word $model $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')" >>live.txt
  echo "{\"headers\":{},\"body\":$body,\"timestamp\":$t,\"output_length\":1}" >>decide.jsonl
done
dyn-route decide --workers 2 --router-mode kv --kv-cache-block-size $bs --seed 7 --router-kv-events --summary d.json \
  decide.jsonl 2>decide.err | jq -r '[.request.worker.decode_worker_id, .request.cached_tokens] | @tsv' >offline.txt
paste -d' ' live.txt offline.txt
echo "== skipped: live (per worker), offline"
curl -s "$r_url/metrics" | grep '^dyn_kv_events_skipped_total' | sed 's/url="[^"]*",//' | awk '$2 != 0'
echo "bad batches: $(metric dyn_kv_events_bad_batches_total 0) $(metric dyn_kv_events_bad_batches_total 1)"
jq -c .summary.kv_events_skipped d.json
grep -o 'KV event.*' decide.err | sort | uniq -c
stop "$r_pid"
