#!/usr/bin/env bash
# Benchmark (issue 48): what KV tiers below the GPU buy agent traffic, in dyn-replay --sim.
# Two workloads: the WEKA slice (real Claude Code sessions, data/weka-kv-cache-tester, converted
# with dyn-trace convert --from weka, replayed at 64-token blocks) and the bundled agent workload
# (data/quickstart). Sizes are fixed by the workload so the answer cannot be bought with memory:
# the working set W is the workload's distinct prompt blocks at the engine's 64-token blocks; the
# cluster of WORKERS engines holds W/4 on its GPUs (G1 = W/4/WORKERS blocks per worker), G2 = 2x
# G1 per worker, G3 = 4x G1 per worker, one shared G4 = the cluster's total G3.
# Runs: G1 only, G1+G2, G1+G2+G3, G1+G2+G4; each under kv routing fed by the engines' KV events
# (--router-kv-events, so the router sees each block's medium), with hard and soft session
# affinity (TTL 300 s; a worker with 2 requests in flight is busy, so that soft affinity may move a
# session off it: without a busy threshold soft keeps the bound worker as hard does), tier credit on (default weights 0.75/0.25; with G4 --shared-cache-type
# events, multiplier 0.5) and off (weights 0, no shared-pool credit = GPU-only credit).
# Per run: ok rows, hit rate by tier (cached tokens on each tier / input tokens), prefilled tokens
# (input - cached of the ok rows: re-prefills plus each block's first prefill, which no tier saves), onboarded bytes (tokens served from G2/G3/G4 x --kv-bytes-per-token),
# TTFT p50/p90 (ms) and throughput (output tokens per simulated second). The simulation is
# deterministic (seeded), so every figure is from one run; the timing of the machine plays no part.
# Goals: (1) G1+G2 re-prefills at most half the tokens G1 alone does (each workload, each affinity,
# tier credit on); (2) under soft affinity, tier credit gives a lower TTFT p90 than GPU-only credit
# (each workload, each configuration with a lower tier).
# Not here: the live half over dyn-mocker workers. dyn-mocker runs one engine per process, so a G4
# pool shared by the workers cannot be configured live today (each mocker's G4 is its own).
# Known (work in progress): at these sizes a WEKA worker's G1 (1,186 blocks = 75,904 tokens) is
# smaller than many WEKA prompts (p50 104k tokens), so only 70 of 95 rows end ok, and with the busy
# threshold WEKA G1+G2 under soft affinity never ends (rows all written, the simulation runs on),
# where the bundled workload's 16 runs take 1.5 s.
# Usage: bench/kv-tiers.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
out="$(mktemp -d /tmp/dyn-bench-kvtiers.XXXXXX)"
trap 'rm -rf "$out"' EXIT
exec 3>&1  # the verdict line goes to the terminal even from inside a run whose rows are redirected
workers=2
kv_bytes=131072  # 128 KiB a token: 8 MiB a 64-token block, as tests/e2e/sim-kv-tiers.sh

# Workloads: NAME FILE TRACE_BLOCK (tokens per hash id in FILE).
"$bin/dyn-trace" convert --from weka "$root"/data/weka-kv-cache-tester/trace_*.json.gz -o "$out/weka.jsonl" 2>/dev/null
workloads=("weka $out/weka.jsonl 64" "agent $root/data/quickstart/conversation-slice.jsonl 512")

