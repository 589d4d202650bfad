#!/usr/bin/env bash
# Benchmark (issue 16): the live data plane against the proxy people already run. One dyn-mocker
# is reached four ways, interleaved round by round (A B C D A B C D ...) so a shared machine's
# load hits all alike, each path driven by bench/serve_load with CLIENTS streaming agent sessions
# (one growing conversation per client, x-session-id):
#   A direct to the mocker;
#   B nginx (Debian's; upstream keepalive, proxy_buffering off, HTTP/1.1 upstream);
#   C dyn-route serve, kv routing, hard session affinity, request tracing on;
#   D dyn-trace capture (tracing on).
# Each round runs every path twice:
#   saturated: clients send their next turn at once (closed loop): requests/s, and CPU seconds
#     per 1,000 requests of the proxy's processes (utime + stime from /proc, nginx's workers
#     included), with the mocker's own CPU per request from the direct runs;
#   paced: each client waits THINK_MS after every turn (an agent running its tools), so every
#     path offers the mocker the same load: TTFT p50 / p99 (the first content token) and the
#     first streamed chunk's latency. The mocker sends its first chunk (the role delta) with
#     the response headers, before any engine step, so that latency is the path's own: what a
#     proxy adds to it is what it adds to TTFT. TTFT itself also carries the engine's queue,
#     whose p50 moves by tens of ms between identical direct runs, too much to resolve the
#     goal's 1 ms; a closed loop's TTFT is set by how deep each path drives that queue (nginx's
#     "added" TTFT there is often negative). Both TTFTs are printed.
# Goals, for C and D against B (medians over the rounds): added paced TTFT p50 (first chunk) at
# most nginx's + 1 ms, saturated throughput at least 0.95x nginx's, CPU per request at most 1.5x
# nginx's. Then one saturated run at BIG streams (default 2,000) through nginx and dyn-route
# serve: errors, the router's peak thread count, p99 TTFT against nginx's. Prints PASS/MISS per
# goal; exits 1 on a MISS.
# Usage: bench/serve-ttft.sh [BUILD_DIR] [CLIENTS] [SECONDS] [ROUNDS]   env: BIG=2000 (0 = skip),
#   THINK_MS=1000
# VARIANT=decision-log (issue 55): instead, the decision log's overhead. Two dyn-route serve (kv,
# hard affinity, request tracing on) in front of the mocker, one with --router-decision-log (every
# decision logged) and one without, driven saturated in interleaved rounds (off on, on off, ...):
# goal router CPU per request with the log at most 1.05x without (medians over the rounds); the
# logged trace must hold one route_decision row per request_end row (joined by request id), the
# other none.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
n="${2:-256}"
secs="${3:-8}"
rounds="${4:-3}"
big="${BIG:-2000}"
think="${THINK_MS:-1000}"
bin="$build/bin"
load="$build/bench/serve_load"
variant="${VARIANT:-}"
if [[ -n "$variant" && "$variant" != decision-log ]]; then echo "VARIANT=$variant: only decision-log is known" >&2; exit 2; fi
if [[ -z "$variant" ]] && ! command -v nginx >/dev/null; then
  # The baseline comes from Debian, installed here when this runs as root.
  if [[ $EUID == 0 ]]; then apt-get install -y -qq nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx; }
  else echo "nginx is not installed (sudo apt-get install nginx)" >&2; exit 2; fi
fi
work="$(mktemp -d /tmp/dyn-bench-serve.XXXXXX)"
chmod 755 "$work"
source "$root/bench/servers.sh"
trap 'stop_all; rm -rf "$work"' EXIT

