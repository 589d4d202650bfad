#!/usr/bin/env bash
# Benchmark (issue 48, the live half): KV tiers below the GPU over real processes, against the
# same run in dyn-replay --sim. Live: one dyn-mocker process with --num-workers 2 engines (so a G4
# pool is shared by both, as --sim shares it), each publishing its KV events, behind dyn-route serve
# (kv routing fed by those events, --router-kv-events), driven by dyn-replay's live client
# (streaming /v1/completions, ignore_eos, SPEC 4.3 synthetic prompts, so the engines' 64-token
# blocks are the simulator's). Sim: dyn-replay --sim with the same engine and router flags.
# Workload and sizes as bench/kv-tiers.sh (computed here the same way, not shared): the bundled
# agent workload (data/quickstart) and, with WORKLOADS="agent weka", the WEKA slice; working set W
# = distinct prompt blocks at 64 tokens; 2 workers with G1 = W/4/2 blocks each, G2 = 2x G1,
# G3 = 4x G1 per worker, shared G4 = the total G3; kv routing, session affinity TTL 300 s and busy
# threshold 2 requests, tier credit on (default weights; G4 with --shared-cache-type events) or off
# (weights 0).
# Speed: the live engines run --speedup-ratio SPEEDUP and the client replays at --speedup SPEEDUP,
# so a run takes its workload's time / SPEEDUP; the sim twin runs the same two flags, so both model
# the same system (--speedup-ratio divides tier transfer times as it divides step times, SPEC
# 8.7). One more flag keeps it the system kv-tiers.sh models at speedup 1: the affinity TTL is
# 300 s / SPEEDUP. Times are reported on the workload's clock (x SPEEDUP).
# Per run, live and sim: ok rows, hit rate by tier (cached tokens on each tier / input tokens, from
# usage.dyn.cached_tokens_by_tier in the client's request_end rows), prefilled tokens (input -
# cached), onboarded bytes, TTFT p50/p90 (ms); for live, how many requests the router placed on
# another worker than in sim ("moved") and how many got other cached tokens than in sim.
# The sim is deterministic: one run. Live runs REPEAT times; each repeat is printed and the live
# figures checked are their medians. Repeats differ because the live router places a session's
# first turn by the load it sees, which live timing moves: in one live G1 run 61 of the 152
# requests went to another worker than in sim, and the live G1 hit rate was 38.0 % in one run and
# 42.8 % in the next (sim 42.0 %).
# Check: live within 5 % of sim on what the engine model decides: the total hit rate, the G1 hit
# rate, the lower tiers' hit rate (G2+G3+G4) and the prefilled tokens (relative difference; a hit
# rate under 1 % of the input in sim is compared in absolute terms, within 0.5 points), and as many
# requests served ok in both (the agent workload has 9 prompts larger than a worker's G1: refused in
# both). The split of the lower tiers between G2 and G4 is printed, not checked: which engine holds
# a block on its own G2 and which onboards it from the pool follows the placement. TTFT is
# reported, not checked: at SPEEDUP 32 one live step lasts 0.2-5 ms, and each millisecond a busy
# 2-core machine adds to a request (thread wake-ups, the router's and the client's own work) is
# 32 ms on the workload's clock, while the hit rates depend only on which blocks are where when each
# request is admitted.
# Measured 2026-12-06 on the shared 2-core machine while other sessions built and tested (agent,
# hard affinity, credit on; sim: G1 42.0 % hit, prefilled 1,011,390; G1+G2 42.0 + 33.6 %,
# prefilled 425,022), after the kvevents fix of the same day (before it the live router skipped
# about 70 CPU_PINNED stores a G1+G2 run whose parent was still on the GPU, which --sim never did:
# live prefilled +6.4 % to +18.8 %):
# - G1+G2, live median of 3: 40.2 + 34.4 % (total -1.3 %, G1 -4.4 %, lower +2.6 %), prefilled
#   442,430 (+4.1 %): within 5 %; 50-96 of the 152 requests placed on another worker than in sim,
#   3-7 with other cached tokens (a block missing from G1 mostly comes back from G2).
# - G1, live median of 3: 36.8 % (43.2, 36.1, 36.8), prefilled +8.9 %: MISS; an earlier set gave
#   42.3 % (38.9, 42.3, 43.2), within 5 %. Without a lower tier a session placed apart from sim
#   re-prefills its context: 28-66 requests moved, 21-34 with other cached tokens.
# - G1+G2+G4 (one run, before the fix): prefilled 406,078 in both, 2 requests with other cached
#   tokens; G1 41.8 vs 42.0 %, G2 28.6 vs 32.7 %, shared G4 6.3 vs 1.9 % (69 requests moved).
# Measured again 2026-12-06 at 18:30 on the quiet machine, tier transfers now divided by the
# speedup in the engine (so --kv-bytes-per-token 131072 in both halves; sim figures unchanged):
# - G1, live median of 3: 41.0 % (37.7, 41.4, 41.0), prefilled +1.6 %: within 5 %.
# - G1+G2: total hit -0.1 %, prefilled 426,046 (+0.2 %), but G1 37.7 % (-10.3 %) and G2 36.4 %
#   (+8.5 %): MISS on the split; 48-103 requests moved take the same blocks from G2, not G1.
# Mean request latency agreed within 3 % in the runs compared (the engines kept pace): what moves
# the figures is placement, first turns arriving together and turns whose binding expired.
# Usage: bench/kv-tiers-live.sh [BUILD_DIR]
#   env: SPEEDUP=32 (a whole number) REPEAT=3 WORKLOADS=agent TIERS="G1 G1+G2" AFFS=hard CREDITS=on KEEP=DIR
#   (TIERS from G1 G1+G2 G1+G2+G3 G1+G2+G4; AFFS from hard soft; CREDITS from on off)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
[[ -x "$bin/dyn-mocker" ]] || { echo "$0: no dyn-mocker in $bin (build first, or give BUILD_DIR)" >&2; exit 2; }
speed="${SPEEDUP:-32}" repeat="${REPEAT:-3}"
read -ra wls <<<"${WORKLOADS:-agent}"
read -ra tiers <<<"${TIERS:-G1 G1+G2}"
read -ra affs <<<"${AFFS:-hard}"
read -ra credits <<<"${CREDITS:-on}"
workers=2
kv_bytes=131072
((speed >= 1)) || { echo "$0: SPEEDUP must be a whole number >= 1" >&2; exit 2; }
ttl=$(((300 + speed / 2) / speed))
out="${KEEP:-$(mktemp -d /tmp/dyn-bench-kvtiers-live.XXXXXX)}"
mkdir -p "$out"
source "$root/bench/servers.sh"
trap 'stop_all; [[ -n "${KEEP:-}" ]] || rm -rf "$out"' EXIT
exec 3>&1

