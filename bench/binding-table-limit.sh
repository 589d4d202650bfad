#!/usr/bin/env bash
# The binding table at its real default limit (SPEC 2.1: 65,536 live bindings), through dyn-route
# serve over two dyn-mocker workers (hard affinity, TTL 3600 s): 65,536 new sessions from 64
# concurrent clients (bench/serve_load --unique-sessions) must all be answered 200; 200 more new
# sessions must all get 503 (table full) while an existing session keeps working. Prints the
# figures (sessions/s, the router's peak RSS) and exits 1 when any expectation fails. The e2e test
# serve-binding-table-full checks the same behaviour at --router-max-bindings 3.
# Usage: bench/binding-table-limit.sh [BUILD_DIR]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d /tmp/dyn-bench-bindings.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$work"' EXIT
for w in 0 1; do
  "$build/bin/dyn-mocker" --port 0 --port-file "$work/m$w.port" --worker-id $w --speedup-ratio 1000 2>"$work/m$w.err" &
  pids+=($!)
done
for w in 0 1; do for _ in $(seq 100); do [[ -s "$work/m$w.port" ]] && break; sleep 0.05; done; done
"$build/bin/dyn-route" serve --worker "http://127.0.0.1:$(cat "$work/m0.port")" \
  --worker "http://127.0.0.1:$(cat "$work/m1.port")" --port 0 --port-file "$work/r.port" \
  --router-session-affinity-ttl-secs 3600 2>"$work/r.err" &
rpid=$!
pids+=($rpid)
for _ in $(seq 100); do [[ -s "$work/r.port" ]] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/r.port")"
fail=0
echo "== 65,536 new sessions"
"$build/bench/serve_load" "$url" 64 600 --unique-sessions 65536 --max-tokens 1 | tee "$work/fill.json"
[[ $(jq '.requests_ok' "$work/fill.json") == 65536 ]] || { echo "FAIL: not every session was admitted"; fail=1; }
live=$(curl -sS "$url/v1/bindings" | jq '.count')
echo "live bindings: $live"
[[ $live == 65536 ]] || fail=1
echo "== 200 more new sessions (table full)"
# New session ids (extra-N) through curl: serve_load would reuse the ids uniq-0.. already bound.
rej=0
for i in $(seq 1 200); do
  code=$(curl -sS -o "$work/full.json" -w '%{http_code}' -H "x-session-id: extra-$i" -H 'content-type: application/json' \
    "$url/v1/chat/completions" -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}')
  [[ $code == 503 ]] && rej=$((rej + 1))
done
echo "refused with 503: $rej/200 ($(jq -r '.error.message' "$work/full.json"))"
[[ $rej == 200 ]] || fail=1
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "x-session-id: uniq-12345" -H 'content-type: application/json' \
  "$url/v1/chat/completions" -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi again"}]}')
echo "existing session uniq-12345: $code"
[[ $code == 200 ]] || fail=1
echo "router peak RSS: $(awk '/VmHWM/{print $2, $3}' /proc/$rpid/status)"
exit $fail
