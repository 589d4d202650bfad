# SPEC 3.3: the router reads a worker's KV capacity from GET /metrics once it is up, and again
# whenever it comes back up, since the engine that comes back may be another. A worker that a
# failed proxied request marked down (its engine killed and started again, with another KV size,
# between two health polls: no poll ever failed) is asked again too: the router once kept the old
# engine's 40 blocks there, since only a failed poll made it ask again (found by a fresh-eyes run).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w --num-gpu-blocks-override 40
port=${w_url##*:}
# Polls 2 s apart: the restart below falls between two of them.
start_router r --worker "$w_url" --router-mode kv --health-interval-ms 2000
kv_blocks() { curl -sS "$r_url/v1/workers" | jq -c '.workers[0].kv_blocks'; }
for i in $(seq 1 50); do [[ $(kv_blocks) != null ]] && break; sleep 0.1; done
echo "first engine: kv_blocks $(kv_blocks)"
_dyn_kill -KILL "$w_pid"
wait "$w_pid" 2>/dev/null
m='[{"role":"user","content":"hello"}]'
echo "request to the killed worker: $(chat "$r_url" '{}' "$m" | awk '{print $2}')"
grep -q 'is unhealthy: a request failed' r.log && echo "marked down by the failed request"
dyn-mocker --port "$port" --num-gpu-blocks-override 80 >w2.log 2>&1 &
_dyn_pids+=($!)
for i in $(seq 1 100); do grep -q 'is healthy' r.log && [[ $(kv_blocks) == 80 ]] && break; sleep 0.1; done
echo "second engine: kv_blocks $(kv_blocks)"
echo "request after: $(chat "$r_url" '{}' "$m" | awk '{print $2}')"
stop "$r_pid"
