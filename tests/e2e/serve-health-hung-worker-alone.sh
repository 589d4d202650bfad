# SPEC 2.6 / issue 54: a worker that takes the health poll's connection and never answers (a
# stopped or wedged engine) holds up its own poll only. The scripted worker h stalls every GET
# /health for a minute; the router polls every 100 ms with a 3 s timeout, 2 failed polls in a row
# taking a worker down. Once the mocker m has been polled, it is killed: it must be marked down
# within the 3 s of one timed-out poll of h. Polled one worker after another, m's polls waited for
# each of h's timeouts, so its two failed polls took at least 3 s (3.1-6 s).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted h "$DYN_ROOT/tests/fixtures/health-hung/script.json"
start_mocker m
start_router r --worker "$h_url" --worker "$m_url" --health-interval-ms 100 --health-timeout-ms 3000 \
  --health-failure-threshold 2
# The mocker's first good poll read its KV capacity.
for i in $(seq 1 100); do [[ $(curl -sS "$r_url/v1/workers" | jq '.workers[1].kv_blocks') != null ]] && break; sleep 0.05; done
echo "mocker polled: $(curl -sS "$r_url/v1/workers" | jq '.workers[1].kv_blocks != null')"
t0=$(date +%s%N)
_dyn_kill -KILL "$m_pid"
wait "$m_pid" 2>/dev/null
for i in $(seq 1 200); do grep -q "worker 1 .* is unhealthy" r.log && break; sleep 0.02; done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "killed mocker marked down: $(grep -c "worker 1 .* is unhealthy" r.log)"
echo "within one poll timeout of the hung worker: $((ms < 3000))"
((ms < 3000)) || echo "  after $ms ms"
# The hung worker has one poll in flight at a time: the router waits out each one's timeout.
polls=$(grep -c '"target": *"/health"' h.requests.jsonl || true)
total_ms=$((($(date +%s%N) - t0) / 1000000 + 6000))
echo "hung worker's polls, one per timeout at most: $((polls <= total_ms / 3000 + 1))"
((polls <= total_ms / 3000 + 1)) || echo "  $polls polls"
stop "$r_pid"
