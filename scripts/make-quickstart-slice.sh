#!/usr/bin/env bash
# Regenerates data/quickstart/conversation-slice.jsonl from the public Mooncake conversation trace:
# sessionize it (dyn-trace sessionize infers sessions from hash-id prefix chains), keep the first
# 32 sessions (by first arrival) that have at least 3 turns, and shift timestamps to start at 0.
# Usage: scripts/make-quickstart-slice.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build}/bin"
src="$root/../shared/data/mooncake-fast25/conversation_trace.jsonl"
"$bin/dyn-trace" sessionize "$src" 2>/dev/null |
  jq -s -c '
    (group_by(.session_id) | map(select(length >= 3)) | sort_by(.[0].timestamp) | .[0:32]) as $s
    | ($s | map(.[0].timestamp) | min) as $t0
    | [$s[][]] | sort_by(.timestamp) | map(.timestamp -= $t0) | .[]' \
  >"$root/data/quickstart/conversation-slice.jsonl"
wc -l "$root/data/quickstart/conversation-slice.jsonl"
