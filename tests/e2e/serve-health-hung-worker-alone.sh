# SPEC 2.6 / issue 54: a worker that takes the health poll's connection and never answers (a
# stopped or wedged engine: its socket still completes the connection) holds up its own polls
# only, however many hang. Seventeen such workers (one more than an earlier fixed pool of poll
# threads) beside a mocker m; the router polls every 100 ms with a 20 s timeout, 2 failed polls in
# a row taking a worker down. Once m has been polled, it is killed: it must be marked down within
# 3 s, while the hung workers' polls still wait. Polled one worker after another, m's polls waited
# for every hung worker's timeout (4.5 s with one hung worker and a 3 s timeout); with 16 poll
# threads, 16 hung workers took them all (5 s, the fresh-eyes run). Then SIGTERM: the router cuts
# its hung polls short instead of waiting out their timeout (it waited, 2.5-18 s).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
# 17 listening sockets that never accept: the kernel completes connections, nobody reads them.
python3 -c '
import socket, sys, time
socks = []
for _ in range(17):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64); socks.append(s)
with open("hung.urls.tmp", "w") as f:
    f.write("".join("http://127.0.0.1:%d\n" % s.getsockname()[1] for s in socks))
import os; os.rename("hung.urls.tmp", "hung.urls")
time.sleep(600)
' &
_dyn_pids+=($!)
wait_file hung.urls
start_mocker m
hung=()
while read -r u; do hung+=(--worker "$u"); done <hung.urls
start_router r "${hung[@]}" --worker "$m_url" --health-interval-ms 100 --health-timeout-ms 20000 \
  --health-failure-threshold 2
# The mocker's first good poll read its KV capacity.
mk() { curl -sS "$r_url/v1/workers" | jq '.workers[17].kv_blocks != null'; }
for i in $(seq 1 100); do [[ $(mk) == true ]] && break; sleep 0.05; done
echo "mocker polled: $(mk)"
t0=$(date +%s%N)
_dyn_kill -KILL "$m_pid"
wait "$m_pid" 2>/dev/null
for i in $(seq 1 200); do grep -q "worker 17 .* is unhealthy" r.log && break; sleep 0.02; done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "killed mocker marked down: $(grep -c "worker 17 .* is unhealthy" r.log)"
echo "within 3 s, the hung workers' polls still waiting: $((ms < 3000))"
((ms < 3000)) || echo "  after $ms ms"
# A poll thread for each hung request at most (18 workers; the loop threads and the rest are few).
threads=$(ls "/proc/$r_pid/task" | wc -l)
echo "router threads under 40: $((threads < 40))"
((threads < 40)) || echo "  $threads threads"
t0=$(date +%s%N)
stop "$r_pid"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "exits on SIGTERM within 2 s with polls hung: $((ms < 2000))"
((ms < 2000)) || echo "  after $ms ms"
