# SPEC 2.6 / Fleet::add: a worker removed and added back starts over (health, circuit, failed
# polls, KV capacity), also when one of its health polls was in flight across the removal: that
# poll's answer belongs to the worker as it was and is dropped. The worker h never answers (a
# listening socket that nobody reads); polls every 100 ms, 1 s timeout, 2 failed polls in a row
# take a worker down. h is removed and added back 1.5 s after the router starts: one failed poll
# behind it, the next one in flight. Starting over, it needs two more failed polls (2 s or more)
# before it goes down; with the old failure count, the poll in flight took it down at once (0.6 s).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
python3 -c '
import os, socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
open("h.url.tmp", "w").write("http://127.0.0.1:%d\n" % s.getsockname()[1]); os.rename("h.url.tmp", "h.url")
time.sleep(600)
' &
_dyn_pids+=($!)
wait_file h.url
h=$(cat h.url)
start_mocker m
start_router r --worker "$h" --worker "$m_url" --health-interval-ms 100 --health-timeout-ms 1000 \
  --health-failure-threshold 2
sleep 1.5
admin() { curl -sS -o /dev/null -w '%{http_code}' -X "$1" "$r_url/v1/workers" -H 'content-type: application/json' -d "{\"url\":\"$h\"}"; }
echo "removed: $(admin DELETE); added back: $(admin POST)"
t0=$(date +%s%N)
echo "down before the re-add: $(grep -c "worker 0 .* is unhealthy" r.log)"
for i in $(seq 1 250); do grep -q "worker 0 .* is unhealthy" r.log && break; sleep 0.02; done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "down after the re-add: $(grep -c "worker 0 .* is unhealthy" r.log) ($(grep -o 'GET /health failed: [A-Za-z]* ([0-9] polls in a row)' r.log))"
echo "after two failed polls of its own, 1.5 s or more: $((ms >= 1500))"
((ms >= 1500)) || echo "  after $ms ms"
stop "$r_pid"
