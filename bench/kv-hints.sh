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
# Bounds, beside the policies at every size: "ceiling", the retention oracle (the same G1; every
# block G1 evicts kept on a G2 as large as all the blocks the workload ever stores, its links
# unbounded: every reuse a hit at no transfer cost, which no choice of what G1 keeps can beat, up
# to the step boundary an onboarding waits for), and "g1-unbounded" (G1 holds every block: nothing
# evicted and no request ever waits for G1 room: more memory, not retention). Per workload and
# size a line "ceiling W Sx: completion -X % at best" with the engine's share of session time
# (sum of request durations / sum of session spans), saying where even the ceiling misses 10 %.
# Loads: the same runs at 4x and 8x with --speedup 2, 4 and 8 (the recorded schedule compressed:
# arrivals, think times and tool waits divided; the same sessions and cache sizes), every policy
# printed, a table of no hints / best policy / ceiling, and each policy that loses there.
# Policy 4 (demote-prefetch, SPEC 6.4) runs with G2 = 2x G1 (as bench/kv-tiers.sh sizes it,
# default links, 128 KiB a token) against no hints on the same tiers ("none+G2"), one line each.
# Result (2026-12-06, this script, deterministic; --sim now replays a WEKA turn's tool_wait_ms
# after its previous turn, as the live replay always did: before, those turns started the moment
# the previous one ended, so the WEKA figures below differ from the earlier result; the agent
# workload has no tool waits and its rows are unchanged): MISS, 4 of 6 goals. 2x holds (best:
# all, WEKA 86.21 % vs 85.83 %, 600.5 s vs 600.6 s; evict-on-final, agent 56.39 % vs 51.97 %).
# At 4x and 8x the best (evict-on-final) raises the hit by 0.1 to 6.2 points but completion by
# <= 0.1 %. What any retention could give at this load (ceiling, load 1): WEKA -0.4 % / -4.8 % /
# -3.5 % at 2x / 4x / 8x (hit 86 % vs 50.6 % at 4x), agent -0.3 % / -0.6 % / -0.7 % (hit 73.6 %
# vs 20.5 % at 4x): no retention policy can meet the 10 % goal at the recorded load. The engine
# is 29 % / 48.8 % of WEKA session time at 4x / 8x (agent 6.8 % / 12.2 %), and most of it waits
# for G1 room, not prefill: the largest WEKA request needs 1,581 of a worker's 3,559 (4x) or
# 1,779 (8x) blocks; with G1 unbounded WEKA completes in 535.9 s (-23.7 % / -48.9 %).
# Under load (ceiling vs no hints): the ceiling reaches >= 10 % only for the agent workload at 4x,
# load 8 (236.4 s vs 283.1 s, -16.5 %); WEKA's best is -8.7 % (4x, load 8), agent 8x load 8
# -9.5 %. The best real policy gains at most 2.1 % anywhere (tool-ttl, WEKA 4x load 2: 537.2 s vs
# 548.6 s, hit 39.1 % vs 35.6 %); evict-on-final 0 to 1 %. So the 10 % goal is out of reach of
# retention on these workloads and sizes; restating it (hit up, completion not worse, and the
# ceiling's share of the gap recovered) is what this measurement supports.
# demote-prefetch vs no hints on the same G1 + G2 (tool turns demoted when the expected wait is
# >= 4 copies; WEKA median request 882 blocks = 7.4 GB, 0.53 s each way at 14 GB/s): loses at
# load 1 (4x: hit 84.28 % vs 85.79 %, 672.9 s vs 669.7 s, TTFT p50 620 vs 217 ms; 8x: 54.56 % vs
# 61.94 %, 1089.3 s vs 1057.1 s); 120 of 225 demotes got their prefetch, the rest came back first
# (tool waits: median 4.75 s, p90 38 s) and onboard from G2 themselves, and a return during the
# demote's own copy finds the blocks ready on neither tier. It wins a little at 4x, loads 2 and 4
# (518.4 s vs 524.6 s, hit 84.35 % vs 83.25 %; -0.5 %), and loses at 4x load 8 (+1.7 %) and at 8x
# at every load (+0.3 to +3 %). The agent workload has no tool waits: identical to its baseline.
# Where each of the other policies loses (WEKA, load 1):
# - tool-ttl at every size (hit 83.44 / 46.46 / 24.51 % vs 85.83 / 50.61 / 25.87 %): a lease
#   holds an idle session's prefix (hundreds of 64-token blocks) while running sessions lose
#   theirs, and a lease that ends before the return leaves its blocks the oldest in the order.
# - evict-on-final at 2x (82.57 % vs 85.83 %, 605.3 s vs 600.6 s; its targeted parent resumes
#   74.3 % vs 83.9 %); it wins at 4x and 8x by under 0.3 points.
# - parent-retain at 2x and 4x (85.34 / 47.99 % vs 85.83 / 50.61 %; its own 9 targets fall too,
#   74.3 / 29.6 % vs 83.9 / 42.6 %): 18 leases of up to 120 s on parents' prefixes.
# - all (the three together): the tool-ttl loss dominates at 4x and 8x; at 2x it is the best.
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
loads=(2 4 8)

