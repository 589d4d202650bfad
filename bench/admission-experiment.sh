#!/usr/bin/env bash
# Program-aware admission (SPEC 9) in the simulated cluster, measured against a baseline in the
# same run: one agent workload from `dyn-trace generate` whose aggregate working set is 2-4x the
# cluster's KV capacity, routed kv + hard session affinity, simulated once without admission and
# once with --admission thunderagent (same workload, same cluster, same seed). Prints, for both:
# completed requests and output tokens per simulated second, p90 TTFT, prompt-cache hit rate,
# re-prefilled tokens (prefix tokens an infinite cache would have held but that were computed
# again) and admission pause time; then the ratios. Goal: >= 1.12x throughput and a lower p90 TTFT.
# TTFT is the client's view: it includes time a request waited in admission.
# Usage: bench/admission-experiment.sh [BUILD_DIR]   (env: WORKERS, KV_BLOCKS, SESSIONS, SEED, KEEP=DIR)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
workers="${WORKERS:-4}"
kv_blocks="${KV_BLOCKS:-2048}"   # per worker
block=64
sessions="${SESSIONS:-48}"
seed="${SEED:-1}"
tmp="${KEEP:-$(mktemp -d)}"
mkdir -p "$tmp"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$tmp"' EXIT

# The workload: agent sessions that all start within ~10 s, 6-14 turns each, contexts growing by a
# tool result (~2,500 tokens) and the output (~300) per turn, tool gaps of ~8 s, some subagents.
"$bin/dyn-trace" generate --seed "$seed" --block-size "$block" --sessions "$sessions" --session-rate 5 \
  --turns-min 6 --turns-max 14 --system-prompt-tokens 2048 --task-tokens 1024 \
  --tool-output-tokens 2500 --output-tokens 300 --tool-gap-ms 8000 \
  --subagent-probability 0.1 --subagent-turns-min 2 --subagent-turns-max 5 \
  --max-context-tokens 60000 --wait-for --summary -o "$tmp/agents.jsonl" 2>"$tmp/summary.txt"
ws=$(sed -n 's/.*working_set_tokens \([0-9]*\).*/\1/p' "$tmp/summary.txt")
cap=$((workers * kv_blocks * block))
printf 'workload: %s\n' "$(cat "$tmp/summary.txt")"
printf 'cluster: %d workers x %d KV blocks x %d tokens = %d tokens; aggregate working set / capacity = %.2f\n' \
  "$workers" "$kv_blocks" "$block" "$cap" "$(echo "$ws / $cap" | bc -l)"

sim() {  # sim NAME [extra flags]: one simulated run -> $tmp/NAME.jsonl (+ the simulator's note)
  local name="$1"; shift
  "$bin/dyn-replay" --sim "$tmp/agents.jsonl" --block-size "$block" --workers "$workers" \
    --kv-cache-block-size "$block" --num-gpu-blocks-override "$kv_blocks" --seed "$seed" \
    --router-mode kv --router-session-affinity-ttl-secs 3600 --router-session-affinity-mode hard \
    "$@" -o "$tmp/$name.jsonl" 2>"$tmp/$name.note"
}
sim baseline --admission none
sim admission --admission thunderagent

# Metrics from the request_end rows (SPEC 7 definitions; percentiles by linear interpolation),
# computed in one pass in Python: a jq reduction over a growing "seen" object took minutes.
metrics() {
  python3 - "$1" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in rows if x.get("event_type") == "request_end" and x.get("dyn", {}).get("status") == "ok"]
def pct(vals, q):
    s = sorted(vals); n = len(s)
    if n == 0: return None
    p = (n - 1) * q / 100; i = math.floor(p)
    return s[i] + (s[i + 1] - s[i]) * (p - i) if i + 1 < n else s[i]
