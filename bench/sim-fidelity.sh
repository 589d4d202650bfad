#!/usr/bin/env bash
# Benchmark: fidelity of the simulator against the live engine. The same small workload (40 rows
# of the Mooncake conversation trace, re-timed 400 ms apart, outputs capped at 40 tokens) runs
# through one live dyn-mocker (speedup 2) with a minimal streaming client (python3 stdlib; the
# project's live dyn-replay was not available when this was written) and through
# dyn-replay --sim --workers 1 with the same engine flags. Prints mean TTFT, mean latency and total
# cached tokens of both and their differences (goals: within 5 %, identical cached tokens).
# Prompts are synthetic per SPEC 4.3 (each hash id = exactly 512 tokens of its own text) and sent
# to /v1/completions, whose prompt is tokenized as is, so live blocks align with the simulator's.
# Usage: bench/sim-fidelity.sh [BUILD_DIR]
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
work="$(mktemp -d /tmp/dyn-bench-fid.XXXXXX)"
speed=2
{ gzip -dc "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" 2>/dev/null || true; } | head -40 \
  | jq -c --argjson n 0 '. as $r | {timestamp: 0, input_length, output_length: ([.output_length, 40] | min), hash_ids}' \
  | awk '{ sub(/"timestamp":0/, "\"timestamp\":" (NR - 1) * 400); print }' > "$work/w.jsonl"
"$bin/dyn-mocker" --port 0 --port-file "$work/port" --speedup-ratio $speed 2>"$work/mocker.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
python3 - "$work/w.jsonl" "$(cat "$work/port")" > "$work/live.jsonl" <<'PY'
import http.client, json, sys, threading, time
rows = [json.loads(l) for l in open(sys.argv[1])]
port = int(sys.argv[2])
def block(h):  # SPEC 4.3 shape: 2048 printable bytes per id, starting with the id
    head = "%x:" % h
    body = "".join(chr(33 + (h * 7 + i * 13) % 90) for i in range(2048 - len(head)))
    return head + body
res = [None] * len(rows)
t0 = time.monotonic() + 0.5
def run(i, r):
    prompt = "".join(block(h) for h in r["hash_ids"])[: 4 * r["input_length"]]
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": r["output_length"], "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    time.sleep(max(0, t0 + r["timestamp"] / 1000.0 - time.monotonic()))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.monotonic()
    c.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    resp = c.getresponse()
    first = last = None; usage = None; buf = b""
    while True:
        line = resp.readline()
        if not line: break
        if not line.startswith(b"data: "): continue
        d = line[6:].strip()
        if d == b"[DONE]": break
        j = json.loads(d)
        if j.get("usage"): usage = j["usage"]
        if j.get("choices") and j["choices"][0].get("text"):
            now = time.monotonic()
            first = first or now
            last = now
    res[i] = {"ttft_ms": (first - start) * 1000, "latency_ms": (last - start) * 1000,
              "cached": usage["prompt_tokens_details"]["cached_tokens"], "out": usage["completion_tokens"]}
ts = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(rows)]
for t in ts: t.start()
for t in ts: t.join()
for r in res: print(json.dumps(r))
PY
"$bin/dyn-replay" "$work/w.jsonl" --sim --workers 1 --speedup-ratio $speed > "$work/sim.jsonl" 2>/dev/null
jq -s '{ttft: (map(.ttft_ms) | add / length), lat: (map(.latency_ms) | add / length), cached: (map(.cached) | add)}' -c "$work/live.jsonl" > "$work/live.sum"
jq -s '{ttft: (map(.request.ttft_ms) | add / length), lat: (map(.request.total_time_ms) | add / length), cached: (map(.request.cached_tokens) | add)}' -c "$work/sim.jsonl" > "$work/sim.sum"
jq -rn --slurpfile l "$work/live.sum" --slurpfile s "$work/sim.sum" '$l[0] as $l | $s[0] as $s |
  "requests 40, speedup \(2)",
  "mean TTFT     live \($l.ttft*100|round/100) ms  sim \($s.ttft*100|round/100) ms  diff \((($l.ttft-$s.ttft)/$s.ttft*10000|round)/100) %",
  "mean latency  live \($l.lat*100|round/100) ms  sim \($s.lat*100|round/100) ms  diff \((($l.lat-$s.lat)/$s.lat*10000|round)/100) %",
  "cached tokens live \($l.cached)  sim \($s.cached)  \(if $l.cached == $s.cached then "identical" else "DIFFERENT" end)"'
