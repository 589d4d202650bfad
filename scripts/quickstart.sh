#!/usr/bin/env bash
# The main job on an embedded default. Until the live quickstart lands (issue 10) this installs,
# builds, and runs the best end-to-end path available: the bundled trace cases through dyn-trace.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
bin="$root/build/bin"
shared="$root/../shared"
echo "== dyn-trace cat over a multi-member gzip trace and a truncated one"
"$bin/dyn-trace" cat "$shared/cases/24-gzip-multi-member/trace.jsonl.gz" "$shared/cases/23-gzip-truncated-tail/trace.jsonl.gz" --sort
