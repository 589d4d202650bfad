#!/usr/bin/env bash
# Benchmark (issue 54): agent-sized prompts through the router. Agent sessions whose context grows
# from FROM_TOKENS (20k) to TO_TOKENS (150k) SPEC 4.2 tokens over TURNS turns (bodies up to about
# 600 KB of text, each turn the previous turn's prompt and reply plus new content, so a session's
# prefix repeats: bench/serve_load --agent-prompts) reach one dyn-mocker three ways:
#   direct to the mocker;
#   nginx (Debian's, the configuration serve-ttft.sh uses: bench/servers.sh nginx_conf);
#   dyn-route serve, kv routing, hard session affinity, request tracing on.
# At each concurrency in CONCS (1, 64 and 256 sessions) every path runs once a round, the paths'
# order rotating round by round so a shared machine's load hits all alike; each client waits
# THINK_MS after every turn (an agent running its tools), so every path offers the mocker the
# same load. Per run: the first streamed chunk's latency p50/p99 (the mocker sends it with the
# response headers, before any engine step: what a proxy adds to it is its own cost of reading,
# routing and forwarding the prompt), CPU per request from /proc (the nanoseconds every thread
# of the router, of nginx's master and workers, of the mocker for direct ran: schedstat) and
# memory per in-flight request (peak RSS during the run less the process's RSS before any load,
# over the sessions in flight).
# Goals at every concurrency, medians over the rounds: the router's added first-chunk p50 at
# most nginx's + 1 ms, its added p99 at most nginx's + 5 ms, its CPU per request at most 1.5x
# nginx's, no errors. Outputs compared: every request_end row of the router's trace has the
# prompt length the router computed (request.replay.input_length) equal to the engine's own
# count (input_tokens: the mocker renders and counts the body itself), and the trace holds one
# row per answered request. One verdict line; exit 1 on a MISS.
# Usage: bench/serve-agent-prompts.sh [BUILD_DIR]   env: CONCS="1 64 256" SECONDS_PER_RUN=10
#   ROUNDS=3 FROM_TOKENS=20000 TO_TOKENS=150000 TURNS=14 THINK_MS=1000 MAX_TOKENS=16
#   SPEEDUP=20 (the mocker's --speedup-ratio: its engine time, not the paths', sets the pace)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
concs="${CONCS:-1 64 256}"
secs="${SECONDS_PER_RUN:-10}"
rounds="${ROUNDS:-3}"
from="${FROM_TOKENS:-20000}"
to="${TO_TOKENS:-150000}"
turns="${TURNS:-14}"
think="${THINK_MS:-1000}"
max_tokens="${MAX_TOKENS:-16}"
speedup="${SPEEDUP:-20}"
bin="$build/bin"
load="$build/bench/serve_load"
for x in "$bin/dyn-route" "$bin/dyn-mocker" "$load"; do
  [[ -x "$x" ]] || { echo "$x is not built (cmake --build $build --target dyn-route dyn-mocker serve_load)" >&2; exit 2; }
done
if ! command -v nginx >/dev/null; then
  if [[ $EUID == 0 ]]; then apt-get install -y -qq nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx; }
  else echo "nginx is not installed (sudo apt-get install nginx)" >&2; exit 2; fi
fi
work="$(mktemp -d /tmp/dyn-bench-agent.XXXXXX)"
chmod 755 "$work"
source "$root/bench/servers.sh"
trap 'stop_all; rm -rf "$work"' EXIT
# Room for every session's context (256 x 150k tokens at 64 a block) so the engine's prefix cache,
# not eviction, decides what a turn recomputes.
"$bin/dyn-mocker" --port 0 --port-file "$work/m.port" --speedup-ratio "$speedup" \
  --num-gpu-blocks-override 700000 2>"$work/m.err" &
pids+=($!)
m_pid=$!
m_url="http://127.0.0.1:$(wait_port "$work/m.port")"
"$bin/dyn-route" serve --worker "$m_url" --port 0 --port-file "$work/r.port" --router-mode kv \
  --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard \
  --request-trace --request-trace-file-format jsonl --request-trace-file-path "$work/rtrace.jsonl" 2>"$work/r.err" &
pids+=($!)
r_pid=$!
r_url="http://127.0.0.1:$(wait_port "$work/r.port")"
start_nginx "$work" "${m_url##*:}"
declare -A base_rss=([direct]=$(rss "$m_pid") [nginx]=$(rss "$n_pid") [dyn-route]=$(rss "$r_pid"))

