#!/usr/bin/env bash
# Regenerates data/quickstart/conversation-slice.jsonl from the public Mooncake conversation trace
# bundled in data/mooncake-fast25/: sessionize it (dyn-trace sessionize infers sessions from
# hash-id prefix chains), keep the first 32 sessions (by first arrival) that have at least 3 turns,
# and shift timestamps to start at 0.
# The slice is written to a temporary file beside the target and moved into place only when every
# step succeeded and the result is non-empty, so a failed run leaves the bundled workload intact.
# Usage: scripts/make-quickstart-slice.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build}/bin"
src="$root/data/mooncake-fast25/conversation_trace.jsonl.gz"
dst="$root/data/quickstart/conversation-slice.jsonl"
for need in "$bin/dyn-trace" "$src"; do
  [[ -e "$need" ]] || { echo "make-quickstart-slice.sh: $need not found (build first: cmake --build build --target dyn-trace)" >&2; exit 4; }
done
command -v jq >/dev/null || { echo "make-quickstart-slice.sh: jq not found (scripts/setup.sh installs it)" >&2; exit 4; }
tmp="$(mktemp "$dst.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
"$bin/dyn-trace" sessionize "$src" |
  jq -s -c '
    (group_by(.session_id) | map(select(length >= 3)) | sort_by(.[0].timestamp) | .[0:32]) as $s
    | ($s | map(.[0].timestamp) | min) as $t0
    | [$s[][]] | sort_by(.timestamp) | map(.timestamp -= $t0) | .[]' >"$tmp"
[[ -s "$tmp" ]] || { echo "make-quickstart-slice.sh: the slice came out empty; $dst left as it was" >&2; exit 3; }
chmod 644 "$tmp"
mv "$tmp" "$dst"
trap - EXIT
wc -l "$dst"
