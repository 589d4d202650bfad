# Shows case 44 (vllm-project/vllm#43468): a vLLM step batch mixing a GPU BlockStored with a
# KV-offload placeholder (medium CPU, no token ids, block size 0) keeps its GPU blocks, and a
# CPU BlockRemoved never removes the GPU copy. Offline (dyn-route decide on the case's kv_event
# rows) and live (dyn-route serve subscribed to two vLLM-format publishers that replay the case's
# batch files) alike, prompt A goes to worker 1 with its 4 blocks cached, as the control prompt Q
# does; the CPU placeholder is skipped as a placeholder (the host tier is indexed, but a store
# without token ids cannot be hashed), the CPU removal names no host block, and no batch is bad.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
c="$DYN_ROOT/tests/fixtures/cases/44-kv-offload-placeholder-batch"
echo "== offline: dyn-route decide"
dyn-route decide --workers 2 --router-mode kv --kv-cache-block-size 16 --router-kv-events "$c/decide-input.jsonl" \
  --summary d.json 2>decide.err |
  jq -c '{x_request_id: .request.x_request_id, worker: .request.worker.decode_worker_id, cached: .request.cached_tokens}'
grep -o 'KV events\? not applied.*' decide.err
echo "errors: $(grep -c 'error' decide.err), skipped: $(jq -c .summary.kv_events_skipped d.json)"

echo "== live: dyn-route serve"
start_pub 0; start_pub 1
start_scripted w0 "$c/worker-script.json"
start_scripted w1 "$c/worker-script.json"
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size 16 \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)"
sync_pubs 0 1
for b in batch-0-control-worker1 batch-1-worker1 batch-2-worker1; do
  s=$(send 1 "$(jq -c . "$c/$b.json")"); wait_seq 1 "$s"
done
for p in Q A; do
  curl -s -D h.txt -o /dev/null "$r_url/v1/completions" -H 'content-type: application/json' \
    -d "$(jq -Rsc '{model: "m", prompt: ., max_tokens: 1}' "$c/prompt-$p.txt")"
  echo "$p -> worker $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')"
done
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1)"
echo "bad batches w1: $(metric dyn_kv_events_bad_batches_total 1)"
curl -s "$r_url/metrics" | grep '^dyn_kv_events_skipped_total{.*worker="1"' | sed 's/url="[^"]*",//' | awk '$2 != 0'
stop "$r_pid"