"$bin/dyn-mocker" --port 0 --port-file "$work/m.port" 2>"$work/m.err" &
pids+=($!)
m_pid=$!
m_url="http://127.0.0.1:$(wait_port "$work/m.port")"
# threads PID: the process's thread count now.
threads() { awk '$1 == "Threads:" {print $2}' /proc/"$1"/status; }
# run NAME URL PID CLIENTS [LOAD_ARGS...]: one timed load; appends {name, figures, cpu_s,
# mocker_cpu_s} to runs.jsonl.
run() {
  local c0 m0 out peak=0 t
  c0=$(cpu "$3")
  m0=$(cpu "$m_pid")
  "$load" "$2" "$4" "$secs" --sessions "${@:5}" >"$work/out.json" 2>"$work/load.err" &
  local lp=$!
  while kill -0 "$lp" 2>/dev/null; do
    t=$(threads "$3" 2>/dev/null || echo 0)
    ((t > peak)) && peak=$t
    sleep 0.2
  done
  wait "$lp" || true
  local hz
  hz=$(getconf CLK_TCK)
  jq -c --arg name "$1" --argjson cpu "$(( $(cpu "$3") - c0 ))" --argjson mcpu "$(( $(cpu "$m_pid") - m0 ))" \
    --argjson hz "$hz" --argjson peak "$peak" --argjson clients "$4" \
    '. + {name: $name, clients: $clients, cpu_s: ($cpu / $hz), mocker_cpu_s: ($mcpu / $hz), peak_threads: $peak}' \
    "$work/out.json" >>"$work/runs.jsonl"
}
if [[ "$variant" == decision-log ]]; then
  serve_args=(--worker "$m_url" --router-mode kv --router-session-affinity-ttl-secs 300
    --router-session-affinity-mode hard --request-trace --request-trace-file-format jsonl)
  "$bin/dyn-route" serve "${serve_args[@]}" --port 0 --port-file "$work/off.port" \
    --request-trace-file-path "$work/off.jsonl" 2>"$work/off.err" &
  pids+=($!)
  off_pid=$!
  "$bin/dyn-route" serve "${serve_args[@]}" --router-decision-log --port 0 --port-file "$work/on.port" \
    --request-trace-file-path "$work/on.jsonl" 2>"$work/on.err" &
  pids+=($!)
  on_pid=$!
  off_url="http://127.0.0.1:$(wait_port "$work/off.port")"
  on_url="http://127.0.0.1:$(wait_port "$work/on.port")"
  for u in "$off_url" "$on_url"; do "$load" "$u" 32 1 --sessions >/dev/null 2>&1 || true; done
  for i in $(seq 1 "$rounds"); do
    if ((i % 2)); then
      run log-off "$off_url" "$off_pid" "$n"; run log-on "$on_url" "$on_pid" "$n"
    else
      run log-on "$on_url" "$on_pid" "$n"; run log-off "$off_url" "$off_pid" "$n"
    fi
  done
  stop_all
  python3 - "$work/runs.jsonl" "$n" "$work/off.jsonl" "$work/on.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
def per_req(name):
    return [1000 * r["cpu_s"] / max(r["requests_ok"], 1) for r in runs if r["name"] == name]
def rows(path):
    ends, decisions = set(), set()
    for line in open(path):
        row = json.loads(line)
        rid = row.get("request", {}).get("request_id")
        if row.get("event_type") == "request_end": ends.add(rid)
        elif row.get("event_type") == "route_decision": decisions.add(rid)
    return ends, decisions
off, on = per_req("log-off"), per_req("log-on")
moff, mon = statistics.median(off), statistics.median(on)
errors = sum(r["errors"] for r in runs)
ok_req = {name: sum(r["requests_ok"] for r in runs if r["name"] == name) for name in ("log-off", "log-on")}
print(f"{n} streaming clients, saturated, {len(off)} interleaved rounds per side")
print(f"{'side':8} {'CPU s/1k req (rounds)':40} {'median':>8} {'requests':>9}")
for name, v, m in (("log-off", off, moff), ("log-on", on, mon)):
    print(f"{name:8} {' '.join(f'{x:.3f}' for x in v):40} {m:8.3f} {ok_req[name]:9d}")
e_off, d_off = rows(sys.argv[3])
e_on, d_on = rows(sys.argv[4])
ratio = mon / moff if moff > 0 else float("inf")
checks = [
    (f"router CPU/request with every decision logged {ratio:.3f}x without (<= 1.05, medians)", ratio <= 1.05),
    (f"logged trace: {len(e_on)} request_end, {len(d_on)} route_decision, {len(e_on - d_on)} without a decision",
     len(e_on) > 0 and e_on <= d_on),
    (f"unlogged trace: {len(d_off)} route_decision rows", len(d_off) == 0 and len(e_off) > 0),
    (f"errors {errors}", errors == 0),
]
ok = True
for text, good in checks:
    ok = ok and good
    print(f"{text}: {'PASS' if good else 'MISS'}")
print("PASS" if ok else "MISS decision log overhead")
sys.exit(0 if ok else 1)
PY
  exit $?
fi
"$bin/dyn-route" serve --worker "$m_url" --port 0 --port-file "$work/r.port" --router-mode kv \
  --router-session-affinity-ttl-secs 300 --router-session-affinity-mode hard \
  --request-trace --request-trace-file-path "$work/rtrace" 2>"$work/r.err" &
pids+=($!)
r_pid=$!
r_url="http://127.0.0.1:$(wait_port "$work/r.port")"
"$bin/dyn-trace" capture --upstream "$m_url/v1" --port 0 --port-file "$work/c.port" \
  --request-trace-file-path "$work/ctrace" 2>"$work/c.err" &
pids+=($!)
c_pid=$!
c_url="http://127.0.0.1:$(wait_port "$work/c.port")"
start_nginx "$work" "${m_url##*:}"

# Warm every path (connections, the mocker's cache, the router's bindings).
for u in "$m_url" "$n_url" "$r_url" "$c_url"; do "$load" "$u" 32 1 --sessions >/dev/null 2>&1 || true; done
for _ in $(seq 1 "$rounds"); do
  run direct "$m_url" "$m_pid" "$n"
  run nginx "$n_url" "$n_pid" "$n"
  run dyn-route "$r_url" "$r_pid" "$n"
  run capture "$c_url" "$c_pid" "$n"
  run direct-paced "$m_url" "$m_pid" "$n" --think-ms "$think"
  run nginx-paced "$n_url" "$n_pid" "$n" --think-ms "$think"
  run dyn-route-paced "$r_url" "$r_pid" "$n" --think-ms "$think"
  run capture-paced "$c_url" "$c_pid" "$n" --think-ms "$think"
