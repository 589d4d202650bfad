#!/usr/bin/env bash
# Hit rate of kv routing with hard session affinity against the yardsticks of issue 18, under
# each engine eviction policy (--kv-eviction lru | session, SPEC 8), in the simulator: the
# same requests with their timing and engine blocks through one pooled KV cache of the whole
# cluster under LRU, and under Belady's clairvoyant MIN (dyn-replay --sim --reference). Two
# workloads: the agent sessions of bench/admission-experiment.sh (48 sessions, 4 workers x 2,048
# blocks, working set 3.5x the cluster) and the sessionized Mooncake conversation trace (8 workers).
# Goals: kv + affinity at least 1.0x the pooled LRU cache; an eviction policy that closes at least
# half of the gap between pooled LRU and Belady ((run - pooled) / (Belady - pooled) >= 0.5).
# Prints PASS/MISS per goal and exits 1 on a MISS.
# Usage: bench/kv-eviction.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build}/bin"
[[ -x "$bin/dyn-replay" ]] || { echo "$0: no dyn-replay in $bin (build first: scripts/setup.sh, or give BUILD_DIR)" >&2; exit 2; }
tmp="$(mktemp -d /tmp/dyn-bench-evict.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
"$bin/dyn-trace" generate --seed 1 --block-size 64 --sessions 48 --session-rate 5 --turns-min 6 --turns-max 14 \
  --system-prompt-tokens 2048 --task-tokens 1024 --tool-output-tokens 2500 --output-tokens 300 \
  --tool-gap-ms 8000 --subagent-probability 0.1 --subagent-turns-min 2 --subagent-turns-max 5 \
  --max-context-tokens 60000 --wait-for -o "$tmp/agents.jsonl" 2>/dev/null
"$bin/dyn-trace" sessionize "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$tmp/mooncake.jsonl" 2>/dev/null
agents=(--block-size 64 --kv-cache-block-size 64 --workers 4 --num-gpu-blocks-override 2048
        --router-session-affinity-ttl-secs 3600)
mooncake=(--workers 8 --router-session-affinity-ttl-secs 300)
for w in agents mooncake; do
  for ev in lru session; do
    declare -n flags="$w"
    "$bin/dyn-replay" --sim "$tmp/$w.jsonl" "${flags[@]}" --router-mode kv --router-session-affinity-mode hard \
      --seed 1 --kv-eviction "$ev" --reference pooled --reference belady --summary "$tmp/$w-$ev.json" \
      -o /dev/null 2>"$tmp/$w-$ev.err" || { cat "$tmp/$w-$ev.err" >&2; exit 2; }
  done
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
ok = True
print(f"{'workload':9} {'eviction':8} | {'hit %':>6} {'pooled LRU %':>12} {'Belady %':>8} | {'x pooled':>8} {'gap closed':>10}")
for w in ("agents", "mooncake"):
    for ev in ("lru", "session"):
        s = json.load(open(f"{tmp}/{w}-{ev}.json"))["summary"]
        hit, pooled, belady = s["prompt_cache_hit_pct"], s["references"]["pooled"]["hit_pct"], s["references"]["belady"]["hit_pct"]
        closed = (hit - pooled) / (belady - pooled) if belady > pooled else 0.0
        print(f"{w:9} {ev:8} | {hit:6.2f} {pooled:12.2f} {belady:8.2f} | {hit / pooled:8.3f} {closed:10.2f}")
        if ev == "session":
            for text, good in ((f"{w}: kv + affinity {hit / pooled:.3f}x pooled LRU (goal >= 1.0)", hit >= pooled),
                               (f"{w}: session eviction closes {closed:.2f} of the LRU-Belady gap (goal >= 0.5)", closed >= 0.5)):
                ok = ok and good
                print(f"  {text}: {'PASS' if good else 'MISS'}")
sys.exit(0 if ok else 1)
PY
