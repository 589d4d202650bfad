#!/usr/bin/env bash
# Benchmark (issue 49, the live half of bench/kv-hints.sh): the router's KV retention policies over
# real processes, against the same run in dyn-replay --sim. Live: one dyn-mocker process with
# --num-workers 2 engines behind dyn-route serve --kv-policy (kv routing, hard session affinity),
# driven by dyn-replay's live client (streaming /v1/completions, ignore_eos, SPEC 4.3 synthetic
# prompts, so the engines' 64-token blocks are the simulator's) that also plays the harness: it
# PUSHes a tool_start and a tool_end for every tool wait it replays (--tool-events-endpoint) to the
# router's PULL socket, which is how tool-ttl learns of a tool call live (the mocker's replies call
# no tool). evict-on-final's kv.evict travels in the last turn's body (the client marks it
# x-dynamo-session-final); tool-ttl's and parent-retain's kv.retain go to the worker's POST
# /v1/kv_hints, naming the session's lineage from the router's session-prefix index.
# demote-prefetch (policy 4) runs with a G2 of 2x G1 on each engine (128 KiB a token, default
# links, as bench/kv-hints.sh), against no hints on the same tiers (none+G2): the router demotes a
# session's blocks at the harness's tool_start and plans their prefetch for the expected wait less
# two copies (its --kv-bytes-per-token and --speedup-ratio the engines').
# Sim: dyn-replay --sim with the same engine, router and policy flags.
# Workloads and sizes as bench/kv-hints.sh (workload_size, the same N rule): the WEKA slice
# (data/weka-kv-cache-tester, dyn-trace convert --from weka) and the bundled agent workload, each as
# N copies (the fewest whose GPU KV at 8x still holds the largest request on each of 2 workers),
# G1 = working set / SIZE / 2 per worker.
# Speed: the engines run --speedup-ratio SPEEDUP and the client replays at --speedup SPEEDUP, so a
# run takes its workload's time / SPEEDUP; the sim twin runs the same two flags. Every time setting
# is divided by SPEEDUP too, so both model the system kv-hints.sh models at speedup 1: the affinity
# TTL (300 s), the approximate index's block TTL (--router-ttl-secs 120 s: unscaled, the WEKA 4x
# no-hints hit is 66.06 % at SPEEDUP 32 against 50.61 % at 1), tool-ttl's default and longest expected wait (30 s, 120 s), parent-retain's lease
# (120 s) and the engines' longest lease (300 s). Times are reported on the workload's clock.
# Per run, live and sim: ok rows, hit (cached / input tokens), prefilled tokens, TTFT p50/p90 (ms),
# mean session completion time (s), the hints sent (live: the router's dyn_kv_policy_hints_total by
# outcome; sim: the --summary's counts); for live, how many requests got other cached tokens than in
# sim. The sim is deterministic: one run. Live runs REPEAT times; the live figures checked are the
# repeats' medians.
# Check: live within 5 % of sim on the hit and the prefilled tokens, as many requests served ok, and
# each policy's effect on the hit (its hit less no hints') of the same sign live as in sim where the
# sim's is at least 1 point. TTFT and completion time are reported, not checked: at SPEEDUP 32 each
# millisecond a busy 2-core machine adds to a request is 32 ms on the workload's clock.
# Result (2026-12-06, quiet machine, WEKA 4x, speedup 32): MISS. tool-ttl agrees: live 47.59 /
# 47.42 / 47.06 % hit against sim 46.46 % (prefilled -1.8 %). No hints does not: live 60.21 / 66.35
# / 51.13 % (and 51.38, 67.36 % in two more runs) against sim 50.61 %: two of the five runs
# within 1.5 % of the sim, the others at 60-67 %, near the 66.06 % --sim gives with the index TTL
# unscaled. The cause (2026-12-06, three more no-hints runs with the router's trace and decision
# log, compared request by request with the sim's rows): the WEKA 4x file starts 15 sessions at the
# same instant (t = 0: 5 WEKA sessions x 3 copies, each copy's blocks its own). Live, their first
# requests reach the router in the order the client's threads send them; --sim places them in file
# order. kv routing places each on the worker with the lower cost (no overlap yet: the load of the
# ones placed before it), and hard affinity keeps the session there, so that order alone decides
# which sessions share a worker's G1 for the whole run. Run b's order differed from the file's only
# among copies of one trace (same sizes): the same split, 51.31 % against 50.61 %, 12 of 285
# requests on another worker than in sim. Run c's order swapped two traces: 6 of the 33 first
# turns elsewhere, their sessions' 37 requests with them, 62.98 %. Run a's interleaved more: 13
# first turns, 131 requests elsewhere, 41.09 % (its tokens 9.12M : 5.79M between the workers
# against the sim's 7.63M : 7.29M). Expired bindings are not it (9 later turns placed anew in
# the sim), nor the index TTL (run b agrees with it scaled). Not a router bug: simultaneous
# requests have no order live. A defined order needs the workload's simultaneous starts spread
# (tens of ms apart at SPEEDUP 32), which changes the workload and the sim's figures: left to the
# integrator. tool-ttl's leases make the live runs stable. SPREAD_MS=20 (below) spreads them, in
# both halves (2026-12-07; load 4-5, then quiet): no hints, sim 51.85 %, live 51.65 / 67.69 / 50.57
# and 51.24 %: three of four within 2.5 %, one run at 67.69 % (75 requests cached differently: not
# the first turns' order alone); but tool-ttl's sim moves from 46.46 to 62.53 % under the spread
# (its first turns 0.64 s apart on the workload's clock: the router sees partly prefilled workers)
# while live stays at 47.57 %: the sim's tool-ttl figure at this size (15 sessions on 2 workers)
# hangs on the first turns' timing, and live does not follow it there. So the spread is a knob,
# off by default (the runs above without it), not the fix.
# Session completion agrees within 1 %. Loaded machines (load 6-20) move every figure by points.
# demote-prefetch (2026-12-07, quiet machine, REPEAT=1, SPREAD_MS=20): sim 84.29 % hit, live
# 84.75 % (+0.5 %), prefilled -2.9 %; 225 demotes and 120 prefetches in sim, 223 and 116 live (107
# planned prefetches cancelled: the session came back first); its effect against none+G2 (sim
# 86.17 %, live 84.60 %) -1.9 pt in sim, +0.2 pt live.
# demote-prefetch (2026-12-06, REPEAT=1, WEKA 4x, speedup 32, a loaded machine: load 9, not a
# verdict): sim 84.28 % hit (225 demotes, 12 waits kept on G1, 120 prefetches) against 85.79 % for
# none+G2; live 82.11 % against 83.88 % (336 demote/prefetch actions answered, 54 clipped): the
# policy's effect -1.8 pt live vs -1.5 pt sim, the same sign; live prefilled 13-14 % more tokens
# than sim in both runs (the load), so the run ended MISS there.
# Usage: bench/kv-hints-live.sh [BUILD_DIR]
#   env: SPEEDUP=32 REPEAT=3 WORKLOADS="weka agent" SIZE=4 SPREAD_MS=0
#        POLICIES="none evict-on-final tool-ttl all none+G2 demote-prefetch" KEEP=DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
[[ -x "$bin/dyn-mocker" ]] || { echo "$0: no dyn-mocker in $bin (build first, or give BUILD_DIR)" >&2; exit 2; }
speed="${SPEEDUP:-32}" repeat="${REPEAT:-3}" size="${SIZE:-4}"
read -ra wls <<<"${WORKLOADS:-weka agent}"
read -ra pols <<<"${POLICIES:-none evict-on-final tool-ttl all none+G2 demote-prefetch}"
((speed >= 1)) || { echo "$0: SPEEDUP must be a whole number >= 1" >&2; exit 2; }
workers=2
out="${KEEP:-$(mktemp -d /tmp/dyn-bench-kvhints-live.XXXXXX)}"
mkdir -p "$out"
source "$root/bench/servers.sh"
source "$root/bench/workload_copies.sh"  # copies FILE N, workload_size FILE TB
trap 'stop_all; [[ -n "${KEEP:-}" ]] || rm -rf "$out"' EXIT
exec 3>&1
scaled() { jq -n --argjson v "$1" --argjson s "$speed" '$v / $s'; }  # a time setting on the run's clock
ttl=$(((300 + speed / 2) / speed))  # whole seconds (the flag takes no fraction)
# Router flags both halves take; the policy flags (and the engines' lease bound, which --sim takes only
# with a policy) are added per run.
rflags=(--router-mode kv --kv-cache-block-size 64 --router-session-affinity-ttl-secs "$ttl"
  --router-session-affinity-mode hard --router-ttl-secs "$(scaled 120)")