done
if ((big > 0)); then
  run nginx-big "$n_url" "$n_pid" "$big"
  run dyn-route-big "$r_url" "$r_pid" "$big"
fi

python3 - "$work/runs.jsonl" "$n" "$big" "$think" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
n, big, think = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def med(name, key):
    return statistics.median(r[key] for r in runs if r["name"] == name)
def tot(name, key):
    return sum(r[key] for r in runs if r["name"] == name)
paths = ["direct", "nginx", "dyn-route", "capture"]
f = {}
for p in paths:
    q = p + "-paced"
    f[p] = {"p50": med(p, "ttft_p50_ms"), "p99": med(p, "ttft_p99_ms"), "rps": med(p, "requests_per_s"),
            "pp50": med(q, "ttft_p50_ms"), "pp99": med(q, "ttft_p99_ms"), "prps": med(q, "requests_per_s"),
            "fc50": med(q, "first_chunk_p50_ms"), "fc99": med(q, "first_chunk_p99_ms"),
            "errors": tot(p, "errors") + tot(q, "errors"), "ok": tot(p, "requests_ok"),
            "cpu_per_k": 1000 * tot(p, "cpu_s") / max(tot(p, "requests_ok"), 1)}
mocker_per_k = 1000 * tot("direct", "mocker_cpu_s") / max(tot("direct", "requests_ok"), 1)
d = f["direct"]
print(f"{n} streaming clients, medians of {sum(1 for r in runs if r['name'] == 'direct')} rounds")
print(f"paced (each client thinks {think} ms between turns: equal offered load on every path)")
print(f"{'path':10} {'TTFT p50':>9} {'p99':>8} {'1st chunk p50':>13} {'p99':>8} {'added p50':>9} {'added p99':>9} {'req/s':>8}")
for p in paths:
    v = f[p]
    print(f"{p:10} {v['pp50']:9.2f} {v['pp99']:8.2f} {v['fc50']:13.2f} {v['fc99']:8.2f} {v['fc50'] - d['fc50']:9.2f} "
          f"{v['fc99'] - d['fc99']:9.2f} {v['prps']:8.1f}")
print("saturated (closed loop: the next turn at once)")
print(f"{'path':10} {'TTFT p50':>9} {'p99':>8} {'req/s':>8} {'x direct':>8} {'errors':>6} {'CPU s/1k req':>12}")
for p in paths:
    v = f[p]
    cpu = "" if p == "direct" else f"{v['cpu_per_k']:12.3f}"
    print(f"{p:10} {v['p50']:9.2f} {v['p99']:8.2f} {v['rps']:8.1f} {v['rps'] / d['rps']:8.3f} {v['errors']:6d} {cpu}")
print(f"dyn-mocker itself: {mocker_per_k:.3f} CPU s per 1,000 requests (direct runs)")
ok = True
ng = f["nginx"]
for p in ("dyn-route", "capture"):
    v = f[p]
    add, nadd = v["fc50"] - d["fc50"], ng["fc50"] - d["fc50"]
    checks = [
        (f"added TTFT p50 {add:.2f} ms vs nginx {nadd:.2f} + 1 ms (paced, first chunk)", add <= nadd + 1),
        (f"throughput {v['rps'] / ng['rps']:.3f}x nginx (>= 0.95, saturated)", v["rps"] >= 0.95 * ng["rps"]),
        (f"CPU/request {v['cpu_per_k'] / ng['cpu_per_k']:.2f}x nginx (<= 1.5)", v["cpu_per_k"] <= 1.5 * ng["cpu_per_k"]),
        (f"errors {v['errors']}", v["errors"] == 0),
    ]
    for text, good in checks:
        ok = ok and good
        print(f"{p}: {text}: {'PASS' if good else 'MISS'}")
if big:
    b = {r["name"]: r for r in runs if r["name"].endswith("-big")}
    nb, rb = b["nginx-big"], b["dyn-route-big"]
    good = rb["errors"] == 0 and rb["peak_threads"] < big / 2
    ok = ok and good
    print(f"{big} streams: nginx p99 TTFT {nb['ttft_p99_ms']:.1f} ms, {nb['errors']} errors; dyn-route p99 "
          f"{rb['ttft_p99_ms']:.1f} ms ({rb['ttft_p99_ms'] / max(nb['ttft_p99_ms'], 1e-9):.2f}x), {rb['errors']} errors, "
          f"peak {rb['peak_threads']} threads: {'PASS' if good else 'MISS'} (no errors, threads well below streams)")
print("PASS" if ok else "MISS")
sys.exit(0 if ok else 1)
PY
