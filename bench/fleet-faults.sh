#!/usr/bin/env bash
# Benchmark: a fleet that changes and fails under load (issue 53). SESSIONS concurrent agent
# sessions (TURNS streamed chat turns each, a client that never retries: bench/fleet_client.py)
# over 4 dyn-mocker workers through dyn-route serve with hard affinity. While they run: a fifth
# worker is added (POST /v1/workers), one is drained (POST /v1/workers/drain), one is killed
# (SIGKILL, mid-stream) and one stalls (SIGSTOP: past --upstream-read-timeout-secs). Three runs in
# the same invocation:
#   migrate:  --migration-limit 3 (one router);
#   cut:      the anchor, --migration-limit 0 (the streams broken without migration, for contrast);
#   replicas: --migration-limit 3, two routers sharing bindings in Redis, each session's turns
#             alternating between them (the membership changes are made on both).
# Checks per run: client-visible errors (status, a stream without [DONE]/finish/usage, an error
# event), streamed text against what one worker streams uninterrupted (a duplicated or lost token
# changes it), affinity violations (a session bound anew after its first turn, or moved without a
# reason) and the forced moves with their reasons (dyn.rebind_reason, dyn.migrations).
# Goal: migrate and replicas have zero client errors, zero text mismatches and zero violations;
# prints PASS, else MISS (exit 1). Timings are not the point: this runs on any machine.
# Usage: bench/fleet-faults.sh [BUILD_DIR] [SESSIONS] [TURNS]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
sessions="${2:-200}"
turns="${3:-4}"
tokens=64
work="$(mktemp -d /tmp/dyn-bench-fleet.XXXXXX)"
source "$root/bench/servers.sh"
trap 'for p in "${pids[@]}"; do kill -CONT $p 2>/dev/null; done; stop_all; rm -rf "$work"' EXIT
cd "$work"
mocker() {  # mocker NAME: a slow dyn-mocker (streams last seconds); sets NAME_url NAME_pid
  rm -f "$1.port"
  "$build/bin/dyn-mocker" --port 0 --port-file "$1.port" --speedup-ratio 0.25 --threads 512 --max-num-seqs 512 \
    2>"$1.err" &
  pids+=($!)
  printf -v "$1_pid" '%s' "$!"
  printf -v "$1_url" 'http://127.0.0.1:%s' "$(wait_port "$1.port")"
}
router() {  # router NAME ARGS...: sets NAME_url
  rm -f "$1.port"
  "$build/bin/dyn-route" serve --port 0 --port-file "$1.port" --threads 512 --router-session-affinity-ttl-secs 300 \
    --router-session-affinity-mode hard --upstream-read-timeout-secs 3 --retry-initial-backoff-ms 20 \
    --request-trace --request-trace-file-format jsonl --request-trace-file-path "$work/$1.trace" "${@:2}" \
    2>"$1.err" &
  pids+=($!)
  printf -v "$1_url" 'http://127.0.0.1:%s' "$(wait_port "$1.port")"
}
admin() {  # admin VERB PATH URL ROUTER_URL...
  local verb=$1 path=$2 url=$3 r
  shift 3
  for r in "$@"; do curl -sS -o /dev/null -X "$verb" "$r$path" -H 'content-type: application/json' -d "{\"url\":\"$url\"}"; done
}
mocker ref
curl -sS -N "$ref_url/v1/chat/completions" -H 'content-type: application/json' \
  -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":$tokens,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}" |
  grep '^data: {' | sed 's/^data: //' | jq -j '.choices[0].delta.content // empty' >expect.txt
# run NAME ROUTERS MIGRATION_LIMIT [STORE_ARGS...]: one run; its verdict line goes to NAME.result.
run() {
  local name=$1 nrouters=$2 limit=$3 i urls=() rurls=()
  shift 3
  for i in 0 1 2 3 4; do mocker "w$i"; done
  for i in $(seq 1 "$nrouters"); do
    router "$name$i" --worker "$w0_url" --worker "$w1_url" --worker "$w2_url" --worker "$w3_url" \
      --migration-limit "$limit" "$@"
    local v="$name${i}_url"
    rurls+=("${!v}")
  done
  python3 "$root/bench/fleet_client.py" --urls "$(IFS=,; echo "${rurls[*]}")" --sessions "$sessions" \
    --turns "$turns" --max-tokens "$tokens" --expect expect.txt --prefix "$name-" --out "$name.rows" &
  local client=$! t0=$SECONDS
  sleep 1; admin POST /v1/workers "$w4_url" "${rurls[@]}"
  sleep 1; admin POST /v1/workers/drain "$w1_url" "${rurls[@]}"
  sleep 1; kill -9 "$w2_pid"
  sleep 1; kill -STOP "$w3_pid"
  wait "$client"
  echo "$name: the client ran $((SECONDS - t0)) s" >&2
  kill -CONT "$w3_pid"
  stop_all
  local errors mismatches violations moves
  errors=$(jq -s '[.[] | select(.complete | not)] | length' "$name.rows")
  mismatches=$(jq -s '[.[] | select(.complete and (.text_ok | not))] | length' "$name.rows")
  cat "$name"*.trace >"$name.all"
  violations=$(jq -s '[group_by(.agent_context.session_id)[] |
      ([.[] | select(.dyn.binding == "new" or .dyn.binding == "expired")] | length) - 1 +
      ([.[] | select(.dyn.binding == "rebound" and .dyn.rebind_reason == null)] | length)] | add' "$name.all")
  moves=$(jq -s -r '([.[] | select(.dyn.binding == "rebound") | .dyn.rebind_reason] | group_by(.) |
      map("\(.[0])=\(length)") | join(" ")) + " migrations=\([.[] | .dyn.migrations // 0] | add)"' "$name.all")
  echo "$name: turns $(wc -l <"$name.rows"), client errors $errors, text mismatches $mismatches, affinity violations $violations, forced moves: $moves"
  echo "$name $errors $mismatches $violations" >"$name.result"
}
run migrate 1 3
run cut 1 0
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --dir "$work" >redis.log 2>&1 &
redis_pid=$!
for _ in $(seq 200); do [[ $(redis-cli -p "$rport" ping 2>/dev/null) == PONG ]] && break; sleep 0.05; done
run replicas 2 3 --router-binding-store "redis://127.0.0.1:$rport"
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
verdict=PASS
for n in migrate replicas; do
  read -r _ e m v <"$n.result"
  [[ $e == 0 && $m == 0 && $v == 0 ]] || verdict="MISS zero errors, mismatches and violations ($n)"
done
echo "$verdict"
[[ $verdict == PASS ]]
