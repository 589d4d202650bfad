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

# Metrics from the request_end rows (SPEC 7 definitions; percentiles by linear interpolation).
metrics() {
  jq -s '
    def pct(q): sort as $s | ($s | length) as $n
      | if $n == 0 then null else (($n - 1) * q / 100) as $p | ($p | floor) as $i
        | if $i + 1 < $n then $s[$i] + ($s[$i + 1] - $s[$i]) * ($p - $i) else $s[$i] end end;
    [.[] | select(.event_type == "request_end" and .dyn.status == "ok")] as $r
    | ($r | map(.request.request_received_ms) | min) as $t0
    | ($r | map(.event_time_unix_ms) | max) as $t1
    | (($t1 - $t0) / 1000) as $dur
    # re-prefilled: leading blocks already seen earlier in the run (infinite-cache prefix) minus
    # what the worker actually had cached
    | ($r | sort_by(.request.request_received_ms, .request.request_id)
       | reduce .[] as $x ({seen: {}, re: 0};
           ($x.dyn.block_size) as $bs
           | ([$x.dyn.hash_ids[] | tostring]) as $ids
           | (first(range(0; $ids | length) as $k | select(.seen[$ids[$k]] | not) | $k) // ($ids | length)) as $lead
           | ([$lead * $bs, $x.request.input_tokens] | min) as $known
           | .re += ([0, $known - $x.request.cached_tokens] | max)
           | reduce $ids[] as $h (.; .seen[$h] = true))
       | .re) as $re
    | {
        requests: ($r | length),
        sim_s: $dur,
        req_per_s: (($r | length) / $dur),
        out_tok_per_s: (($r | map(.request.output_tokens) | add) / $dur),
        p90_ttft_ms: ($r | map(.request.ttft_ms) | pct(90)),
        p50_ttft_ms: ($r | map(.request.ttft_ms) | pct(50)),
        hit_pct: (100 * ($r | map(.request.cached_tokens) | add) / ($r | map(.request.input_tokens) | add)),
        reprefill_tokens: $re,
        paused_requests: ($r | map(select((.dyn.pause_ms // 0) > 0)) | length),
        pause_s_total: (($r | map(.dyn.pause_ms // 0) | add) / 1000)
      }' "$1"
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
printf 'throughput ratio (requests):      %.3fx (goal >= 1.12)\n' "$(echo "$a_rps / $b_rps" | bc -l)"
printf 'throughput ratio (output tokens): %.3fx (goal >= 1.12)\n' "$(echo "$a_tps / $b_tps" | bc -l)"
printf 'p90 TTFT ratio:                   %.3fx (goal < 1)\n' "$(echo "$a_p90 / $b_p90" | bc -l)"
sed 's/^/baseline:  /' "$tmp/baseline.note"
sed 's/^/admission: /' "$tmp/admission.note"
