#!/usr/bin/env bash
# Benchmark (issue 48): what KV tiers below the GPU buy agent traffic, in dyn-replay --sim.
# Two workloads: the WEKA slice (real Claude Code sessions, data/weka-kv-cache-tester, converted
# with dyn-trace convert --from weka, replayed at 64-token blocks) and the bundled agent workload
# (data/quickstart). Sizes are fixed by the workload so the answer cannot be bought with memory:
# the working set W is the workload's distinct prompt blocks at the engine's 64-token blocks, and
# the cluster holds W/4 on its GPUs. A worker's G1 must hold the workload's largest request
# (prompt + output, B blocks: the engine refuses a request that can never fit, as vLLM does), and
# one copy of either workload cannot give two such workers (W/4 holds 1.5 of WEKA's 1,581-block
# request, 1.3 of the agent workload's 1,913). So each workload is replayed as N copies (distinct
# sessions, request ids and hash ids, the same schedule: N times the sessions, never a weaker
# load), N the fewest giving at least 4 workers: WORKERS = floor(N x W1 / 4 / B) (WEKA: N = 3, 4
# workers; agent: N = 4, 5 workers), G1 = floor(N x W1 / 4 / WORKERS) per worker, G2 = 2x G1 per
# worker, G3 = 4x G1 per worker, one shared G4 = the cluster's total G3.
# Runs: G1 only, G1+G2, G1+G2+G3, G1+G2+G4; each under kv routing fed by the engines' KV events
# (--router-kv-events, so the router sees each block's medium), with hard and soft session
# affinity (TTL 300 s; a worker with 2 requests in flight is busy, so that soft affinity may move a
# session off it: without a busy threshold soft keeps the bound worker as hard does; a request for
# a busy worker waits in the router queue, with a limit no run reaches, so every row ends ok and
# the bench checks it), tier credit on (default weights 0.75/0.25; with G4 --shared-cache-type
# events, multiplier 0.5) and off (weights 0, no shared-pool credit = GPU-only credit).
# Per run: ok rows, hit rate by tier (cached tokens on each tier / input tokens), prefilled tokens
# (input - cached), re-prefilled tokens (prefilled less each block's first prefill, which no tier
# can save: input x (1 - the run's theoretical hit %, an infinite prefix cache, SPEC 6)), onboarded
# bytes (tokens served from G2/G3/G4 x --kv-bytes-per-token), TTFT p50/p90 (ms) and throughput
# (output tokens per simulated second). The simulation is deterministic (seeded), so every figure
# is from one run; the timing of the machine plays no part.
# Goals: (1) G1+G2 re-prefills at most half the tokens G1 alone does (each workload, each affinity,
# tier credit on); (2) under soft affinity, tier credit gives a lower TTFT p90 than GPU-only credit
# (each workload, each configuration with a lower tier).
# Not here: the live half over dyn-mocker workers (a separate script).
# Known (goal 2 misses on the agent workload only): its p90 is set by the opening burst. The 61
# slowest agent TTFTs (26-38 s; p90 is the 61st) are requests arriving 33-78 s into the 3,464 s
# schedule, 51-53 of them first turns of the 128 sessions (4 copies) opening together, waiting in
# the router queue (every worker at 2 requests) and in the engines behind 120,633-token first
# turns. Tier credit first changes an agent TTFT at 77.5 s (G1+G2 soft: 290 of 608 differ, mean
# 5,358 vs 5,350 ms), and the 61st slowest then moves from 28,536 to 29,123.6 ms: a burst of
# first turns, with nothing of theirs cached on any tier, is beyond what credit can buy.
# What made goal 2 hold on WEKA (SPEC 2.3, 3.2): under soft affinity a busy bound worker is left
# only for a cheaper one in the tier-credited cost (before, "busy => move" sent sessions where no
# tier held their blocks: WEKA G1+G2+G3 soft credit changed 2 of 285 TTFTs, p90 15,456.7 ms both);
# and the cost counts the prefill still ahead on each worker, as Dynamo's selector does.
# Onboarding a 64-token block (8 MiB) alone on the links takes 0.6 ms from G2, 1.8 ms from G3 and
# 2.7 ms from G4, against 1.3 ms to prefill it in a full 8,192-token chunk (SPEC 8 polynomial): a
# host hit is worth about half a prefill, a disk or shared-pool hit costs more than recomputing.
# KV_TIERS_OUT=DIR keeps the runs' files (workloads, the last run's rows, all.jsonl) there.
# Usage: bench/kv-tiers.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
if [[ -n ${KV_TIERS_OUT:-} ]]; then
  out=$KV_TIERS_OUT
  mkdir -p "$out"
else
  out="$(mktemp -d /tmp/dyn-bench-kvtiers.XXXXXX)"
  trap 'rm -rf "$out"' EXIT
fi
exec 3>&1  # the verdict line goes to the terminal even from inside a run whose rows are redirected
kv_bytes=131072  # 128 KiB a token: 8 MiB a 64-token block, as tests/e2e/sim-kv-tiers.sh

source "$root/bench/workload_copies.sh"  # copies FILE N, workload_size FILE TB

# Workloads: NAME FILE TRACE_BLOCK (tokens per hash id in FILE).
"$bin/dyn-trace" convert --from weka "$root"/data/weka-kv-cache-tester/trace_*.json.gz -o "$out/weka1.jsonl" 2>/dev/null
workloads=("weka $out/weka1.jsonl 64" "agent $root/data/quickstart/conversation-slice.jsonl 512")

