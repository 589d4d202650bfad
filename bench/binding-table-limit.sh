#!/usr/bin/env bash
# The binding table at its real default limit (SPEC 2.1: 65,536 live bindings), through dyn-route
# serve over two dyn-mocker workers (hard affinity, TTL 3600 s): 65,536 new sessions from 64
# concurrent clients (bench/serve_load --unique-sessions) must all be answered 200; 200 more new
# sessions must all get 503 (table full) while an existing session keeps working. Prints the
# figures (sessions/s, the router's peak RSS) and exits 1 when any expectation fails. Then the
# table's own cost: the same 65,536-session load through a router without affinity (no table), and
# the difference of the two routers' peak RSS after the fill per binding (goal: the full table
# costs at most 32 MiB, 512 bytes a binding; GET /v1/bindings, which renders every binding as one
# JSON document, comes after and is reported beside it). The e2e test serve-binding-table-full checks the same behaviour at
# --router-max-bindings 3.
# Usage: bench/binding-table-limit.sh [BUILD_DIR]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d /tmp/dyn-bench-bindings.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null || true; wait $p 2>/dev/null || true; done; rm -rf "$work"' EXIT
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
# The table's cost: the peak so far (GET /v1/bindings below builds a document of every binding).
hwm_aff=$(awk '/VmHWM/{print $2}' /proc/$rpid/status)
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
echo "router peak RSS: $hwm_aff kB after the fill, $(awk '/VmHWM/{print $2}' /proc/$rpid/status) kB after GET /v1/bindings"
kill -TERM $rpid; wait $rpid 2>/dev/null || true
echo "== the same load without affinity (no binding table)"
rm -f "$work/r.port"
"$build/bin/dyn-route" serve --worker "http://127.0.0.1:$(cat "$work/m0.port")" \
  --worker "http://127.0.0.1:$(cat "$work/m1.port")" --port 0 --port-file "$work/r.port" 2>"$work/r2.err" &
rpid=$!
pids+=($rpid)
for _ in $(seq 100); do [[ -s "$work/r.port" ]] && break; sleep 0.05; done
"$build/bench/serve_load" "http://127.0.0.1:$(cat "$work/r.port")" 64 600 --unique-sessions 65536 --max-tokens 1 \
  > "$work/none.json"
[[ $(jq '.requests_ok' "$work/none.json") == 65536 ]] || { echo "FAIL: the no-affinity run lost requests"; fail=1; }
hwm_none=$(awk '/VmHWM/{print $2}' /proc/$rpid/status)
awk -v a="$hwm_aff" -v n="$hwm_none" 'BEGIN {
  d = (a - n) * 1024; printf "router peak RSS without affinity: %d kB\n", n
  printf "binding table: %.1f MiB for 65,536 bindings, %.0f bytes a binding (goal <= 32 MiB): %s\n",
    d / 1048576, d / 65536, (d <= 32 * 1048576) ? "PASS" : "MISS" }' | tee "$work/table"
grep -q PASS "$work/table" || fail=1
exit $fail
