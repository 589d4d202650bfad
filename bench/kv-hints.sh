#!/usr/bin/env bash
# Benchmark (issue 49, --sim half): do the router's KV retention policies (SPEC 6.4, dyn-replay
# --sim --kv-policy) beat sending no hints on agent traffic?
# Two workloads: the WEKA slice (real Claude Code sessions, data/weka-kv-cache-tester, converted
# with dyn-trace convert --from weka: tool waits after tool_use turns, subagents with their parent;
# 64-token blocks) and the bundled agent workload (data/quickstart: multi-turn sessions, no tool
# waits and no subagents, so only evict-on-final has anything to act on there).
# Sizes, as bench/kv-tiers.sh sizes them: the working set W is the workload's distinct prompt
# blocks at 64-token blocks; the cluster's GPU KV is W/2, W/4 or W/8 over 2 workers. A worker's G1
# must hold the largest request (prompt + output, B blocks), so each workload is replayed as N
# copies (distinct sessions, request ids and hash ids, the same schedule), N the fewest with
# N x W1 / 8 / 2 >= B. The load is the recorded schedule (fixed), the same at every size.
# Routing: kv routing with hard session affinity (TTL 300 s): a session's turns return to the
# worker that holds its blocks, which is what retention counts on.
# Runs per workload and size: no hints, each policy alone, and all three together, with the
# engines' lease bounds at their defaults (40 % of G1 pinned at most, TTL at most 300 s).
# Per run: hit (cached / input tokens, rows ok), re-prefilled tokens (prefilled less each block's
# first prefill: input x (1 - theoretical hit)), TTFT p50/p90 (ms), mean session completion time
# (per session: its last request's end - its first request's start, s), and apart the targeted
# requests: "parent" = parent turns that wait for a subagent (parent-retain's), "tool" = the other
# turns after a tool wait (tool-ttl's); each with its count, hit % and mean TTFT (ms).
# Goal (issue 49): at 4x and 8x, on each workload, the best policy (or the combination) has a
# higher hit than no hints and a mean session completion time at least 10 % lower; at 2x the best
# costs at most 2 % (hit not down by more than 2 % of no hints', completion time not up > 2 %).
# The simulation is deterministic, so every figure is from one run.
# The script prints, after the goals, every run that loses to no hints (hit or completion time).
# Result (2026-12-06, this script, deterministic): MISS, 4 of 6 goals. The 2x goals hold (best:
# evict-on-final; WEKA hit 87.05 % vs 86.49 %, agent 56.39 % vs 51.97 %). At 4x and 8x
# evict-on-final raises the hit (WEKA 70.55 vs 69.49 %, 28.38 vs 28.29 %; agent 26.78 vs 20.55 %,
# 11.69 vs 8.52 %) but no policy moves mean session completion time by more than 0.2 %: it is the
# recorded tool waits and think times (WEKA 323 s mean at 4x; agent 849 s), which no cache saves;
# the prefill a hint saves is seconds of it.
# Where each loses (figures from that run):
# - tool-ttl loses on WEKA at every size (hit 84.49 / 68.3 / 26.49 % vs 86.49 / 69.49 / 28.29 %):
#   a lease holds an idle session's prefix (hundreds of 64-token blocks) while sessions that are
#   running lose theirs, and a lease that ends before the return leaves its blocks the oldest in
#   the eviction order (SPEC 8.6); with TTL = the expected wait (not 4x) it lost far more (60.7 %
#   at 4x). Its own targets do not gain either (4x: 73.7 % vs 74.5 %). The agent workload has no
#   tool waits: nothing to act on (identical to no hints).
# - parent-retain: 18 spawns on WEKA; its 9 targeted parent resumes gain nothing (4x: 53.2 % vs
#   54 %) and the aggregate moves by under 0.4 points either way; no subagents in the agent workload.
# - evict-on-final never loses here; it also serves the WEKA parent resumes best (4x: 75.2 % vs
#   54 %), because finished subagents' blocks go first instead of the parent's.
# - all (the three together): the tool-ttl loss dominates at 8x (26.49 %); at 4x 69.6 % vs 69.49 %.
# KV_HINTS_OUT=DIR keeps the runs' files there.
# Usage: bench/kv-hints.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin"
if [[ -n ${KV_HINTS_OUT:-} ]]; then
  out=$KV_HINTS_OUT
  mkdir -p "$out"
