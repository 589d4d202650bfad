#!/usr/bin/env bash
# Program-aware admission (SPEC 9) live: dyn-route serve in front of dyn-mocker workers, driven by
# dyn-replay's own live client, once without admission and once with --admission thunderagent, on
# an agent workload in the regime admission exists for (working set several times the cluster's KV
# capacity). Both runs use kv routing with hard session affinity and --kv-eviction session on
# fresh workers. Time runs SPEEDUP times faster than the workload says (dyn-replay --speedup, the
# mockers' --speedup-ratio, the admission scheduler's intervals divided alike); throughput and
# TTFT are reported on the workload's clock (wall times x SPEEDUP) next to the same two runs in
# --sim, so the columns compare. Goal (issue 18): >= 1.12x throughput, a lower p90 TTFT and fewer
# re-prefilled tokens live; exits 1 on a MISS.
# Usage: bench/admission-live.sh [BUILD_DIR]   env: SESSIONS=300 WORKERS=2 SPEEDUP=10 OUTPUT=100 SEED=1 KEEP=DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
[[ -x "$bin/dyn-replay" ]] || { echo "$0: no dyn-replay in $bin (build first: scripts/setup.sh, or give BUILD_DIR)" >&2; exit 2; }
sessions="${SESSIONS:-300}"
workers="${WORKERS:-2}"
speed="${SPEEDUP:-10}"
output="${OUTPUT:-100}"
seed="${SEED:-1}"
block=64
tmp="${KEEP:-$(mktemp -d /tmp/dyn-bench-adm-live.XXXXXX)}"
mkdir -p "$tmp"
source "$root/bench/servers.sh"
trap 'stop_all; [[ -n "${KEEP:-}" ]] || rm -rf "$tmp"' EXIT

"$bin/dyn-trace" generate --seed "$seed" --block-size "$block" --sessions "$sessions" --session-rate 5 \
  --turns-min 6 --turns-max 14 --system-prompt-tokens 2048 --task-tokens 1024 \
  --tool-output-tokens 2500 --output-tokens "$output" --tool-gap-ms 8000 \
  --subagent-probability 0.1 --subagent-turns-min 2 --subagent-turns-max 5 \
  --max-context-tokens 60000 --wait-for --summary -o "$tmp/agents.jsonl" 2>"$tmp/summary.txt"
ws=$(sed -n 's/.*working_set_tokens \([0-9]*\).*/\1/p' "$tmp/summary.txt")
echo "workload: $(cat "$tmp/summary.txt")"
echo "cluster: $workers dyn-mocker workers x 16384 KV blocks x $block tokens; working set / capacity =" \
  "$(echo "scale=2; $ws / ($workers * 16384 * $block)" | bc); speedup $speed"

route_flags=(--router-mode kv --router-session-affinity-ttl-secs 3600 --router-session-affinity-mode hard)
live() {  # live ADMISSION: one live run -> $tmp/live-ADMISSION.jsonl
  local a=$1 i urls=() port
  for i in $(seq 0 $((workers - 1))); do
    rm -f "$tmp/w$i.port"
    "$bin/dyn-mocker" --port 0 --port-file "$tmp/w$i.port" --worker-id "$i" --speedup-ratio "$speed" \
      --kv-eviction session 2>"$tmp/w$i-$a.log" &
    pids+=($!)
  done
  for i in $(seq 0 $((workers - 1))); do urls+=(--worker "http://127.0.0.1:$(wait_port "$tmp/w$i.port")"); done
  rm -f "$tmp/r.port"
  "$bin/dyn-route" serve --port 0 --port-file "$tmp/r.port" "${urls[@]}" "${route_flags[@]}" --admission "$a" \
    --scheduler-interval-seconds "$(echo "scale=4; 5 / $speed" | bc)" \
    --acting-decay-tau-seconds "$(echo "scale=4; 1 / $speed" | bc)" \
    --resume-timeout-seconds "$(echo "scale=4; 1800 / $speed" | bc)" 2>"$tmp/r-$a.log" &
  pids+=($!)
  port=$(wait_port "$tmp/r.port")
  for i in $(seq 1 200); do curl -sf -o /dev/null "http://127.0.0.1:$port/health" && break; sleep 0.05; done
  "$bin/dyn-replay" "$tmp/agents.jsonl" -u "http://127.0.0.1:$port" --streaming --ignore-eos \
    --block-size "$block" --speedup "$speed" -m mock-model -o "$tmp/live-$a.jsonl" 2>"$tmp/replay-$a.log" ||
    { tail -5 "$tmp/replay-$a.log" >&2; exit 1; }
  stop_all
}
sim() {  # sim ADMISSION: the same run in the simulator -> $tmp/sim-ADMISSION.jsonl
  "$bin/dyn-replay" --sim "$tmp/agents.jsonl" --block-size "$block" --kv-cache-block-size "$block" \
    --workers "$workers" --seed "$seed" "${route_flags[@]}" --kv-eviction session --admission "$1" \
    -o "$tmp/sim-$1.jsonl" 2>/dev/null
}
for a in none thunderagent; do
  live "$a"
  sim "$a"
done

# SPEC 7 figures per run on the workload's clock (live wall times x SPEEDUP), and the verdict.
PYTHONPATH="$root/bench" python3 - "$tmp" "$speed" <<'PY'
import sys
from request_figures import figures
tmp, speed = sys.argv[1], float(sys.argv[2])
f = {(m, a): figures(f"{tmp}/{m}-{a}.jsonl", speed if m == "live" else 1.0)
     for m in ("live", "sim") for a in ("none", "thunderagent")}
print(f"\n{'':6} {'admission':>12} | {'requests ok':>11} {'req/s':>7} {'p90 TTFT ms':>11} {'hit %':>6} {'re-prefilled':>12}")
for (m, a), v in f.items():
    print(f"{m:6} {a:>12} | {v['ok']:>5}/{v['requests']:<5} {v['req_per_s']:7.3f} {v['p90_ttft_ms']:11.0f} "
          f"{v['hit_pct']:6.2f} {v['reprefill_tokens']:12d}")
print()
ok = True
for m in ("live", "sim"):
    b, a = f[(m, "none")], f[(m, "thunderagent")]
    r = a["req_per_s"] / b["req_per_s"]
    good = (r >= 1.12 and a["p90_ttft_ms"] < b["p90_ttft_ms"] and a["reprefill_tokens"] < b["reprefill_tokens"]
            and a["ok"] == a["requests"] and b["ok"] == b["requests"])
    ok = ok and good
    print(f"{m}: throughput {r:.3f}x (goal >= 1.12), p90 TTFT {a['p90_ttft_ms'] / b['p90_ttft_ms']:.3f}x (goal < 1), "
          f"re-prefilled {a['reprefill_tokens'] / max(b['reprefill_tokens'], 1):.3f}x (goal < 1): "
          f"{'PASS' if good else 'MISS'}")
sys.exit(0 if ok else 1)
PY
