# Shows dyn-route serve in front of workers whose KV events come from vLLM-format publishers: an
# independent Python publisher per worker (python3-zmq, python3-msgpack, written from vLLM's
# documented event classes) feeds the router, and routing follows the events: a prompt goes to the
# worker whose BlockStored holds its blocks, and moves when BlockRemoved/BlockStored move them. A
# sequence gap is filled from the replay socket; a lost batch clears that worker's index (and
# says so); a restarted publisher (sequence back at 0) is followed. /metrics counts all of it.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
route() { curl -s -D h.txt -o /dev/null "$r_url/v1/completions" -H "content-type: application/json" -d "{\"prompt\":\"$1\",\"max_tokens\":1}"
          tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}'; }
text() { printf "$1 %.0s" $(seq 40); }   # 40 x (len+1) bytes: 3 or 4 blocks of 16 tokens
store() { echo "{\"type\":\"StoreText\",\"text\":\"$(text "$1")\",\"block_size\":$bs,\"ids\":[$2]}"; }

start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
echo "== usage errors"
ports() { sed -E 's/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/g'; }
expect_status 2 dyn-route serve --worker "$w0_url" --router-mode kv --router-kv-events --port 0 2>&1 | head -1 | ports
expect_status 2 dyn-route serve --worker "$w0_url" --worker-kv-events "$w0_url=$(ev 0)" --port 0 2>&1 | head -1 | ports
dyn-route serve --worker "$w0_url" --router-mode kv --router-kv-events --worker-kv-events "http://x=$(ev 0)" --port 0 2>&1 | head -1 | ports
expect_status 2 dyn-route serve --worker "$w0_url" --router-mode kv --router-kv-events --worker-kv-events "$w0_url=not-an-address" --port 0 2>&1 | grep error
# Only the kv policy reads the index the events feed: with any other mode the flag would mean nothing.
expect_status 2 dyn-route serve --worker "$w0_url" --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --port 0 2>&1 | head -1
expect_status 2 dyn-route decide --workers 2 --router-mode least-loaded --router-kv-events /dev/null 2>&1 | head -1
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)"
sync_pubs 0 1
echo "== routing follows BlockStored"
s=$(send 1 "{\"events\":[$(store alpha '11,12,13,14,15,16,17,18,19,20')]}"); wait_seq 1 "$s"
s=$(send 0 "{\"events\":[$(store bravo '21,22,23,24,25,26,27,28,29,30')]}"); wait_seq 0 "$s"
echo "alpha -> worker $(route "$(text alpha)")"
echo "bravo -> worker $(route "$(text bravo)")"
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1)"
echo "== BlockRemoved on worker 1, BlockStored on worker 0: alpha moves"
s=$(send 1 '{"events":[{"type":"BlockRemoved","block_hashes":[11,12,13,14,15,16,17,18,19,20]}]}'); wait_seq 1 "$s"
s=$(send 0 "{\"events\":[$(store alpha '31,32,33,34,35,36,37,38,39,40')]}"); wait_seq 0 "$s"
echo "alpha -> worker $(route "$(text alpha)")"
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1)"
echo "== a hidden batch (a gap) is fetched from the replay socket"
send 1 "{\"events\":[$(store charlie '41,42,43,44,45,46,47,48,49,50')], \"hide\":1}" >/dev/null
s=$(send 1 "{\"events\":[$(store delta '51,52,53,54,55,56,57,58,59,60')]}"); wait_seq 1 "$s"
echo "charlie -> worker $(route "$(text charlie)")"
echo "gaps $(metric dyn_kv_events_gaps_total 1) unrecovered $(metric dyn_kv_events_gaps_unrecovered_total 1) replayed $(metric dyn_kv_events_replayed_batches_total 1)"
echo "== a lost batch: worker 1's index is cleared, then follows the stream again"
send 1 "{\"events\":[$(store echo '61,62,63,64,65,66,67,68,69,70')], \"lose\":1}" >/dev/null
s=$(send 1 "{\"events\":[$(store foxtrot '71,72,73,74,75,76,77,78,79,80')]}"); wait_seq 1 "$s"
echo "gaps $(metric dyn_kv_events_gaps_total 1) unrecovered $(metric dyn_kv_events_gaps_unrecovered_total 1) resets $(metric dyn_kv_events_index_resets_total 1)"
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1)"
echo "foxtrot -> worker $(route "$(text foxtrot)")"
grep -c "cleared the worker's KV index: missed KV event batches" r.log
echo "== publisher 1 restarts on the same addresses (sequence back at 0)"
pub1=$(jq -r .endpoint p1.json); rep1=$(jq -r .replay_endpoint p1.json)
kill "$p1_pid"; wait "$p1_pid" 2>/dev/null; exec {p1_fd}>&-
PUB_ADDR=$pub1 REPLAY_ADDR=$rep1 start_pub 1
for _ in $(seq 100); do s=$(send 1 "{\"events\":[$(store golf '81,82,83,84,85,86,87,88,89,90')]}")
  [[ "$(metric dyn_kv_events_publisher_restarts_total 1)" == 1 ]] && break; sleep 0.05; done
wait_seq 1 "$s"
echo "restarts $(metric dyn_kv_events_publisher_restarts_total 1)"
echo "golf -> worker $(route "$(text golf)")"
echo "index blocks: w0 $(metric dyn_router_index_blocks 0) w1 $(metric dyn_router_index_blocks 1) (golf only)"
grep -c "cleared the worker's KV index: publisher restarted\|cleared the worker's KV index: the publisher connection dropped" r.log
echo "== events by type (worker 1; BlockStored counts the restarted publisher's tries too)"
curl -s "$r_url/metrics" | grep '^dyn_kv_events_total{worker="1"' | sed 's/url="[^"]*",//' \
  | awk '{ if ($1 ~ /BlockStored/) print $1, ($2 >= 5 ? ">= 5" : $2); else print }'
stop "$r_pid"