declare -A wfile wtb
"$bin/dyn-trace" convert --from weka "$root"/data/weka-kv-cache-tester/trace_*.json.gz -o "$out/weka1.jsonl" 2>/dev/null
wfile[weka]="$out/weka1.jsonl" wtb[weka]=64
wfile[agent]="$root/data/quickstart/conversation-slice.jsonl" wtb[agent]=512

# spread D: the rows that start at the same instant (a timestamp, file order) D ms apart on the
# workload's clock, the k-th of them at +k x D. Live, simultaneous requests reach the router in
# whatever order the client's threads send them, and with hard affinity that order decides which
# sessions share a worker for the whole run (the no-hints hit moved 41-67 % between runs); spread,
# the router sees the file's order, as --sim does. Both halves replay the spread file, sorted again
# by time (dyn-replay wants timestamps in order): a row without one (a session's later turn) keeps
# its place after the latest start before it. SPREAD_MS=0 replays the copies as they are.
spread_ms=${SPREAD_MS:-0}  # on the run's clock (20: 20 ms apart live); 0 = the copies as they are
spread() {
  jq -n -c --argjson d "$1" '[foreach inputs as $r ({n: {}, m: 0, row: null};
    if $r.timestamp == null then .row = $r
    else ($r.timestamp | tostring) as $t | .n[$t] += 1 | .n[$t] as $c | .row = ($r | .timestamp += ($c - 1) * $d) end
    | .m = ([.m, .row.timestamp // 0] | max); [.row.timestamp // .m, .row])]
    | to_entries | sort_by([.value[0], .key])[] | .value[1]'
}

kv_bytes=131072 # 128 KiB a token: 8 MiB a 64-token block, as bench/kv-hints.sh and kv-tiers.sh
# policy_flags NAME: the --kv-policy flags of a policy run (time settings scaled).
policy_flags() {
  local list
  case $1 in
    none | none+G2) return 0 ;;
    all) list=tool-ttl,evict-on-final,parent-retain ;;
    tool-ttl | evict-on-final | parent-retain | demote-prefetch) list=$1 ;;
    *) echo "$0: POLICIES: none tool-ttl evict-on-final parent-retain all none+G2 demote-prefetch, not $1" >&2; exit 2 ;;
  esac
  printf '%s\n' --kv-policy "$list" --kv-hint-max-ttl-s "$(scaled 300)"
  [[ $list != *tool-ttl* && $list != demote-prefetch ]] || printf '%s\n' --kv-policy-tool-default-wait-s "$(scaled 30)"
  [[ $list != *tool-ttl* ]] || printf '%s\n' --kv-policy-tool-max-wait-s "$(scaled 120)"
  [[ $list != *parent-retain* ]] || printf '%s\n' --kv-policy-parent-ttl-s "$(scaled 120)"
}

