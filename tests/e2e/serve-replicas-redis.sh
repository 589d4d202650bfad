# Shows strict session affinity across three dyn-route serve replicas that share their bindings in
# Redis (--router-binding-store), over two dyn-mocker workers. 50 sessions of 4 turns each; turn t
# of session s goes to replica (s + t) mod 3, so every session visits every replica.
# 1. Without the store each replica binds on its own: dyn-bind check over the merged traces of all
#    three replicas finds violations.
# 2. With the store: zero violations; every replica and dyn-bind live show the same shared table;
#    subagents of one parent share one worker across replicas (the parent group binding); a store
#    value naming an unknown worker URL is ignored with one warning and overwritten.
# 3. Redis is killed (SIGKILL) mid-batch: zero failed requests; each replica reports the outage
#    once (stderr and /metrics) and falls back to its local table.
# 4. Redis restarts on the same port: each replica says so once and sessions created afterwards
#    are strict again (0 violations among them).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/redis.sh"
need_redis
TTL=300
TURNS=4

# turn URL SID T: one streamed chat turn (the conversation grows with T); appends the HTTP status.
turn() {
  local body
  body=$(jq -cn --arg s "$2" --argjson t "$3" '{model: "mock-model", stream: true, max_tokens: 4,
    messages: ([{role: "system", content: "You are a careful assistant."}] +
               [range(0; $t + 1) | {role: "user", content: ("session \($s) turn \(.) " + ("lorem ipsum " * 20))}])}')
  curl -sS -N -o /dev/null -w '%{http_code}\n' -m 30 -H "x-session-id: $2" -H 'content-type: application/json' \
    "$1/v1/chat/completions" -d "$body" >>"status-$4.txt" 2>>curl.err || echo "curl-failed" >>"status-$4.txt"
}
# session BATCH S: the TURNS turns of session BATCH-S in order, turn t on replica (S + t) mod 3.
session() {
  local t
  for t in $(seq 0 $((TURNS - 1))); do turn "${urls[$((($2 + t) % 3))]}" "$1-$2" "$t" "$1"; done
}
# batch NAME: 50 sessions, 10 at a time.
batch() {
  local s pids=()
  : >"status-$1.txt"
  for s in $(seq 1 50); do
    session "$1" "$s" &
    pids+=($!)
    if (( s % 10 == 0 )); then wait "${pids[@]}"; pids=(); fi
  done
}
failed() { echo "$1: $(wc -l <"status-$1.txt") requests, $(grep -vcx 200 "status-$1.txt") failed"; }
# replicas TAG [ARGS...]: three routers r0 r1 r2 over w0 w1, traces TAG-rI.jsonl.
replicas() {
  local i
  for i in 0 1 2; do
    start_router "r$i" --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs $TTL \
      --request-trace --request-trace-file-format jsonl --request-trace-file-path "$PWD/$1-r$i.jsonl" \
      --request-trace-file-flush-interval-ms 100 "${@:2}"
  done
  urls=("$r0_url" "$r1_url" "$r2_url")
}
stop_replicas() { stop "$r0_pid"; stop "$r1_pid"; stop "$r2_pid"; }
# rows PREFIX FILES...: the rows of sessions PREFIX-* in FILES -> rows.jsonl, once all 200 are
# there (running replicas flush their traces every 100 ms; up to 30 s on a loaded machine: a row
# that never comes still fails the check).
rows() {
  local i
  for i in $(seq 1 300); do
    cat "${@:2}" | jq -c --arg p "$1-" 'select(.agent_context.session_id | startswith($p))' >rows.jsonl
    (( $(wc -l <rows.jsonl) >= 50 * TURNS )) && break
    sleep 0.1
  done
  # A served turn is one with dyn.status ok; anything else would be left out of the check.
  jq -r 'select(.dyn.status != "ok") | "not ok: \(.agent_context.session_id) \(.dyn.status) \(.dyn.error // {} | tostring)"' rows.jsonl >&2
  # For a failure's stderr (the check counts only ok rows that name a worker): what was there.
  echo "rows $1: $(wc -l <rows.jsonl) after $i polls, $(jq -s 'map(select(.request.worker == null)) | length' rows.jsonl) without a worker, per file: $(for f in "${@:2}"; do printf '%s=%s ' "$(basename "$f")" "$(grep -c "\"$1-" "$f")"; done)" >&2
}
# check PREFIX FILES...: dyn-bind check over the rows of sessions PREFIX-* in FILES passes.
check() {
  rows "$@"
  expect_status 0 dyn-bind check --ttl-secs $TTL rows.jsonl >viol.jsonl 2>check.err
  echo "dyn-bind check: $(sed 's/^dyn-bind: //' check.err)"
}
metric() { curl -s "$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }

start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1

echo "== 1. three replicas, no store"
replicas local
batch a
stop_replicas
failed a
rows a local-r*.jsonl
expect_status 1 dyn-bind check --ttl-secs $TTL rows.jsonl >viol.jsonl 2>/dev/null
echo "dyn-bind check: violations > 0: $([[ $(wc -l <viol.jsonl) -gt 0 ]] && echo yes || echo no)"

echo "== 2. three replicas sharing bindings in Redis"
start_redis rd
store="redis://127.0.0.1:$rd_port"
replicas shared --router-binding-store "$store"
batch b
failed b
check b shared-r*.jsonl
echo "keys in redis: $(redis-cli -p "$rd_port" --scan --pattern 'dyn:bind:session:b-*' | wc -l)"
ttl=$(redis-cli -p "$rd_port" pttl dyn:bind:session:b-7)
echo "b-7 TTL within (0, $TTL s]: $( (( ttl > 0 && ttl <= TTL * 1000 )) && echo yes || echo no)"
for i in 0 1 2; do
  u="r${i}_url"
  curl -s "${!u}/v1/bindings" | jq -r --arg i "$i" '"replica \($i) /v1/bindings: \(.count) bindings, table \(.store.table), up \(.store.up)"'
done
dyn-bind live --url "$r2_url" --format jsonl | jq -s -r '"dyn-bind live on replica 2: \(length) rows, workers \(map(.worker_url) | unique | length)"'
# The same session id listed by two replicas names one worker.
diff <(curl -s "$r0_url/v1/bindings" | jq -c '[.bindings[] | [.key, .worker_url]]') \
     <(curl -s "$r1_url/v1/bindings" | jq -c '[.bindings[] | [.key, .worker_url]]') && echo "replicas 0 and 1 list the same bindings"
echo "-- a parent group: three subagents of one parent, each on another replica, share one worker"
for i in 0 1 2; do
  u="r${i}_url"
  curl -sS -o /dev/null -D "sub$i.hdr" -H "x-session-id: sub-$i" -H "x-parent-session-id: root-1" \
    -H 'content-type: application/json' "${!u}/v1/chat/completions" \
    -d '{"model": "mock-model", "max_tokens": 4, "messages": [{"role": "user", "content": "subagent task"}]}'
done
echo "workers used by the group: $(tr -d '\r' <<<"$(cat sub*.hdr)" | awk -F': ' 'tolower($1) == "x-dyn-worker" {print $2}' | sort -u | wc -l)"
echo "parent key in redis: $(redis-cli -p "$rd_port" exists dyn:bind:parent:root-1)"
curl -s "$r1_url/v1/bindings" | jq -c '.bindings[] | select(.kind == "parent_group") | [.parent_session_id, .state]'
echo "-- bad data: a binding to a worker no replica has"
redis-cli -p "$rd_port" set dyn:bind:session:bad-1 http://127.0.0.1:9/gone px 300000 >/dev/null
: >status-bad.txt
turn "$r0_url" bad-1 0 bad
echo "status: $(cat status-bad.txt)"
grep -c "names worker 'http://127.0.0.1:9/gone', which is not one of this replica's --worker URLs" r0.log
now=$(redis-cli -p "$rd_port" get dyn:bind:session:bad-1)
echo "bad-1 now bound to a configured worker: $([[ $now == "$w0_url" || $now == "$w1_url" ]] && echo yes || echo no)"
echo "bad values counted: $(metric "$r0_url" dyn_router_binding_store_bad_values_total)"

echo "== 3. Redis killed in the middle of a batch"
batch c &
bpid=$!
for _ in $(seq 1 400); do (( $(wc -l <status-c.txt 2>/dev/null || echo 0) >= 40 )) && break; sleep 0.05; done
kill -9 "$rd_pid"; wait "$rd_pid" 2>/dev/null
wait "$bpid"
failed c
for i in 0 1 2; do
  u="r${i}_url"
  echo "replica $i: outage warnings $(grep -c 'is unreachable' "r$i.log"), store up $(metric "${!u}" dyn_router_binding_store_up), outages $(metric "${!u}" dyn_router_binding_store_outages_total), table $(curl -s "${!u}/v1/bindings" | jq -r .store.table)"
done

echo "== 4. Redis restarted on the same port"
start_redis rd "$rd_port"
for i in 0 1 2; do
  u="r${i}_url"
  for _ in $(seq 1 200); do [[ $(metric "${!u}" dyn_router_binding_store_up) == 1 ]] && break; sleep 0.05; done
  echo "replica $i: store up $(metric "${!u}" dyn_router_binding_store_up), back-again notes $(grep -c 'is reachable again' "r$i.log")"
done
batch d
failed d
stop_replicas
check d shared-r*.jsonl
