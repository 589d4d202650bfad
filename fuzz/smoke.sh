#!/usr/bin/env bash
# The fuzz smoke test of one target (ctest fuzz.<name>): assembles the seed corpus, replays it,
# then fuzzes for a few seconds. Fails on any crash, leak, UB report, timeout (10 s per input) or
# OOM (2 GiB); the input that failed is left in $DYN_FUZZ_WORK/<name>/ and named in the output.
# Usage: fuzz/smoke.sh BINARY NAME SECONDS
set -euo pipefail
[[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/lib/llvm-14/bin/llvm-symbolizer ]] &&
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
bin="$1" name="$2" secs="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${DYN_FUZZ_WORK:-/tmp/dyn-fuzz-work}/$name"
rm -rf "$work"
mkdir -p "$work/corpus" "$work/seeds"
"$here/make-corpus.sh" "$name" "$work/seeds"
dict=()
[[ -f "$here/$name.dict" ]] && dict=(-dict="$here/$name.dict")
# New inputs go to corpus/ (scratch); seeds/ stays as assembled. -close_fd_mask=2 silences the
# readers' per-row warnings; sanitizer and libFuzzer reports still reach the log.
cd "$work"
"$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$work/" corpus seeds
