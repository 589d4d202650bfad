# Issue 16: a worker too busy to answer GET /health in time, while it completes proxied requests,
# stays healthy (at 2,000 streams the router marked its only dyn-mocker down and answered 503 "no
# healthy worker" to everyone). The scripted worker answers /health only after 1.5 s (the poll
# times out at 200 ms) and chat completions at once. The first poll, before any traffic, counts (1 of
# 2); while requests complete, failed polls are not counted; once traffic stops, two failed polls
# mark the worker down as before.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/health-busy/script.json"
start_router r --worker "$w_url" --health-interval-ms 500 --health-timeout-ms 200 --health-failure-threshold 2
body='{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
for i in $(seq 1 30); do
  curl -sS -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$body"
  sleep 0.05
done | sort | uniq -c | sed 's/^ *//'
echo "marked unhealthy while answering: $(grep -c 'is unhealthy' r.log || true)"
# No traffic now: the polls time out with nothing completed, and the worker goes down.
for i in $(seq 1 60); do grep -q 'is unhealthy' r.log && break; sleep 0.1; done
echo "marked unhealthy once idle: $(grep -c 'is unhealthy' r.log || true)"
stop "$r_pid"
