# Shows that the offline router (dyn-route decide, on a virtual clock) and the live router
# (dyn-route serve) make the same placements for the same vLLM KV event stream: a scripted stream
# of BlockStored / BlockRemoved / AllBlocksCleared batches from independent Python publishers (one
# per worker) is interleaved with requests; live, the batches go over ZMQ and the requests over
# HTTP; offline, the very same recorded batches are kv_event rows between the request rows.
# Ties (no worker holds a prompt) are broken by the same seeded generator in both.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
text() { printf "$1 %.0s" $(seq 30); }
start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs --seed 7 \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)"
sync_pubs 0 1
# The script: "store W WORD ID0", "remove W ID0 N", "clear W", "req WORD".
script='store 1 alpha 100
req alpha
store 0 bravo 200
req bravo
req charlie
req delta
store 0 alpha 300
req alpha
remove 1 100 4
req alpha
store 1 charlie 400
store 1 echo 500
req charlie
req echo
clear 1
req charlie
req echo
store 0 echo 600
req echo
req foxtrot
req golf'
: >decide.jsonl
t=0
while read -r op a b c; do
  t=$((t + 60000))
  case $op in
    store|remove|clear)
      case $op in
        store) ids=$(seq -s, "$c" $((c + 9)))
               e="{\"type\":\"StoreText\",\"text\":\"$(text "$b")\",\"block_size\":$bs,\"ids\":[$ids]}" ;;
        remove) e="{\"type\":\"BlockRemoved\",\"block_hashes\":[$(seq -s, "$b" $((b + c - 1)))]}" ;;
        clear) e='{"type":"AllBlocksCleared"}' ;;
      esac
      send "$a" "{\"events\":[$e],\"ts\":$t}" >/dev/null
      seq=$(tail -1 "p$a.out" | awk '{print $2}'); hex=$(tail -1 "p$a.out" | awk '{print $3}')
      wait_seq "$a" "$seq"
      echo "{\"kv_event\":{\"worker\":$a,\"payload_hex\":\"$hex\"},\"timestamp\":$t}" >>decide.jsonl ;;
    req)
      curl -s -D h.txt -o /dev/null "$r_url/v1/completions" -H "content-type: application/json" -d "{\"prompt\":\"$(text "$a")\",\"max_tokens\":1}"
      w=$(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')
      echo "$a $w" >>live.txt
      echo "{\"headers\":{},\"body\":{\"prompt\":\"$(text "$a")\",\"max_tokens\":1},\"timestamp\":$t}" >>decide.jsonl ;;
  esac
done <<<"$script"
dyn-route decide --workers 2 --router-mode kv --kv-cache-block-size $bs --seed 7 --router-kv-events decide.jsonl \
  2>decide.err | jq -r '.request.worker.decode_worker_id' >sim.txt
echo "== live placements (prompt worker)"
cat live.txt
echo "== offline placements identical: $(cmp -s <(awk '{print $2}' live.txt) sim.txt && echo yes || echo no)"
paste -d' ' <(awk '{print $1, $2}' live.txt) sim.txt | awk '$2 != $3 {print "differs:", $0}'
echo "decide kv_event rows: $(grep -c kv_event decide.jsonl), errors: $(grep -c error decide.err)"
