# Issue 54: health polls keep their connection alive between polls (a connect and a close per
# poll were most of an idle router's CPU), and a worker that drops a kept connection as the next
# poll arrives (its keep-alive cap or idle timeout racing the poll) is still healthy: the poll
# fails at once on the reused connection and is retried on a fresh one. The scripted worker
# answers one request per connection and closes the connection at the next one's head without a
# word. With a failure threshold of 1 a single failed poll would mark it down.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/health-drop-kept/script.json"
start_router r --worker "$w_url" --router-worker-kv-blocks 64 --health-interval-ms 100 --health-failure-threshold 1
for i in $(seq 1 100); do (($(grep -c '"dropped"' w.requests.jsonl || true) >= 5)) && break; sleep 0.1; done
# Each dropped poll was asked again on a fresh connection and answered.
echo "polls dropped on a kept connection: $((($(grep -c '"dropped"' w.requests.jsonl || true) >= 5)))"
echo "marked unhealthy: $(grep -c 'is unhealthy' r.log || true)"
curl -sS "$r_url/v1/workers" | jq -c '[.workers[] | .healthy]'
stop "$r_pid"