# run PATH URL PID CLIENTS: one paced load; appends its figures to runs.jsonl.
run() {
  local peak=0 r
  cpu_snap "$3" >"$work/cpu0"
  "$load" "$2" "$4" "$secs" --agent-prompts "$from" "$to" "$turns" --think-ms "$think" \
    --max-tokens "$max_tokens" >"$work/out.json" 2>"$work/load.err" &
  local lp=$!
  while kill -0 "$lp" 2>/dev/null; do
    r=$(rss "$3")
    ((r > peak)) && peak=$r
    sleep 0.1
  done
  wait "$lp" || true
  [[ -s "$work/out.json" ]] || { echo "serve_load against $1 printed nothing:" >&2; cat "$work/load.err" >&2; exit 4; }
  cpu_snap "$3" >"$work/cpu1"
  jq -c --arg name "$1" --argjson cpu "$(cpu_between "$work/cpu0" "$work/cpu1")" \
    --argjson peak "$peak" --argjson base "${base_rss[$1]}" --argjson clients "$4" \
    '. + {name: $name, clients: $clients, cpu_s: $cpu, rss_peak_kib: $peak, rss_base_kib: $base}' \
    "$work/out.json" >>"$work/runs.jsonl"
}
# Warm every path once (connections, code, the router's parser buffers) at the smallest size.
for u in "$m_url" "$n_url" "$r_url"; do
  "$load" "$u" 4 1 --agent-prompts "$from" "$from" 1 --max-tokens "$max_tokens" >/dev/null 2>&1 || true
done
paths=(direct nginx dyn-route)
declare -A url=([direct]=$m_url [nginx]=$n_url [dyn-route]=$r_url) pid=([direct]=$m_pid [nginx]=$n_pid [dyn-route]=$r_pid)
for i in $(seq 1 "$rounds"); do
  for c in $concs; do
    for k in 0 1 2; do
      p=${paths[$(((i + k) % 3))]}
      run "$p" "${url[$p]}" "${pid[$p]}" "$c"
    done
  done
done
stop_all

python3 - "$work/runs.jsonl" "$work/rtrace.jsonl" "$from" "$to" "$turns" "$think" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
frm, to, turns, think = sys.argv[3:7]
def sel(name, c):
    return [r for r in runs if r["name"] == name and r["clients"] == c]
def med(name, c, f):
    return statistics.median(f(r) for r in sel(name, c))
def cpu_ms(r):
    return 1000 * r["cpu_s"] / max(r["requests_ok"], 1)
def kib_per(r):
    return max(r["rss_peak_kib"] - r["rss_base_kib"], 0) / r["clients"]
ok = True
print(f"agent sessions growing {frm} -> {to} tokens over {turns} turns, {think} ms think time; "
      f"medians of {len(sel('direct', runs[0]['clients']))} interleaved rounds")
print(f"{'sessions':>8} {'path':10} {'1st chunk p50':>13} {'p99':>8} {'added p50':>9} {'added p99':>9} "
      f"{'req/s':>7} {'CPU ms/req':>10} {'KiB/in-flight':>13} {'errors':>6}")
for c in sorted({r["clients"] for r in runs}):
    f = {}
    for p in ("direct", "nginx", "dyn-route"):
        f[p] = {"p50": med(p, c, lambda r: r["first_chunk_p50_ms"]), "p99": med(p, c, lambda r: r["first_chunk_p99_ms"]),
                "rps": med(p, c, lambda r: r["requests_per_s"]), "cpu": med(p, c, cpu_ms), "mem": med(p, c, kib_per),
                "errors": sum(r["errors"] for r in sel(p, c))}
    d = f["direct"]
    for p, v in f.items():
        v["a50"], v["a99"] = v["p50"] - d["p50"], v["p99"] - d["p99"]
        added = "" if p == "direct" else f"{v['a50']:9.2f} {v['a99']:9.2f}"
        print(f"{c:8d} {p:10} {v['p50']:13.2f} {v['p99']:8.2f} {added:>19} {v['rps']:7.1f} {v['cpu']:10.2f} "
              f"{v['mem']:13.0f} {v['errors']:6d}")
    n, r = f["nginx"], f["dyn-route"]
    checks = [
        (f"added first-chunk p50 {r['a50']:.2f} ms vs nginx {n['a50']:.2f} + 1 ms", r["a50"] <= n["a50"] + 1),
        (f"added first-chunk p99 {r['a99']:.2f} ms vs nginx {n['a99']:.2f} + 5 ms", r["a99"] <= n["a99"] + 5),
        (f"CPU/request {r['cpu'] / n['cpu']:.2f}x nginx (<= 1.5)" if n["cpu"] > 0 else
         "CPU/request: nginx ran no CPU time (raise SECONDS_PER_RUN)", 0 < n["cpu"] and r["cpu"] <= 1.5 * n["cpu"]),
        (f"errors {sum(v['errors'] for v in f.values())}", all(v["errors"] == 0 for v in f.values())),
    ]
    for text, good in checks:
        ok = ok and good
        print(f"  {c} sessions: {text}: {'PASS' if good else 'MISS'}")
# The router's own prompt length against the engine's, row by row.
rows = [json.loads(l) for l in open(sys.argv[2])]
ends = [x for x in rows if x.get("event_type") == "request_end" and x.get("dyn", {}).get("status") == "ok"]
served = sum(r["requests_ok"] for r in runs if r["name"] == "dyn-route")
bad = [x for x in ends if x["request"].get("replay", {}).get("input_length") != x["request"].get("input_tokens")]
good = len(ends) >= served > 0 and not bad
ok = ok and good
print(f"router trace: {len(ends)} request_end rows for {served} timed requests (and the warm-up), "
      f"{len(bad)} whose prompt length differs from the engine's: {'PASS' if good else 'MISS'}")
print("PASS" if ok else "MISS agent prompts through the router")
sys.exit(0 if ok else 1)
PY