t0 = min(x["request"]["request_received_ms"] for x in r)
t1 = max(x["event_time_unix_ms"] for x in r)
dur = (t1 - t0) / 1000
# re-prefilled: leading blocks already seen earlier in the run (infinite-cache prefix) minus what
# the worker actually had cached
seen, re = set(), 0
for x in sorted(r, key=lambda x: (x["request"]["request_received_ms"], x["request"]["request_id"])):
    bs = x["dyn"].get("block_size", 0); ids = [str(h) for h in x["dyn"].get("hash_ids", [])]
    lead = next((k for k, h in enumerate(ids) if h not in seen), len(ids))
    known = min(lead * bs, x["request"]["input_tokens"])
    re += max(0, known - x["request"]["cached_tokens"])
    seen.update(ids)
pause = [x["dyn"].get("pause_ms", 0) or 0 for x in r]
print(json.dumps({
    "requests": len(r), "sim_s": dur, "req_per_s": len(r) / dur,
    "out_tok_per_s": sum(x["request"]["output_tokens"] for x in r) / dur,
    "p90_ttft_ms": pct([x["request"]["ttft_ms"] for x in r], 90),
    "p50_ttft_ms": pct([x["request"]["ttft_ms"] for x in r], 50),
    "hit_pct": 100 * sum(x["request"]["cached_tokens"] for x in r) / sum(x["request"]["input_tokens"] for x in r),
    "reprefill_tokens": re, "paused_requests": sum(1 for p in pause if p > 0), "pause_s_total": sum(pause) / 1000}))
PY
}
metrics "$tmp/baseline.jsonl" > "$tmp/baseline.metrics"
metrics "$tmp/admission.jsonl" > "$tmp/admission.metrics"
echo
printf '%-28s %14s %14s\n' "" "kv+hard" "+thunderagent"
row() {  # row LABEL KEY FORMAT
  printf "%-28s %14$3 %14$3\n" "$1" "$(jq -r ".$2" "$tmp/baseline.metrics")" "$(jq -r ".$2" "$tmp/admission.metrics")"
}
row "completed requests" requests d
row "simulated seconds" sim_s .1f
row "requests / sim s" req_per_s .3f
row "output tokens / sim s" out_tok_per_s .1f
row "p50 TTFT ms" p50_ttft_ms .0f
row "p90 TTFT ms" p90_ttft_ms .0f
row "prompt-cache hit %" hit_pct .2f
row "re-prefilled tokens" reprefill_tokens d
row "requests paused" paused_requests d
row "pause time total s" pause_s_total .1f
b_rps=$(jq .req_per_s "$tmp/baseline.metrics"); a_rps=$(jq .req_per_s "$tmp/admission.metrics")
b_tps=$(jq .out_tok_per_s "$tmp/baseline.metrics"); a_tps=$(jq .out_tok_per_s "$tmp/admission.metrics")
b_p90=$(jq .p90_ttft_ms "$tmp/baseline.metrics"); a_p90=$(jq .p90_ttft_ms "$tmp/admission.metrics")
echo
mark() { awk -v v="$1" -v g="$2" -v op="$3" 'BEGIN { ok = (op == "ge") ? v >= g : v < g; print ok ? "PASS" : "MISS" }'; }
r=$(echo "$a_rps / $b_rps" | bc -l); printf 'throughput ratio (requests):      %.3fx (goal >= 1.12): %s\n' "$r" "$(mark "$r" 1.12 ge)"
r=$(echo "$a_tps / $b_tps" | bc -l); printf 'throughput ratio (output tokens): %.3fx (goal >= 1.12): %s\n' "$r" "$(mark "$r" 1.12 ge)"
r=$(echo "$a_p90 / $b_p90" | bc -l); printf 'p90 TTFT ratio:                   %.3fx (goal < 1): %s\n' "$r" "$(mark "$r" 1 lt)"
sed 's/^/baseline:  /' "$tmp/baseline.note"
sed 's/^/admission: /' "$tmp/admission.note"
