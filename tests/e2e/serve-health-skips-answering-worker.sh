# Issue 54: a healthy worker that completed proxied requests since the last health round is not
# polled that round (its answers say it is alive; each poll woke the router's poller and the worker,
# a fifth of the router's CPU a request at one agent session), as Dynamo's canary checks probe only
# idle endpoints. Polled every 100 ms, the scripted worker gets GET /health at startup, next to
# none while a client sends it a request every ~50 ms for about 2 s (every round polled before:
# about 20), and again every round once the traffic stops.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted w "$DYN_ROOT/tests/fixtures/health-answers/script.json"
start_router r --worker "$w_url" --router-worker-kv-blocks 64 --health-interval-ms 100
polls() { grep -c '"target": *"/health"' w.requests.jsonl || true; }
for i in $(seq 1 50); do (($(polls) >= 1)) && break; sleep 0.1; done
echo "polled at startup: $(($(polls) >= 1))"
body='{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
before=$(polls)
t0=$(date +%s%N)
for i in $(seq 1 40); do
  curl -sS -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' "$r_url/v1/chat/completions" -d "$body"
  sleep 0.05
done | sort | uniq -c | sed 's/^ *//'
rounds=$((($(date +%s%N) - t0) / 100000000))
during=$(($(polls) - before))
# A loaded machine may leave a round with no answer in it (then it polls): a quarter is room.
echo "polls while answering, at most a quarter of the rounds: $((during * 4 <= rounds))"
((during * 4 <= rounds)) || echo "  $during polls in $rounds rounds"
before=$(polls)
sleep 0.6
echo "polled again once idle: $(($(polls) - before >= 3))"
echo "marked unhealthy: $(grep -c 'is unhealthy' r.log || true)"
stop "$r_pid"
