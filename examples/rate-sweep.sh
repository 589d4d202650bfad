#!/usr/bin/env bash
# User story: the routing experiment people script most, a load sweep. Replays one workload through
# the simulated cluster at several request rates for round-robin, kv and kv + session affinity,
# prints TTFT p90 and the prompt-cache hit rate of each (policy, rate), and draws both against the
# rate, one line per policy, in one self-contained HTML page (dyn-bench plot --group --sweep).
# Usage: examples/rate-sweep.sh [WORKLOAD] [RATES] [OUT.html]
#   WORKLOAD: default a seeded agent workload from `dyn-trace generate` (120 sessions of growing
#             contexts with tool gaps and subagents, 64-token blocks) on a cluster whose KV it
#             outgrows, so placement matters
#   RATES:    request rates in req/s (default "0.25 0.5 1 2 4"): the arrivals, Poisson and seeded, of
#             rows with nothing to wait for (a session's first turn); later turns follow their
#             session's previous turn and delay, as in the live replay (dyn-replay --request-rate)
#   OUT.html: the plot (default rate-sweep.html)
# Every run uses the same seed, so the table and the page are reproducible.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/tools.sh" dyn-trace dyn-replay dyn-bench
read -r -a rates <<<"${2:-0.25 0.5 1 2 4}"
html="${3:-rate-sweep.html}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [[ -n "${1:-}" ]]; then
  workload="$1"
else
  workload="$tmp/agents.jsonl"
  dyn-trace generate --seed 1 --sessions 120 --block-size 64 --turns-min 4 --turns-max 10 \
    --tool-output-tokens 2000 --tool-gap-ms 5000 --subagent-probability 0.1 --wait-for -o "$workload"
fi
cluster=(--workers 4 --block-size 64 --kv-cache-block-size 64 --num-gpu-blocks-override 2048 --seed 1)

files=(); labels=(); groups=(); xs=()
printf '%-12s %8s %10s %9s %8s\n' policy "req/s" "TTFT p90" "hit %" requests
for policy in round-robin kv kv+affinity; do
  case $policy in
    round-robin) routing=(--router-mode round-robin) ;;
    kv) routing=(--router-mode kv) ;;
    kv+affinity) routing=(--router-mode kv --router-session-affinity-ttl-secs 600) ;;
  esac
  for rate in "${rates[@]}"; do
    rows="$tmp/$policy-$rate.jsonl"
    dyn-replay --sim "$workload" "${cluster[@]}" "${routing[@]}" --request-rate "$rate" \
      --request-rate-mode poisson -o "$rows" 2>/dev/null
    dyn-bench report "$rows" --format json --kv-block-size 64 |
      jq -r --arg p "$policy" --arg r "$rate" \
        '[$p, $r, .time_to_first_token.p90, .prompt_cache_hit_rate.avg, .request_count.avg] | @tsv' |
      awk -F'\t' '{ printf "%-12s %8s %10.1f %9.2f %8d\n", $1, $2, $3, $4, $5 }'
    files+=("$rows"); labels+=("$policy @ $rate req/s"); groups+=("$policy"); xs+=("$rate")
  done
done
label_flags=(); group_flags=()
for i in "${!files[@]}"; do label_flags+=(--label "${labels[$i]}"); group_flags+=(--group "${groups[$i]}"); done
dyn-bench plot "${files[@]}" "${label_flags[@]}" "${group_flags[@]}" --title "Request-rate sweep" \
  --sweep "request rate (req/s)=$(IFS=,; echo "${xs[*]}")" -o "$html"
echo "plot: $html (TTFT p90 and hit rate against the request rate, one line per policy)"