# run NAME FILE TRACE_BLOCK FLAGS...: one simulated run; prints one JSON line of figures.
run() {
  local name=$1 file=$2 tb=$3
  shift 3
  # A run of this size takes under a second: a limit turns a simulation that never ends (seen before
  # the engine fixes of issue 48: an onboard blocked by requests holding onboarded blocks, a G4
  # completion lost in a link's slack) into a failed bench instead of a stuck one.
  timeout 120 "$bin/dyn-replay" "$file" --sim --block-size "$tb" --kv-cache-block-size 64 --workers "$workers" \
    --router-mode kv --router-kv-events --router-session-affinity-ttl-secs 300 --active-requests-threshold 2 --queue-timeout-secs 86400 "$@" \
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
       prefilled: ($in - $cached),
       reprefilled: (($in - $cached) - ($in * (1 - $s[0].summary.theoretical_hit_pct / 100) | round)),
       onboarded_bytes: ((tier("g2") + tier("g3") + tier("g4")) * $b),
       ttft_p50: ($ok | map(.request.ttft_ms) | pct(0.5)), ttft_p90: ($ok | map(.request.ttft_ms) | pct(0.9)),
       tput: (($ok | map(.request.output_tokens) | add) / $s[0].summary.simulated_s)}' "$out/rows.jsonl"
}

: >"$out/all.jsonl"
for w in "${workloads[@]}"; do
  read -r wname one tb <<<"$w"
  read -r ws1 big < <(workload_size "$one" "$tb")
  n=1
  while (((n * ws1 / 4) / big < 4)); do n=$((n + 1)); done
  file="$out/$wname.jsonl"
  copies "$one" "$n" >"$file"
  ws=$((n * ws1))
  workers=$((ws / 4 / big))
  g1=$((ws / 4 / workers))
  g2=$((2 * g1)) g3=$((4 * g1)) g4=$((4 * g1 * workers))
  printf '== %s x %d copies: %s requests, working set %d blocks, largest request %d; %d workers x G1 %d, G2 %d, G3 %d; shared G4 %d\n' \
    "$wname" "$n" "$(wc -l <"$file")" "$ws" "$big" "$workers" "$g1" "$g2" "$g3" "$g4"
  printf '%-30s %4s %6s %6s %6s %6s %10s %12s %14s %9s %9s %8s\n' run ok g1% g2% g3% g4% prefilled reprefilled onboarded_B \
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
          ((.prefilled | tostring) | " " * (11 - length) + .) + ((.reprefilled | tostring) | " " * (13 - length) + .) + ((.onboarded_bytes | tostring) | " " * (15 - length) + .) +
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
# Informational (no goal), issue 48: the shape of Dynamo's H200 Kimi-K2.5 KVBM G2 experiment
# (ai-dynamo/dynamo docs/blogs/digital-twin-simulation/scripts/h200_kvbm_g2_exp: one worker,
# closed-loop concurrency 8/16/32/64, max_num_batched_tokens 2048, G2 32,768 blocks at 70,272
# bytes a token; published mean TTFT -21.0 %, -28.8 %, -32.4 %, -1.5 %), run with dyn's default
# step timing (SPEC 8.3, Llama-3.1-8B-FP8 on one H200: no Kimi profile is public) on the Mooncake
# conversation trace (the toolagent trace they used is not in data/).
echo "== Kimi-shaped G2 experiment (informational): 1 worker, mooncake conversation, 2048-token steps, G2 32768 x 70272 B/token"
printf '%-6s %12s %12s %8s %10s\n' conc ttft_g1_ms ttft_g2_ms change g2_hit%
for c in 8 16 32 64; do
  for g in g1 g2; do
    extra=()
    [[ $g == g2 ]] && extra=(--num-g2-blocks 32768 --kv-bytes-per-token 70272)
    "$bin/dyn-replay" "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" --sim --workers 1 --concurrency "$c" \
      --max-num-batched-tokens 2048 --block-size 512 "${extra[@]}" -o "$out/kimi-$g.jsonl" 2>/dev/null
  done
  jq -n -r --arg c "$c" --slurpfile g1 "$out/kimi-g1.jsonl" --slurpfile g2 "$out/kimi-g2.jsonl" '
    def m(f): (map(select(.dyn.status == "ok")) | map(f) | add / length);
    ($g1 | m(.request.ttft_ms)) as $a | ($g2 | m(.request.ttft_ms)) as $b
    | ($g2 | map(.dyn.cached_tokens_by_tier.g2 // 0) | add) as $h | ($g2 | map(.request.input_tokens) | add) as $in
    | "\($c | " " * (6 - length) + .) \($a | round | tostring | " " * (12 - length) + .) \($b | round | tostring | " " * (12 - length) + .) \(($b / $a - 1) * 1000 | round / 10 | tostring + " %" | " " * (8 - length) + .) \($h / $in * 1000 | round / 10 | tostring | " " * (10 - length) + .)"'
done
# Every row of every run must end ok: a request refused or timed out would leave the figures
# comparing different sets of rows.
bad=$(jq -r 'select(.ok != .rows) | "\(.run): \(.ok) of \(.rows) rows ok"' "$out/all.jsonl")
if [[ -n $bad ]]; then
  echo "$bad"
  echo "MISS rows-not-ok"
  exit 1
fi
m1=$(grep -c '^goal 1 .*miss$' "$out/goals" || true)
m2=$(grep -c '^goal 2 .*miss$' "$out/goals" || true)
if ((m1 == 0 && m2 == 0)); then echo PASS; exit 0; fi
v="MISS"
((m1 > 0)) && v="$v goal1-g2-halves-reprefill"
((m2 > 0)) && v="$v goal2-tier-credit-ttft-p90"
echo "$v"
exit 1