# run NAME FILE TRACE_BLOCK FLAGS...: one simulated run; prints one JSON line of figures.
run() {
  local name=$1 file=$2 tb=$3
  shift 3
  # A run of this size takes well under a second: a limit turns a simulation that never ends (seen:
  # WEKA, G1+G2, soft affinity with a busy threshold: every row written, the event loop still going)
  # into a failed bench instead of a stuck one.
  timeout 120 "$bin/dyn-replay" "$file" --sim --block-size "$tb" --kv-cache-block-size 64 --workers "$workers" \
    --router-mode kv --router-kv-events --router-session-affinity-ttl-secs 300 --active-requests-threshold 2 "$@" \
    --summary "$out/s.json" -o "$out/rows.jsonl" 2>"$out/err" || {
    local rc=$?
    cat "$out/err" >&2
    echo "MISS run-failed: $name (exit $rc$( ((rc == 124)) && echo ': still simulating after 120 s'))" >&3
    exit 1
  }
  jq -s -c --arg name "$name" --argjson b "$kv_bytes" --slurpfile s "$out/s.json" '
    def pct(q): (length as $n | sort | .[((q * $n) | ceil) - 1]);
    [.[] | select(.dyn.status == "ok")] as $ok
    | ($ok | map(.request.input_tokens) | add) as $in
    | def tier(t): ($ok | map(.dyn.cached_tokens_by_tier[t] // 0) | add);
    ($ok | map(.request.cached_tokens) | add) as $cached
    | {run: $name, ok: ($ok | length), rows: length, input: $in,
       hit: {g1: (($cached - tier("g2") - tier("g3") - tier("g4")) / $in),
             g2: (tier("g2") / $in), g3: (tier("g3") / $in), g4: (tier("g4") / $in)},
       reprefilled: ($in - $cached), onboarded_bytes: ((tier("g2") + tier("g3") + tier("g4")) * $b),
       ttft_p50: ($ok | map(.request.ttft_ms) | pct(0.5)), ttft_p90: ($ok | map(.request.ttft_ms) | pct(0.9)),
       tput: (($ok | map(.request.output_tokens) | add) / $s[0].summary.simulated_s)}' "$out/rows.jsonl"
}

: >"$out/all.jsonl"
for w in "${workloads[@]}"; do
  read -r wname file tb <<<"$w"
  # Distinct prompt blocks at the engine's 64-token blocks.
  ws=$(jq -s --argjson k $((tb / 64)) '[.[].hash_ids[]] | unique | length * $k' "$file")
  g1=$((ws / 4 / workers))
  g2=$((2 * g1)) g3=$((4 * g1)) g4=$((4 * g1 * workers))
  printf '== %s: %s requests, working set %d blocks; %d workers x G1 %d, G2 %d, G3 %d; shared G4 %d\n' \
    "$wname" "$(wc -l <"$file")" "$ws" "$workers" "$g1" "$g2" "$g3" "$g4"
  printf '%-30s %4s %6s %6s %6s %6s %12s %14s %9s %9s %8s\n' run ok g1% g2% g3% g4% reprefilled onboarded_B \
    ttft_p50 ttft_p90 tok/s
  tiers=("G1||--num-gpu-blocks-override $g1"
    "G1+G2||--num-gpu-blocks-override $g1 --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2"
    "G1+G2+G3||--num-gpu-blocks-override $g1 --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2 --num-g3-blocks $g3"
    "G1+G2+G4|--shared-cache-type events|--num-gpu-blocks-override $g1 --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2 --num-g4-blocks $g4")
  for t in "${tiers[@]}"; do
    IFS='|' read -r tname shared tflags <<<"$t"
    for aff in hard soft; do
      for credit in on off; do
        if [[ $credit == on ]]; then cflags=($shared); else
          cflags=(--host-cache-hit-weight 0 --disk-cache-hit-weight 0)
        fi
        # shellcheck disable=SC2086
        run "$wname $tname $aff $credit" "$file" "$tb" $tflags --router-session-affinity-mode "$aff" \
          "${cflags[@]}" >>"$out/all.jsonl"
        tail -1 "$out/all.jsonl" | jq -r '"\(.run | .[0:30] | . + " " * (30 - length)) " + (.ok | tostring | " " * (4 - length) + .) + " " +
          ([.hit.g1, .hit.g2, .hit.g3, .hit.g4] | map(. * 1000 | round / 10 | tostring | " " * (6 - length) + .) | join(" ")) +
          ((.reprefilled | tostring) | " " * (13 - length) + .) + ((.onboarded_bytes | tostring) | " " * (15 - length) + .) +
          ([.ttft_p50, .ttft_p90] | map(. * 10 | round / 10 | tostring | " " * (10 - length) + .) | join("")) +
          ((.tput | round | tostring) | " " * (9 - length) + .)'
      done
    done
  done
done

# Goals, from the table's figures.
jq -s -r '
  . as $all | def get(r): ($all | map(select(.run == r)) | .[0]);
  $all | [ $all[].run | split(" ")[0] ] | unique as $wls
  | ([ $wls[] as $w | ("hard", "soft") as $a
       | {w: $w, a: $a, g1: get("\($w) G1 \($a) on").reprefilled, g2: get("\($w) G1+G2 \($a) on").reprefilled}
       | . + {ok: (.g2 <= .g1 / 2)}
       | "goal 1 \(.w) \(.a): G1+G2 re-prefills \(.g2) / G1 \(.g1) = \((.g2 / .g1 * 1000 | round) / 10) % (<= 50 %): \(if .ok then "ok" else "miss" end)" ]) as $l1
  | ([ $wls[] as $w | ("G1+G2", "G1+G2+G3", "G1+G2+G4") as $t
       | {w: $w, t: $t, on: get("\($w) \($t) soft on").ttft_p90, off: get("\($w) \($t) soft off").ttft_p90}
       | "goal 2 \(.w) \(.t) soft: TTFT p90 tier credit \(.on * 10 | round / 10) ms vs GPU-only \(.off * 10 | round / 10) ms: \(if .on < .off then "ok" else "miss" end)" ]) as $l2
  | ($l1 + $l2)[]' "$out/all.jsonl" | tee "$out/goals"
m1=$(grep -c '^goal 1 .*miss$' "$out/goals" || true)
m2=$(grep -c '^goal 2 .*miss$' "$out/goals" || true)
if ((m1 == 0 && m2 == 0)); then echo PASS; exit 0; fi
v="MISS"
((m1 > 0)) && v="$v goal1-g2-halves-reprefill"
((m2 > 0)) && v="$v goal2-tier-credit-ttft-p90"
echo "$v"
exit 1
