#!/usr/bin/env bash
# User story: pipe traces through shell pipelines. Produces a gzip trace of request_end rows (here
# from the simulated cluster, exactly as dyn-route serve would write them), then slices it with
# standard pipes: cat (gzip, envelopes), filter (event, where, fields), bind (affinity check), and
# bench (AIPerf metrics).
# Usage: examples/pipeline.sh [WORKLOAD]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/tools.sh" dyn-replay dyn-trace dyn-bind dyn-bench
workload="${1:-$here/../data/quickstart/conversation-slice.jsonl}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# 1. A trace: two workers, kv routing with hard session affinity, gzip like a router's segments.
dyn-replay "$workload" --sim --workers 2 --seed 1 --router-mode kv \
  --router-session-affinity-ttl-secs 300 2>/dev/null | gzip >"$tmp/trace.000000.jsonl.gz"

# 2. Which requests hit the prefix cache? (dotted paths, numbers compared as numbers)
echo "requests with a prefix cache hit:"
dyn-trace cat "$tmp"/trace.*.jsonl.gz |
  dyn-trace filter --event request_end --where 'request.cached_tokens>0' | wc -l

# 3. A per-turn table of one session: which worker served each turn and what it reused.
session=$(dyn-trace cat "$tmp"/trace.*.jsonl.gz | head -1 | jq -r .agent_context.session_id)
echo "session $session, turn by turn:"
dyn-trace cat "$tmp"/trace.*.jsonl.gz |
  dyn-trace filter --session "$session" \
    --fields 'request=request.request_id,worker=request.worker.decode_worker_id,input=request.input_tokens,cached=request.cached_tokens' \
    --format tsv

# 4. Did every session keep its worker while its binding should have held? (exit 1 if not)
dyn-trace cat "$tmp"/trace.*.jsonl.gz | dyn-bind check --ttl-secs 300 && echo "affinity: no violations"

# 5. AIPerf metrics for the whole run.
dyn-trace cat "$tmp"/trace.*.jsonl.gz | dyn-bench report --format json |
  jq -c '{ttft_p50_ms: .time_to_first_token.p50, hit_pct: .prompt_cache_hit_rate.avg}'
