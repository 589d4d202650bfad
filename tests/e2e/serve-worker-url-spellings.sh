# Shows that a worker is named by one canonical URL everywhere (issue 51.2): two replicas sharing
# Redis, one given "http://127.0.0.1:P", the other "HTTP://127.0.0.1:P/v1/" (and the default port
# spelled out for nothing), keep every session on one worker across replicas (the store's values
# compare canonically: no flip per turn, no "bad value" warning); /v1/workers, /health and the
# store show the canonical form; --worker-kv-events pairs with any spelling of a --worker; the same worker named
# twice is a usage error.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/redis.sh"
need_redis
start_redis db
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
p0=${w0_url##*:} p1=${w1_url##*:}
common=(--router-session-affinity-ttl-secs 300 --router-binding-store "redis://127.0.0.1:$db_port"
        --request-trace --request-trace-file-format jsonl --request-trace-file-flush-interval-ms 100)
start_router ra --worker "http://127.0.0.1:$p0" --worker "http://127.0.0.1:$p1" "${common[@]}" \
  --request-trace-file-path "$PWD/a.jsonl"
start_router rb --worker "HTTP://127.0.0.1:$p1/v1/" --worker "http://127.0.0.1:$p0/" "${common[@]}" \
  --request-trace-file-path "$PWD/b.jsonl"
m='[{"role":"user","content":"tell me about caches"}]'
for s in 1 2 3 4 5 6; do
  for t in 1 2 3 4; do
    if ((t % 2)); then u=$ra_url; else u=$rb_url; fi
    out=$(chat "$u" "{\"x-session-id\":\"s$s\"}" "$m")
    echo "${out#* }" >>status.txt
  done
done
echo "turns: $(wc -l <status.txt), not 200: $(grep -vcx 200 status.txt)"
sleep 0.3
vals=$(redis-cli -h 127.0.0.1 -p "$db_port" --scan | while read -r k; do redis-cli -h 127.0.0.1 -p "$db_port" get "$k"; done)
echo "store values: $(wc -l <<<"$vals"), all canonical: $(grep -cvE '^http://127\.0\.0\.1:[0-9]+$' <<<"$vals" | sed 's/^0$/yes/')"
stop "$ra_pid"; stop "$rb_pid"
echo "bad store values warned: $(cat ra.log rb.log | grep -c 'not one of this replica')"
# Replica a numbers p0 as worker 0, replica b numbers p1 as worker 0: name the worker by its port.
{ jq -r '[.agent_context.session_id, (["W0","W1"][.request.worker.decode_worker_id]), .dyn.binding] | @tsv' a.jsonl
  jq -r '[.agent_context.session_id, (["W1","W0"][.request.worker.decode_worker_id]), .dyn.binding] | @tsv' b.jsonl
} >rows.tsv
echo "sessions on exactly one worker: $(cut -f1,2 rows.tsv | sort -u | cut -f1 | uniq -c | awk '$1 == 1' | wc -l) of 6"
echo "bindings: $(cut -f3 rows.tsv | sort | uniq -c | awk '{printf "%s=%s ", $2, $1}')"
expect_status 2 dyn-route serve --worker "http://127.0.0.1:$p0" --worker "HTTP://127.0.0.1:$p0/" --port 0 2>&1 |
  sed "s/:$p0/:P/g"
# --worker-kv-events pairs with the worker whatever the spelling.
start_router rk --worker "http://127.0.0.1:$p0" --router-mode kv --router-kv-events \
  --worker-kv-events "HTTP://127.0.0.1:$p0/v1/=tcp://127.0.0.1:1"
curl -sS "$rk_url/v1/workers" | jq -c '[.workers[] | {worker, kv_events_endpoint}]'
stop "$rk_pid"
