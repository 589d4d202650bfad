# Shows that a dyn-route serve whose constructor starts threads of its own (the Redis binding
# store's subscriber and pipeline, a KV event subscriber per worker) still stops cleanly on
# SIGTERM: every one of its threads blocks SIGTERM and SIGINT, so only the signal watcher takes
# them, and the drain and the final trace flush always run. A thread that did not block them could
# be handed the signal by the kernel and the process would die of it, losing the rows still in
# the trace buffer (e2e.serve-replicas-redis lost the last two rows of one replica that way).
# The flush interval here is 1 h (a loaded machine once took over 60 s to reach the stop), so
# only the stop's flush can write the rows after the first (a row with none in the interval
# before it is written at once: SPEC 5.2).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/redis.sh"
need_redis
start_redis rd
start_mocker w0 --worker-id 0 --kv-events-endpoint 'tcp://127.0.0.1:*'
start_mocker w1 --worker-id 1 --kv-events-endpoint 'tcp://127.0.0.1:*'
ev() { curl -s "$1/health" | jq -r .kv_events_endpoint; }
start_router r --worker "$w0_url" --worker "$w1_url" --router-mode kv --router-kv-events \
  --worker-kv-events "$w0_url=$(ev "$w0_url")" --worker-kv-events "$w1_url=$(ev "$w1_url")" \
  --router-binding-store "redis://127.0.0.1:$rd_port" --router-session-affinity-ttl-secs 60 \
  --request-trace --request-trace-file-format jsonl --request-trace-file-path "$PWD/trace.jsonl" \
  --request-trace-file-flush-interval-ms 3600000
for i in $(seq 1 20); do
  curl -sS -N -o /dev/null -H "x-session-id: s-$((i % 5))" -H 'content-type: application/json' \
    "$r_url/v1/chat/completions" \
    -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"turn $i\"}]}"
done
# unblocked PID: the threads of PID whose signal mask lacks SIGINT (bit 2) or SIGTERM (bit 15),
# less the signal watcher (inside sigtimedwait its mask leaves out the signals it waits for).
unblocked() {
  local t m n=0
  for t in /proc/"$1"/task/*; do
    m=$((16#$(awk '$1 == "SigBlk:" {print $2}' "$t/status")))
    (( (m & 0x4002) == 0x4002 )) || n=$((n + 1))
  done
  echo "$((n - 1)) of $(ls /proc/"$1"/task | wc -l)"
}
read -r n _ <<<"$(unblocked "$r_pid")"
echo "router threads not blocking SIGTERM/SIGINT besides the watcher: $n (more than 4 threads: $( (( $(ls /proc/"$r_pid"/task | wc -l) > 4 )) && echo yes))"
read -r n _ <<<"$(unblocked "$w0_pid")"
echo "mocker threads not blocking SIGTERM/SIGINT besides the watcher: $n"
echo "rows before the stop: $(wc -l <trace.jsonl)"
kill -TERM "$r_pid"
wait "$r_pid"
echo "router exit status after SIGTERM: $?"
echo "rows after the stop: $(wc -l <trace.jsonl), ok $(jq -s 'map(select(.dyn.status == "ok")) | length' trace.jsonl)"