# tier_flags NAME: the engines' G2 (2x G1, default links, as bench/kv-hints.sh) for demote-prefetch
# and its fair baseline none+G2; the sim takes them as they are, live the mocker (and the router
# demote-prefetch's copy settings: the same bytes a token and speedup).
tier_flags() {
  [[ $1 == none+G2 || $1 == demote-prefetch ]] || return 0
  printf '%s\n' --num-g2-blocks $((2 * g1)) --kv-bytes-per-token "$kv_bytes"
}

# figures NAME MODE ROWS HINTS_JSON: one JSON line of a run's figures from its request_end rows.
figures() {
  jq -s -c --arg name "$1" --arg mode "$2" --argjson s "$speed" --argjson hints "$4" '
    def pct(q): (length as $n | sort | .[((q * $n) | ceil) - 1]);
    [.[] | select(.event_type == "request_end" and .dyn.status == "ok" and (.dyn.warmup | not))] as $ok
    | ($ok | map(.request.input_tokens) | add) as $in | ($ok | map(.request.cached_tokens // 0) | add) as $cached
    | {run: $name, mode: $mode, ok: ($ok | length), rows: length, input: $in, cached: $cached, hit: ($cached / $in),
       prefilled: ($in - $cached), ttft_p50: ($ok | map(.request.ttft_ms * $s) | pct(0.5)),
       ttft_p90: ($ok | map(.request.ttft_ms * $s) | pct(0.9)),
       session_s: ($ok | group_by(.agent_context.session_id)
         | map((map(.request.request_received_ms + .request.total_time_ms) | max) - (map(.request.request_received_ms) | min))
         | add / length * $s / 1000), hints: $hints}' "$3"
}

# sim NAME FILE TB POLICY_FLAGS...: the run in dyn-replay --sim -> figures line.
sim() {
  local name=$1 file=$2 tb=$3
  shift 3
  timeout 300 "$bin/dyn-replay" "$file" --sim --workers "$workers" --block-size "$tb" \
    --speedup "$speed" --speedup-ratio "$speed" --num-gpu-blocks-override "$g1" "${rflags[@]}" "$@" \
    --summary "$out/sim-$k.summary.json" -o "$out/sim-$k.jsonl" 2>"$out/sim-$k.log" ||
    { tail -5 "$out/sim-$k.log" >&2; echo "MISS run-failed: sim $name" >&3; exit 1; }
  figures "$name" sim "$out/sim-$k.jsonl" "$(jq -c '.summary.kv_policy // {}' "$out/sim-$k.summary.json")"
}

# live NAME FILE TB POLICY_FLAGS...: one live run -> figures line (with "cached_differs" from sim).
live() {
  local name=$1 file=$2 tb=$3 rport ep hints
  shift 3
  # The engines' lease bound and tiers are the mocker's flags; the rest of the policy flags are the router's.
  local rf=() engine=()
  while (($#)); do
    case $1 in
      --kv-hint-max-ttl-s | --num-g2-blocks) engine+=("$1" "$2") ;;
      --kv-bytes-per-token)  # the engines' tiers, and demote-prefetch's copy time in the router
        engine+=("$1" "$2")
        [[ " ${rf[*]-} " != *" demote-prefetch "* ]] || rf+=("$1" "$2" --speedup-ratio "$speed") ;;
      *) rf+=("$1" "$2") ;;
    esac
    shift 2
  done
  rm -f "$out/m.port" "$out/r.port"
  "$bin/dyn-mocker" --num-workers "$workers" --port 0 --port-file "$out/m.port" --block-size 64 \
    --speedup-ratio "$speed" --num-gpu-blocks-override "$g1" ${engine[@]+"${engine[@]}"} 2>"$out/mocker-$k.$r.log" &
  pids+=($!)
  wait_port "$out/m.port" >/dev/null
  mapfile -t ports <"$out/m.port"
  "$bin/dyn-route" serve --port 0 --port-file "$out/r.port" "${ports[@]/#/--worker=http://127.0.0.1:}" "${rflags[@]}" \
    --queue-size 100000 --tool-events-endpoint tcp://127.0.0.1:0 ${rf[@]+"${rf[@]}"} 2>"$out/router-$k.$r.log" &
  pids+=($!)
  rport=$(wait_port "$out/r.port")
  for _ in $(seq 1 200); do curl -sf -o /dev/null "http://127.0.0.1:$rport/health" && break; sleep 0.05; done
  ep=$(curl -s "http://127.0.0.1:$rport/v1/tool_events" | jq -r .endpoint)
  timeout 1200 "$bin/dyn-replay" "$file" -u "http://127.0.0.1:$rport" --endpoint-type completions --streaming \
    --ignore-eos --block-size "$tb" --speedup "$speed" -m mock-model --no-progress --tool-events-endpoint "$ep" \
    -o "$out/live-$k.$r.jsonl" 2>"$out/replay-$k.$r.log" ||
    { tail -5 "$out/replay-$k.$r.log" >&2; echo "MISS run-failed: live $name" >&3; exit 1; }
  sleep 0.5  # the control-endpoint hints of the last responses are sent off the request path
  hints=$(curl -s "http://127.0.0.1:$rport/metrics" |
    sed -n -e 's/^dyn_kv_policy_hints_total{policy="\([^"]*\)",action_type="kv\.\([^"]*\)".*outcome="\([^"]*\)"} \([0-9]*\)$/\1\/\2\/\3 \4/p' \
      -e 's/^dyn_kv_policy_\(tool_waits_not_demoted\|prefetches_cancelled\)_total \([0-9]*\)$/\1 \2/p' |
    jq -R -s -c 'split("\n") | map(select(length > 0) | split(" ") | {key: .[0], value: (.[1] | tonumber)} | select(.value > 0))
      | group_by(.key) | map({key: .[0].key, value: (map(.value) | add)}) | from_entries')
  stop_all
  figures "$name" live "$out/live-$k.$r.jsonl" "$hints" | jq -c --slurpfile s "$out/sim-$k.jsonl" --slurpfile l "$out/live-$k.$r.jsonl" '
    def by_id(rows): rows | map(select(.event_type == "request_end") | {key: .request.request_id, value: .request}) | from_entries;
    by_id($s) as $a | by_id($l) as $b
    | . + {cached_differs: ([$a | keys[] | select(($a[.].cached_tokens // 0) != ($b[.].cached_tokens // 0))] | length)}'
}

median() {  # figures lines of the live repeats -> one line, mode "live", each number their median
  jq -s -c 'def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    . as $all | $all[0] | .mode = "live"
    | reduce ("ok", "rows", "input", "cached", "hit", "prefilled", "ttft_p50", "ttft_p90", "session_s", "cached_differs") as $p
        (.; .[$p] = ([$all[] | .[$p]] | med))'
}

row() {  # prints one figures line as a table row
  jq -r 'def pad(n): tostring | " " * (n - length) + .;
    "\((.run + " " + .mode) | .[0:30] | . + " " * (30 - length)) " + (.ok | pad(4)) + (.hit * 10000 | round / 100 | pad(8))
    + (.prefilled | pad(11)) + (.ttft_p50 | round | pad(10)) + (.ttft_p90 | round | pad(10)) + (.session_s * 10 | round / 10 | pad(10))
    + "  " + (.hints | tojson) + (if .cached_differs then "  \(.cached_differs) cached differ" else "" end)'
}

echo "live: 1 dyn-mocker --num-workers $workers behind dyn-route serve --kv-policy, tool events from the client; sim: dyn-replay --sim --workers $workers"
echo "both: --speedup-ratio $speed --speedup $speed; time settings / $speed (affinity TTL $ttl s); working set ${size}x the GPU KV"
: >"$out/all.jsonl"
k=0  # run number: sim-K.jsonl and live-K.REPEAT.jsonl stay in $out with KEEP=DIR
for wname in "${wls[@]}"; do
  one=${wfile[$wname]:?unknown workload $wname (weka, agent)} tb=${wtb[$wname]}
  read -r ws1 big < <(workload_size "$one" "$tb")
  n=1
  while ((n * ws1 / 8 / workers < big)); do n=$((n + 1)); done
  file="$out/$wname.jsonl"
  copies "$one" "$n" | spread "$((spread_ms * speed))" >"$file"
  ws=$((n * ws1)) g1=$((n * ws1 / size / workers))
  printf '== %s x %d copies, %dx: %s requests, working set %d blocks; %d workers x G1 %d\n' \
    "$wname" "$n" "$size" "$(wc -l <"$file")" "$ws" "$workers" "$g1"
  printf '%-30s %4s %7s %10s %9s %9s %9s  %s\n' run ok hit% prefilled ttft_p50 ttft_p90 session_s hints
  for pname in "${pols[@]}"; do
    mapfile -t pf < <(policy_flags "$pname"; tier_flags "$pname")
    name="$wname ${size}x $pname"
    k=$((k + 1))
    sim "$name" "$file" "$tb" ${pf[@]+"${pf[@]}"} >>"$out/all.jsonl"
    tail -1 "$out/all.jsonl" | row
    : >"$out/repeats.jsonl"
    for r in $(seq 1 "$repeat"); do
      live "$name" "$file" "$tb" ${pf[@]+"${pf[@]}"} >"$out/one.jsonl"
      jq -c --arg r "$r" '.mode = "live#" + $r' "$out/one.jsonl" | tee -a "$out/repeats.jsonl" | row
    done
    median <"$out/repeats.jsonl" >>"$out/all.jsonl"
    tail -1 "$out/all.jsonl" | row
  done
done

# The checks: each run's live medians against its sim twin, and each policy's effect on the hit.
jq -s -r '
  def rel(a; b): if b == 0 then (if a == 0 then 0 else 1 end) else (a - b) / b end;
  def pct(x): "\(x * 1000 | round / 10) %";
  (map({key: "\(.run)|\(.mode)", value: .}) | from_entries) as $by
  | group_by(.run)[] | (map(select(.mode == "live"))[0]) as $l | (map(select(.mode == "sim"))[0]) as $s
  | ($s.run | split(" ")) as $w | (if $w[2] == "demote-prefetch" then "none+G2" else "none" end) as $base
  | $by["\($w[0]) \($w[1]) \($base)|sim"] as $sn | $by["\($w[0]) \($w[1]) \($base)|live"] as $ln
  | ([{what: "hit", d: rel($l.hit; $s.hit), ok: (rel($l.hit; $s.hit) | fabs <= 0.05)},
     {what: "prefilled", d: rel($l.prefilled; $s.prefilled), ok: (rel($l.prefilled; $s.prefilled) | fabs <= 0.05)}]
  + [{what: "requests ok \($l.ok)/\($l.rows) vs \($s.ok)/\($s.rows)", ok: ($l.ok == $s.ok and $l.rows == $s.rows)}]
  + (if $w[2] == $base or $sn == null or $ln == null then [] else
      [($s.hit - $sn.hit) as $ds | ($l.hit - $ln.hit) as $dl
       | {what: "effect on the hit live \($dl * 1000 | round / 10) pt vs sim \($ds * 1000 | round / 10) pt",
          ok: (($ds | fabs) < 0.01 or ($ds * $dl > 0))}] end)) as $c
  | "check \($s.run): " + ($c | map("\(.what)\(if .d != null then " " + pct(.d) else "" end) \(if .ok then "ok" else "miss" end)") | join(", "))' \
  "$out/all.jsonl" | tee "$out/checks"
if grep -q ' miss' "$out/checks"; then echo "MISS live-within-5pct-of-sim"; exit 1; fi
echo PASS
