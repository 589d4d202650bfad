# Issue 54 / SPEC 2.6: a healthy worker that completed proxied requests since the last health round
# is not polled that round (its answers say it is alive; each poll woke the router's poller and the
# worker, a fifth of the router's CPU a request at one agent session), as Dynamo's canary checks
# probe only idle endpoints. The scripted worker answers chat completions and says 503 on GET
# /health. Polled every 300 ms (3 failed polls in a row take it down), it gets a poll at startup,
# next to none while a client sends it a request every ~50 ms for about 2.4 s (every round polled
# it before, and the third 503 took it out of service while it answered), so every request is
# answered; once the traffic stops the polls resume and take it down. Its KV capacity is unknown
# (no --router-worker-kv-blocks): that alone asks GET /metrics, not GET /health.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/health-503-answers/script.json"
start_router r --worker "$w_url" --health-interval-ms 300 --health-failure-threshold 3
polls() { grep -c '"target": *"/health"' w.requests.jsonl || true; }
for i in $(seq 1 50); do (($(polls) >= 1)) && break; sleep 0.05; done
echo "polled at startup: $(($(polls) >= 1))"
body='{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
before=$(polls)
t0=$(date +%s%N)
for i in $(seq 1 40); do
  curl -sS -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$body"
  sleep 0.05
done | sort | uniq -c | sed 's/^ *//'
rounds=$((($(date +%s%N) - t0) / 300000000))
during=$(($(polls) - before))
# A loaded machine may leave a round with no answer in it (then it polls): a quarter is room.
echo "polls while answering, at most a quarter of the rounds: $((during * 4 <= rounds))"
((during * 4 <= rounds)) || echo "  $during polls in $rounds rounds"
echo "marked unhealthy while answering: $(grep -c 'is unhealthy' r.log || true)"
for i in $(seq 1 60); do grep -q 'is unhealthy' r.log && break; sleep 0.05; done
echo "marked unhealthy once idle: $(grep -c 'is unhealthy' r.log || true) ($(grep -o 'GET /health answered 503 ([0-9] polls in a row)' r.log))"
echo "asked GET /metrics: $(grep -c '"target": *"/metrics"' w.requests.jsonl || true)"
stop "$r_pid"