declare -A wfile wtb
wfile[agent]="$root/data/quickstart/conversation-slice.jsonl" wtb[agent]=512
if [[ " ${wls[*]} " == *" weka "* ]]; then
  "$bin/dyn-trace" convert --from weka "$root"/data/weka-kv-cache-tester/trace_*.json.gz -o "$out/weka.jsonl" 2>/dev/null
  wfile[weka]="$out/weka.jsonl" wtb[weka]=64
fi

# figures NAME MODE ROWS: one JSON line of a run's figures from its client request_end rows.
figures() {
  jq -s -c --arg name "$1" --arg mode "$2" --argjson b "$kv_bytes" --argjson s "$speed" '
    def pct(q): (length as $n | sort | .[((q * $n) | ceil) - 1]);
    [.[] | select(.event_type == "request_end" and .dyn.status == "ok" and (.dyn.warmup | not))] as $ok
    | ($ok | map(.request.input_tokens) | add) as $in
    | def tier(t): ($ok | map(.dyn.cached_tokens_by_tier[t] // 0) | add);
    ($ok | map(.request.cached_tokens // 0) | add) as $cached
    | {run: $name, mode: $mode, ok: ($ok | length), rows: length, input: $in, cached: $cached,
       hit: {g1: (($cached - tier("g2") - tier("g3") - tier("g4")) / $in),
             g2: (tier("g2") / $in), g3: (tier("g3") / $in), g4: (tier("g4") / $in)},
       lower: ((tier("g2") + tier("g3") + tier("g4")) / $in),
       prefilled: ($in - $cached), onboarded_bytes: ((tier("g2") + tier("g3") + tier("g4")) * $b),
       ttft_p50: ($ok | map(.request.ttft_ms * $s) | pct(0.5)),
       ttft_p90: ($ok | map(.request.ttft_ms * $s) | pct(0.9))}' "$3"
}

# live NAME FILE TB ENGINE_FLAGS ROUTER_FLAGS: one live run -> figures line.
live() {
  local name=$1 file=$2 tb=$3 i ports urls=() evs=() rport h
  read -ra eflags <<<"$4"
  read -ra rflags <<<"$5"
  rm -f "$out/m.port" "$out/r.port"
  "$bin/dyn-mocker" --num-workers "$workers" --port 0 --port-file "$out/m.port" --block-size 64 \
    --speedup-ratio "$speed" "${eflags[@]}" --kv-events-endpoint 'tcp://127.0.0.1:*' \
    --kv-events-replay-endpoint 'tcp://127.0.0.1:*' 2>"$out/mocker-$k.$r.log" &
  pids+=($!)
  wait_port "$out/m.port" >/dev/null
  mapfile -t ports <"$out/m.port"
  for i in "${!ports[@]}"; do
    h=$(curl -sf "http://127.0.0.1:${ports[$i]}/health")
    urls+=(--worker "http://127.0.0.1:${ports[$i]}")
    evs+=(--worker-kv-events "http://127.0.0.1:${ports[$i]}=$(jq -r '.kv_events_endpoint + "," + .kv_events_replay_endpoint' <<<"$h")")
  done
  "$bin/dyn-route" serve --port 0 --port-file "$out/r.port" "${urls[@]}" "${evs[@]}" --router-mode kv \
    --router-kv-events --kv-cache-block-size 64 --router-session-affinity-ttl-secs "$ttl" \
    --active-requests-threshold 2 --queue-size 100000 "${rflags[@]}" 2>"$out/router-$k.$r.log" &
  pids+=($!)
  rport=$(wait_port "$out/r.port")
  for i in $(seq 1 200); do curl -sf -o /dev/null "http://127.0.0.1:$rport/health" && break; sleep 0.05; done
  timeout 1200 "$bin/dyn-replay" "$file" -u "http://127.0.0.1:$rport" --endpoint-type completions --streaming \
    --ignore-eos --block-size "$tb" --speedup "$speed" -m mock-model --no-progress -o "$out/live-$k.$r.jsonl" \
    2>"$out/replay-$k.$r.log" || { tail -5 "$out/replay-$k.$r.log" >&2; echo "MISS run-failed: live $name" >&3; exit 1; }
  stop_all
  # Outputs, not only counts: the requests the live router put on another worker than the sim's,
  # and those whose cached tokens differ from the sim's (same request ids in both).
  figures "$name" live "$out/live-$k.$r.jsonl" | jq -c --slurpfile s "$out/sim-$k.jsonl" --slurpfile l "$out/live-$k.$r.jsonl" '
    def by_id(rows): rows | map(select(.event_type == "request_end") | {key: .request.request_id, value: .request}) | from_entries;
    by_id($s) as $a | by_id($l) as $b
    | . + {moved: ([$a | keys[] | select($a[.].worker != $b[.].worker)] | length),
           cached_differs: ([$a | keys[] | select(($a[.].cached_tokens // 0) != ($b[.].cached_tokens // 0))] | length)}'
}

# sim NAME FILE TB ENGINE_FLAGS ROUTER_FLAGS: the same run in dyn-replay --sim -> figures line.
sim() {
  local name=$1 file=$2 tb=$3
  read -ra eflags <<<"$4"
  read -ra rflags <<<"$5"
  timeout 300 "$bin/dyn-replay" "$file" --sim --workers "$workers" --block-size "$tb" --kv-cache-block-size 64 \
    --speedup "$speed" --speedup-ratio "$speed" "${eflags[@]}" --router-mode kv --router-kv-events \
    --router-session-affinity-ttl-secs "$ttl" --active-requests-threshold 2 "${rflags[@]}" \
    -o "$out/sim-$k.jsonl" 2>"$out/sim-$k.log" || { tail -5 "$out/sim-$k.log" >&2; echo "MISS run-failed: sim $name" >&3; exit 1; }
  figures "$name" sim "$out/sim-$k.jsonl"
}

median() {  # figures lines of the live repeats -> one line, mode "live", each figure their median
  jq -s -c 'def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    . as $all | $all[0] | .mode = "live"
    | reduce (["ok"], ["rows"], ["input"], ["cached"], ["hit", "g1"], ["hit", "g2"], ["hit", "g3"], ["hit", "g4"],
              ["lower"], ["prefilled"], ["onboarded_bytes"], ["ttft_p50"], ["ttft_p90"], ["moved"], ["cached_differs"]) as $p
        (.; setpath($p; [$all[] | getpath($p)] | med))'
}

row() {  # prints one figures line as a table row
  jq -r '"\((.run + " " + .mode) | .[0:32] | . + " " * (32 - length)) " + (.ok | tostring | " " * (4 - length) + .) + " " +
    ([.hit.g1, .hit.g2, .hit.g3, .hit.g4] | map(. * 1000 | round / 10 | tostring | " " * (6 - length) + .) | join(" ")) +
    ((.prefilled | tostring) | " " * (12 - length) + .) + ((.onboarded_bytes | tostring) | " " * (15 - length) + .) +
    ([.ttft_p50, .ttft_p90] | map(round | tostring | " " * (10 - length) + .) | join("")) +
    (if .moved then "   \(.moved) moved, \(.cached_differs) cached differ" else "" end)'
}

echo "live: 1 dyn-mocker --num-workers $workers behind dyn-route serve; sim: dyn-replay --sim --workers $workers"
echo "both: --speedup-ratio $speed --speedup $speed, --kv-bytes-per-token $kv_bytes, affinity TTL $ttl s (= 300 / $speed)"
: >"$out/all.jsonl"
k=0  # run number: each run's rows and logs stay in $out (KEEP=DIR keeps them): sim-K.jsonl, live-K.REPEAT.jsonl
for wname in "${wls[@]}"; do
  file=${wfile[$wname]:?unknown workload $wname (agent, weka)} tb=${wtb[$wname]}
  ws=$(jq -s --argjson k $((tb / 64)) '[.[].hash_ids[]] | unique | length * $k' "$file")
  g1=$((ws / 4 / workers))
  g2=$((2 * g1)) g3=$((4 * g1)) g4=$((4 * g1 * workers))
  printf '== %s: %s requests, working set %d blocks; %d workers x G1 %d, G2 %d, G3 %d; shared G4 %d\n' \
    "$wname" "$(wc -l <"$file")" "$ws" "$workers" "$g1" "$g2" "$g3" "$g4"
  printf '%-32s %4s %6s %6s %6s %6s %11s %14s %9s %9s\n' run ok g1% g2% g3% g4% prefilled onboarded_B ttft_p50 ttft_p90
  for tname in "${tiers[@]}"; do
    base="--num-gpu-blocks-override $g1"
    shared=""
    case $tname in
      G1) tflags="$base" ;;
      G1+G2) tflags="$base --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2" ;;
      G1+G2+G3) tflags="$base --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2 --num-g3-blocks $g3" ;;
      G1+G2+G4) tflags="$base --kv-bytes-per-token $kv_bytes --num-g2-blocks $g2 --num-g4-blocks $g4" shared="--shared-cache-type events" ;;
      *) echo "$0: TIERS: G1 G1+G2 G1+G2+G3 G1+G2+G4, not $tname" >&2; exit 2 ;;
    esac
    for aff in "${affs[@]}"; do
      for credit in "${credits[@]}"; do
        if [[ $credit == on ]]; then cflags="$shared"; else cflags="--host-cache-hit-weight 0 --disk-cache-hit-weight 0"; fi
        name="$wname $tname $aff $credit"
        rf="--router-session-affinity-mode $aff $cflags"
        k=$((k + 1))
        sim "$name" "${wfile[$wname]}" "$tb" "$tflags" "$rf" >>"$out/all.jsonl"
        tail -1 "$out/all.jsonl" | row
        : >"$out/repeats.jsonl"
        for r in $(seq 1 "$repeat"); do
          live "$name" "${wfile[$wname]}" "$tb" "$tflags" "$rf" >"$out/one.jsonl"
          jq -c --arg r "$r" '.mode = "live#" + $r' "$out/one.jsonl" | tee -a "$out/repeats.jsonl" | row
        done
        median <"$out/repeats.jsonl" >>"$out/all.jsonl"
        tail -1 "$out/all.jsonl" | row
      done
    done
  done
done

# The check: each run's live figures against its sim twin.
jq -s -r '
  group_by(.run)[] | (map(select(.mode == "live"))[0]) as $l | (map(select(.mode == "sim"))[0]) as $s
  | def rel(a; b): (if b == 0 then (if a == 0 then 0 else 1 end) else ((a - b) / b) end);
    def hitcheck(what; a; b): if b < 0.01 then {what: what, d: ((a - b) * 100), abs: true, ok: (((a - b) | fabs) <= 0.005)}
                              else {what: what, d: (rel(a; b) * 100), abs: false, ok: ((rel(a; b) | fabs) <= 0.05)} end;
  [hitcheck("hit rate"; $l.cached / $l.input; $s.cached / $s.input), hitcheck("G1 hit rate"; $l.hit.g1; $s.hit.g1),
   hitcheck("lower-tier hit rate"; $l.lower; $s.lower),
   {what: "prefilled tokens", d: (rel($l.prefilled; $s.prefilled) * 100), abs: false,
    ok: ((rel($l.prefilled; $s.prefilled) | fabs) <= 0.05)},
   {what: "requests ok", d: ($l.ok - $s.ok), abs: true, ok: ($l.ok == $s.ok and $l.rows == $s.rows)}] as $c
  | "check \($s.run): " + ($c | map("\(.what) \(if .abs then "\(.d * 100 | round / 100)\(if .what == "requests ok" then "" else " pt" end)" else "\(.d * 10 | round / 10) %" end) \(if .ok then "ok" else "miss" end)") | join(", "))
    + "; TTFT p50 live/sim \($l.ttft_p50 / $s.ttft_p50 * 100 | round / 100)x, p90 \($l.ttft_p90 / $s.ttft_p90 * 100 | round / 100)x (not checked)"' \
  "$out/all.jsonl" | tee "$out/checks"
if grep -q ' miss' "$out/checks"; then echo "MISS live-within-5pct-of-sim"; exit 1; fi
echo PASS
