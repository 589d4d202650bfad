#!/usr/bin/env bash
# Leak check of a short replay under valgrind (memcheck, --leak-check=full): a few multi-turn agent
# sessions of the bundled Mooncake conversation slice (data/quickstart) replayed live by dyn-replay through dyn-route serve
# (kv routing, hard affinity, request tracing, stopped with SIGTERM) to a dyn-mocker, both
# dyn-replay and dyn-route under valgrind, then dyn-replay --sim of the same workload under
# valgrind. Fails (exit 1) on any memcheck error or any definitely/indirectly lost byte; "still
# reachable" (process-lifetime singletons) is not a leak. Prints one summary line per program.
# Usage: scripts/valgrind-replay.sh [BUILD_DIR]
#   DYN_VALGRIND_SESSIONS  session ids of the slice to replay (default: 4 sessions, 27 turns)
#   DYN_VALGRIND_SPEEDUP   schedule speedup (default 2000: the sessions' minutes of tool time pass in
#                          about a second)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${DYN_BUILD:-$root/build}}"
sessions="${DYN_VALGRIND_SESSIONS:-s41 s20 s131 s95}"
speedup="${DYN_VALGRIND_SPEEDUP:-2000}"
command -v valgrind >/dev/null || { echo "valgrind-replay: valgrind is not installed" >&2; exit 77; }
if grep -qE '^DYN_SANITIZE:STRING=.+' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "valgrind-replay: $build is a sanitizer build (valgrind cannot run those)" >&2; exit 77
fi
work="$(mktemp -d /tmp/dyn-valgrind.XXXXXX)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  [[ "${DYN_VALGRIND_KEEP:-0}" == 1 ]] && echo "valgrind-replay: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 1200); do [[ -s "$1" ]] && return 0; sleep 0.05; done; echo "valgrind-replay: no $1" >&2; exit 4; }
vg=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30
    --suppressions="$root/scripts/sanitizers/valgrind.supp"
    --soname-synonyms=somalloc=NONE)  # the tools link jemalloc statically (CMake DYN_JEMALLOC)

jq -c --arg s "$sessions" '($s | split(" ")) as $keep | select(.session_id as $id | $keep | index($id))' \
  "$root/data/quickstart/conversation-slice.jsonl" >"$work/w.jsonl"
"$build/bin/dyn-mocker" --port 0 --port-file "$work/m.port" --speedup-ratio 100 2>"$work/m.err" &
pids+=($!)
wait_port "$work/m.port"
"${vg[@]}" --log-file="$work/vg-route.log" "$build/bin/dyn-route" serve --port 0 --port-file "$work/r.port" \
  --worker "http://127.0.0.1:$(cat "$work/m.port")" --router-mode kv --router-session-affinity-ttl-secs 300 \
  --request-trace --request-trace-file-path "$work/trace" --threads 8 2>"$work/r.err" &
rpid=$!
pids+=($rpid)
wait_port "$work/r.port"
"${vg[@]}" --log-file="$work/vg-replay.log" "$build/bin/dyn-replay" "$work/w.jsonl" \
  --url "http://127.0.0.1:$(cat "$work/r.port")" --speedup "$speedup" --no-progress --max-connections 4 \
  >"$work/live.jsonl" 2>"$work/replay.err"
replay_rc=$?
kill -TERM $rpid
wait $rpid
route_rc=$?
"${vg[@]}" --log-file="$work/vg-sim.log" "$build/bin/dyn-replay" "$work/w.jsonl" --sim --workers 2 \
  --router-mode kv --router-session-affinity-ttl-secs 300 >"$work/sim.jsonl" 2>"$work/sim.err"
sim_rc=$?

fail=0
# summary NAME RC LOG: "NAME: exit RC, N errors, definitely lost B bytes, indirectly lost B bytes".
summary() {
  local name=$1 rc=$2 log=$3 errs def ind
  errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$log" | tail -1 | tr -d ,)
  def=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -1 | tr -d ,)
  ind=$(sed -n 's/.*indirectly lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -1 | tr -d ,)
  # No leak summary at all means nothing was lost ("All heap blocks were freed").
  grep -q 'All heap blocks were freed' "$log" && def=0 ind=0
  echo "$name: exit $rc, ${errs:-?} errors, definitely lost ${def:-?} bytes, indirectly lost ${ind:-?} bytes"
  if [[ $rc != 0 || "${errs:-x}" != 0 || "${def:-x}" != 0 || "${ind:-x}" != 0 ]]; then
    fail=1
    echo "--- $log"; grep -A30 -E 'Invalid|uninitialised|definitely lost in|indirectly lost in' "$log" | head -80
  fi
}
echo "workload: $(wc -l <"$work/w.jsonl") rows in $(jq -r .session_id "$work/w.jsonl" | sort -u | wc -l) sessions"
echo "live replay rows: $(wc -l <"$work/live.jsonl") ($(jq -c 'select(.dyn.status == "ok")' "$work/live.jsonl" | wc -l) ok); sim rows: $(wc -l <"$work/sim.jsonl")"
echo "router trace rows: $("$build/bin/dyn-trace" cat "$work"/trace.*.jsonl.gz 2>/dev/null | wc -l)"
summary "dyn-route serve" $route_rc "$work/vg-route.log"
summary "dyn-replay (live)" $replay_rc "$work/vg-replay.log"
summary "dyn-replay --sim" $sim_rc "$work/vg-sim.log"
exit $fail