else
  out="$(mktemp -d /tmp/dyn-bench-kvhints.XXXXXX)"
  trap 'rm -rf "$out"' EXIT
fi
exec 3>&1
workers=2

source "$root/bench/workload_copies.sh"  # copies FILE N

"$bin/dyn-trace" convert --from weka "$root"/data/weka-kv-cache-tester/trace_*.json.gz -o "$out/weka1.jsonl" 2>/dev/null
workloads=("weka $out/weka1.jsonl 64" "agent $root/data/quickstart/conversation-slice.jsonl 512")
policies=("none|" "tool-ttl|--kv-policy tool-ttl" "evict-on-final|--kv-policy evict-on-final"
  "parent-retain|--kv-policy parent-retain" "all|--kv-policy tool-ttl,evict-on-final,parent-retain")

# targets FILE: the request ids tool-ttl and parent-retain aim at, {"id": "tool"|"parent"}.
targets() {
  jq -s -c 'map(select(.request_id != null)) | (map({key: .request_id, value: .session_id}) | from_entries) as $sess
    | map(.session_id as $own
      | if ((.wait_for // []) | any($sess[.] != null and $sess[.] != $own)) then {key: .request_id, value: "parent"}
        elif (.tool_wait_ms // null) != null then {key: .request_id, value: "tool"}
        else empty end) | from_entries' "$1"
}

# run NAME FILE TRACE_BLOCK TARGETS FLAGS...: one simulated run; prints one JSON line of figures.
run() {
  local name=$1 file=$2 tb=$3 tg=$4
  shift 4
  timeout 300 "$bin/dyn-replay" "$file" --sim --block-size "$tb" --kv-cache-block-size 64 --workers "$workers" \
    --router-mode kv --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard "$@" \
    --summary "$out/s.json" -o "$out/rows.jsonl" 2>"$out/err" || {
    local rc=$?
    cat "$out/err" >&2
    echo "MISS run-failed: $name (exit $rc)" >&3
    exit 1
  }
  jq -s -c --arg name "$name" --slurpfile s "$out/s.json" --slurpfile tg "$tg" '
    def pct(q): (length as $n | sort | .[((q * $n) | ceil) - 1]);
    def mean: if length == 0 then null else add / length end;
    [.[] | select(.dyn.status == "ok")] as $ok
    | ($ok | map(.request.input_tokens) | add) as $in
    | ($ok | map(.request.cached_tokens) | add) as $cached
    | def part(k): ($ok | map(select($tg[0][.request.request_id // ""] == k))
        | {n: length, hit: (if length == 0 then null else (map(.request.cached_tokens) | add) / (map(.request.input_tokens) | add) end),
           ttft: (map(.request.ttft_ms) | mean)});
    {run: $name, ok: ($ok | length), rows: length, input: $in, hit: ($cached / $in),
     reprefilled: (($in - $cached) - ($in * (1 - $s[0].summary.theoretical_hit_pct / 100) | round)),
     ttft_p50: ($ok | map(.request.ttft_ms) | pct(0.5)), ttft_p90: ($ok | map(.request.ttft_ms) | pct(0.9)),
     session_s: ($ok | group_by(.agent_context.session_id)
       | map((map(.request.request_received_ms + .request.total_time_ms) | max)
             - (map(.request.request_received_ms) | min)) | mean / 1000),
     tool: part("tool"), parent: part("parent"), hints: ($s[0].summary.kv_policy // {})}' "$out/rows.jsonl"
}

: >"$out/all.jsonl"
for w in "${workloads[@]}"; do
  read -r wname one tb <<<"$w"
  ws1=$(jq -s --argjson k $((tb / 64)) '[.[].hash_ids[]] | unique | length * $k' "$one")
  big=$(jq -s '[.[] | (.input_length + (.output_length // 0) + 63) / 64 | floor] | max' "$one")
  n=1
  while ((n * ws1 / 8 / workers < big)); do n=$((n + 1)); done
  file="$out/$wname.jsonl"
  copies "$one" "$n" >"$file"
  targets "$file" >"$out/$wname.targets.json"
  ws=$((n * ws1))
  for ratio in 2 4 8; do
    g1=$((ws / ratio / workers))
    printf '== %s x %d copies, %dx: %s requests, working set %d blocks, largest request %d; %d workers x G1 %d\n' \
      "$wname" "$n" "$ratio" "$(wc -l <"$file")" "$ws" "$big" "$workers" "$g1"
    printf '%-24s %7s %11s %9s %9s %10s %16s %16s\n' run hit% reprefilled ttft_p50 ttft_p90 session_s \
      'tool n/hit%/ttft' 'parent n/hit%/ttft'
    for p in "${policies[@]}"; do
      IFS='|' read -r pname pflags <<<"$p"
      # shellcheck disable=SC2086
      run "$wname ${ratio}x $pname" "$file" "$tb" "$out/$wname.targets.json" --num-gpu-blocks-override "$g1" $pflags \
        >>"$out/all.jsonl"
      tail -1 "$out/all.jsonl" | jq -r '
        def f(d): if . == null then "-" else (. * d | round / d | tostring) end;
        def pad(n): tostring | " " * (n - length) + .;
        def part: "\(.n)/\(.hit | if . == null then null else . * 100 end | f(10))/\(.ttft | f(1))";
        "\(.run | . + " " * (24 - length)) " + (.hit * 100 | f(100) | pad(7)) + (.reprefilled | pad(12))
        + (.ttft_p50 | f(1) | pad(10)) + (.ttft_p90 | f(1) | pad(10)) + (.session_s | f(10) | pad(11))
        + (.tool | part | pad(17)) + (.parent | part | pad(17))'
    done
  done
done

# Goals and where each policy loses, from the table's figures.
jq -s -r '
  . as $all | def get(r): ($all | map(select(.run == r)) | .[0]);
  ($all | map(.run | split(" ")[0]) | unique) as $wls
  | ["tool-ttl", "evict-on-final", "parent-retain", "all"] as $ps
  | [ $wls[] as $w | ("2x", "4x", "8x") as $r
      | get("\($w) \($r) none") as $b
      | [ $ps[] as $p | get("\($w) \($r) \($p)") | . + {p: $p} ] as $runs
      | ($runs | min_by(.session_s)) as $best
      | ((1 - $best.session_s / $b.session_s) * 1000 | round / 10) as $gain
      | (if $r == "2x" then ($best.hit >= $b.hit * 0.98 and $best.session_s <= $b.session_s * 1.02)
         else ($best.hit > $b.hit and $best.session_s <= $b.session_s * 0.9) end) as $ok
      | "goal \($w) \($r): best \($best.p): hit \($best.hit * 10000 | round / 100) % vs \($b.hit * 10000 | round / 100) %, session \($best.session_s * 10 | round / 10) s vs \($b.session_s * 10 | round / 10) s (\($gain) % lower; \(if $r == "2x" then "cost <= 2 %" else ">= 10 % lower, hit up" end)): \(if $ok then "ok" else "miss" end)",
        ( $runs[] | select(.hit < $b.hit or .session_s > $b.session_s)
          | "  loses \($w) \($r) \(.p): hit \(.hit * 10000 | round / 100) % (none \($b.hit * 10000 | round / 100) %), session \(.session_s * 10 | round / 10) s (none \($b.session_s * 10 | round / 10) s), re-prefilled \(.reprefilled) (none \($b.reprefilled)), hints \(.hints | tojson)" ) ]
  | .[]' "$out/all.jsonl" | tee "$out/goals"
bad=$(jq -r 'select(.ok != .rows) | "\(.run): \(.ok) of \(.rows) rows ok"' "$out/all.jsonl")
if [[ -n $bad ]]; then
  echo "$bad"
  echo "MISS rows-not-ok"
  exit 1
fi
if ! grep -q '^goal .*miss$' "$out/goals"; then echo PASS; exit 0; fi
echo "MISS hints-beat-no-hints ($(grep -c '^goal .*miss$' "$out/goals") of $(grep -c '^goal ' "$out/goals") workload x size goals missed)"
exit 1