source "$root/bench/workload_copies.sh"  # copies FILE N, workload_size FILE TB

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
    ($ok | group_by(.agent_context.session_id)
       | map((map(.request.request_received_ms + .request.total_time_ms) | max)
             - (map(.request.request_received_ms) | min))) as $spans
    | {run: $name, ok: ($ok | length), rows: length, input: $in, hit: ($cached / $in),
     reprefilled: (($in - $cached) - ($in * (1 - $s[0].summary.theoretical_hit_pct / 100) | round)),
     ttft_p50: ($ok | map(.request.ttft_ms) | pct(0.5)), ttft_p90: ($ok | map(.request.ttft_ms) | pct(0.9)),
     session_s: ($spans | mean / 1000),
     engine_share: (($ok | map(.request.total_time_ms) | add) / ($spans | add)),
     theoretical: ($s[0].summary.theoretical_hit_pct / 100),
     g1_hit: (($cached - ($ok | map(.dyn.cached_tokens_by_tier // {} | [.g2, .g3, .g4] | map(. // 0) | add) | add)) / $in),
     tool: part("tool"), parent: part("parent"), hints: ($s[0].summary.kv_policy // {})}' "$out/rows.jsonl"
}

# row [WIDTH]: the table line of the latest run in all.jsonl, its name padded to WIDTH (24).
row() {
  tail -1 "$out/all.jsonl" | jq -r --argjson w "${1:-24}" '
    def f(d): if . == null then "-" else (. * d | round / d | tostring) end;
    def pad(n): tostring | " " * (n - length) + .;
    def part: "\(.n)/\(.hit | if . == null then null else . * 100 end | f(10))/\(.ttft | f(1))";
    "\(.run | . + " " * ($w - length)) " + (.hit * 100 | f(100) | pad(7)) + (.reprefilled | pad(12))
    + (.ttft_p50 | f(1) | pad(10)) + (.ttft_p90 | f(1) | pad(10)) + (.session_s | f(10) | pad(11))
    + (.tool | part | pad(17)) + (.parent | part | pad(17))'
}

# size PREFIX G1 TOTAL FLAGS...: every run at one size and load, named "PREFIX RUN": no hints,
# each policy, and the two bounds: "ceiling" (the retention oracle: the same G1, every block it
# evicts kept on a G2 as large as all the blocks the workload ever stores, with free transfers:
# every reuse a hit at no cost, the most any choice of what G1 keeps can give) and
# "g1-unbounded" (G1 holds TOTAL blocks: nothing evicted, and no request ever waits for G1 room,
# which is more memory, not retention).
size() {
  local prefix=$1 g1=$2 total=$3
  shift 3
  for p in "${policies[@]}"; do
    IFS='|' read -r pname pflags <<<"$p"
    # shellcheck disable=SC2086
    run "$prefix $pname" "$file" "$tb" "$out/$wname.targets.json" --num-gpu-blocks-override "$g1" $pflags "$@" \
      >>"$out/all.jsonl"
    row "$width"
  done
  run "$prefix ceiling" "$file" "$tb" "$out/$wname.targets.json" --num-gpu-blocks-override "$g1" \
    --num-g2-blocks "$total" --kv-bytes-per-token "$kv_bytes" --bandwidth-g1-to-g2-gbps 0 --bandwidth-g2-to-g1-gbps 0 \
    "$@" >>"$out/all.jsonl"
  row "$width"
  run "$prefix g1-unbounded" "$file" "$tb" "$out/$wname.targets.json" --num-gpu-blocks-override "$total" "$@" \
    >>"$out/all.jsonl"
  row "$width"
  # Policy 4 needs a tier below G1: it and its fair baseline, no hints on the same tiers (G2 = 2x
  # G1 as bench/kv-tiers.sh sizes it, its links at their defaults).
  local tiers=(--num-gpu-blocks-override "$g1" --num-g2-blocks $((2 * g1)) --kv-bytes-per-token "$kv_bytes")
  run "$prefix none+G2" "$file" "$tb" "$out/$wname.targets.json" "${tiers[@]}" "$@" >>"$out/all.jsonl"
  row "$width"
  run "$prefix demote-prefetch+G2" "$file" "$tb" "$out/$wname.targets.json" "${tiers[@]}" \
    --kv-policy demote-prefetch "$@" >>"$out/all.jsonl"
  row "$width"
}
kv_bytes=131072 # 128 KiB a token: 8 MiB a 64-token block, as bench/kv-tiers.sh
# hdr: the table's header, its first column $width wide.
hdr() {
  printf "%-${width}s %7s %11s %9s %9s %10s %16s %16s\n" run hit% reprefilled ttft_p50 ttft_p90 session_s \
    'tool n/hit%/ttft' 'parent n/hit%/ttft'
}

: >"$out/all.jsonl"
for w in "${workloads[@]}"; do
  read -r wname one tb <<<"$w"
  read -r ws1 big < <(workload_size "$one" "$tb")
  n=1
  while ((n * ws1 / 8 / workers < big)); do n=$((n + 1)); done
  file="$out/$wname.jsonl"
  copies "$one" "$n" >"$file"
  targets "$file" >"$out/$wname.targets.json"
  ws=$((n * ws1))
  total=$(jq -s '[.[] | (.input_length + (.output_length // 0) + 63) / 64 | floor] | add' "$file")
  for ratio in 2 4 8; do
    g1=$((ws / ratio / workers))
    printf '== %s x %d copies, %dx: %s requests, working set %d blocks, largest request %d; %d workers x G1 %d\n' \
      "$wname" "$n" "$ratio" "$(wc -l <"$file")" "$ws" "$big" "$workers" "$g1"
    width=24
    hdr
    size "$wname ${ratio}x" "$g1" "$total"
  done
  # The load: the recorded schedule compressed (--speedup L divides timestamps, think times and
  # tool waits alike), the same sessions on the same cache sizes.
  for load in "${loads[@]}"; do
    for ratio in 4 8; do
      g1=$((ws / ratio / workers))
      printf '== %s, %dx, load %s (--speedup %s): G1 %d\n' "$wname" "$ratio" "$load" "$load" "$g1"
      width=27
      hdr
      size "$wname ${ratio}x L$load" "$g1" "$total" --speedup "$load"
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
# The bounds: what no retention policy can beat, per workload, size and load, beside no hints
# and the best policy; each policy that loses to no hints at a higher load.
jq -s -r '
  . as $all | def get(r): ($all | map(select(.run == r)) | .[0]);
  def p1: . * 1000 | round / 10;
  def s1: . * 10 | round / 10;
  def gain(b): (1 - .session_s / b.session_s) | p1;
  def chg(b): (.session_s / b.session_s - 1) | p1 | if . > 0 then "+\(.)" else tostring end;
  ($all | map(.run | split(" ")[0]) | unique) as $wls
  | ["tool-ttl", "evict-on-final", "parent-retain", "all"] as $ps
  | ([ $wls[] as $w | ("2x", "4x", "8x") as $r | get("\($w) \($r) none") as $b
      | get("\($w) \($r) ceiling") as $c | get("\($w) \($r) g1-unbounded") as $u
      | "ceiling \($w) \($r): completion \($c | chg($b)) % at best (\($c.session_s | s1) s vs no hints \($b.session_s | s1) s; hit \($c.hit | p1) % vs \($b.hit | p1) %, theoretical \($b.theoretical | p1) %); engine share of session time \($b.engine_share | p1) % (ceiling \($c.engine_share | p1) %); g1-unbounded \($u.session_s | s1) s (\($u | chg($b)) %, hit \($u.hit | p1) %)\(if $r != "2x" and ($c | gain($b)) < 10 then ": no retention policy can meet the 10 % goal at this load" else "" end)" ]),
    ["load  size workload   none s/hit%       best policy s/hit%           ceiling s/hit%    best   ceiling  engine share"],
    ([ ($all | map(.run | split(" ")[2] // "" | select(startswith("L"))) | unique | sort_by(.[1:] | tonumber))[] as $l
      | ("4x", "8x") as $r | $wls[] as $w
      | get("\($w) \($r) \($l) none") as $b | get("\($w) \($r) \($l) ceiling") as $c
      | ([ $ps[] as $p | get("\($w) \($r) \($l) \($p)") | . + {p: $p} ] | min_by(.session_s)) as $best
      | "\($l[1:] | . + " " * (5 - length))\($r)  \($w + " " * (8 - length)) \("\($b.session_s | s1)/\($b.hit | p1)" | " " * (14 - length) + .)  \("\($best.p) \($best.session_s | s1)/\($best.hit | p1)" | " " * (28 - length) + .)  \("\($c.session_s | s1)/\($c.hit | p1)" | " " * (14 - length) + .)  \("\($best | chg($b)) %" | " " * (7 - length) + .)  \("\($c | chg($b)) %" | " " * (8 - length) + .)  \($b.engine_share | p1) %\(if ($c | gain($b)) >= 10 then "  ceiling >= 10 %" else "" end)" ]),
    ([ ($all | map(.run | split(" ")[2] // "" | select(startswith("L"))) | unique)[] as $l
      | $wls[] as $w | ("4x", "8x") as $r | get("\($w) \($r) \($l) none") as $b
      | $ps[] as $p | get("\($w) \($r) \($l) \($p)") | select(.hit < $b.hit or .session_s > $b.session_s)
      | "  loses \($w) \($r) \($l) \($p): hit \(.hit | p1) % (none \($b.hit | p1) %), session \(.session_s | s1) s (none \($b.session_s | s1) s)" ])
  | .[]' "$out/all.jsonl"
# Policy 4 against no hints on the same tiers, at every size and load.
jq -s -r '
  . as $all | def get(r): ($all | map(select(.run == r)) | .[0]);
  def p1: . * 1000 | round / 10;
  def s1: . * 10 | round / 10;
  def o(f): if . == null then "-" else f end;
  $all[] | select(.run | endswith(" demote-prefetch+G2")) | (.run | sub(" demote-prefetch\\+G2$"; "")) as $at
  | get("\($at) none+G2") as $b
  | "demote-prefetch \($at): hit \(.hit | p1) % vs \($b.hit | p1) % (no hints, same tiers; from G1 \(.g1_hit | p1) % vs \($b.g1_hit | p1) %), session \(.session_s | s1) s vs \($b.session_s | s1) s (\((.session_s / $b.session_s - 1) | p1 | if . > 0 then "+\(.)" else tostring end) %), TTFT p50/p90 \(.ttft_p50 | round)/\(.ttft_p90 | round) ms vs \($b.ttft_p50 | round)/\($b.ttft_p90 | round), tool turns \(.tool.n): hit \(.tool.hit | o(p1)) % vs \($b.tool.hit | o(p1)) %, TTFT \(.tool.ttft | o(round)) ms vs \($b.tool.ttft | o(round)); hints \(.hints | tojson)\(if .session_s > $b.session_s or .hit < $b.hit then ": loses" else "" end)"' "$out/all.jsonl"
bad=$(jq -r 'select(.ok != .rows) | "\(.run): \(.ok) of \(.rows) rows ok"' "$out/all.jsonl")
if [[ -n $bad ]]; then
  echo "$bad"
  echo "MISS rows-not-ok"
  exit 1
fi
if ! grep -q '^goal .*miss$' "$out/goals"; then echo PASS; exit 0; fi
echo "MISS hints-beat-no-hints ($(grep -c '^goal .*miss$' "$out/goals") of $(grep -c '^goal ' "$out/goals") workload x size goals missed)"
exit 1
