#!/usr/bin/env bash
# Assembles the seed corpus of one fuzz target into DIR from the checked-in seeds (fuzz/seeds/,
# regression inputs included), the test fixtures and ../shared/cases and data (small files only).
# Usage: fuzz/make-corpus.sh TARGET DIR   (TARGET: sse headers jsonl workload request_end)
# Env: DYN_SHARED (default ../shared next to the repository).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${DYN_SHARED:-$root/../shared}"
target="$1" dir="$2"
mkdir -p "$dir"
# seed FILE [PREFIX]: copies FILE (at most 64 KiB of it) named by its content hash; PREFIX is
# printf text put before it (the flags byte of targets that take one).
seed() {
  local f="$1" prefix="${2:-}"
  [[ -f "$f" ]] || return 0
  local tmp="$dir/.tmp.$$"
  { printf "$prefix"; head -c 65536 "$f"; } >"$tmp"
  mv "$tmp" "$dir/$(sha1sum <"$tmp" | cut -c1-16)"
}
# head_lines FILE N: the first N lines of a big data file as a seed.
head_lines() {
  local tmp
  tmp="$(mktemp)"
  head -n "$2" "$1" >"$tmp"
  seed "$tmp" "${3:-}"
  rm -f "$tmp"
}
for f in "$root"/fuzz/seeds/"$target"/*; do seed "$f"; done
case "$target" in
  sse)
    for f in "$shared"/cases/*/*.sse "$shared"/cases/01-sse-split-mid-json/read-*.bin; do seed "$f"; done
    ;;
  headers)
    # Header blocks of the captured requests (the lines between the request line and the body).
    for f in "$shared"/cases/*/request.http; do
      tmp="$(mktemp)"
      sed -n '2,/^\r\{0,1\}$/p' "$f" >"$tmp"
      seed "$tmp"
      rm -f "$tmp"
    done
    seed "$shared/cases/14-codex-header-spellings/headers.json"
    # Real agents' headers (data/agent-headers): each request as "name: value" lines and as JSON.
    for f in "$shared"/data/agent-headers/observed_headers.jsonl "$shared"/data/agent-headers/captured/*.jsonl; do
      [[ -f "$f" ]] || continue
      i=0
      while IFS= read -r h && ((i < 12)); do
        tmp="$(mktemp)"
        jq -r 'if type == "object" then to_entries[] | "\(.key): \(.value)" else .[] | "\(.[0]): \(.[1])" end' \
          <<<"$h" >"$tmp"
        seed "$tmp"
        printf '%s' "$h" >"$tmp"
        seed "$tmp"
        rm -f "$tmp"
        i=$((i + 1))
      done < <(jq -c '.headers' "$f")
    done
    ;;
  jsonl)
    for f in "$shared"/cases/*/*.jsonl "$shared"/cases/*/*.gz "$root"/tests/fixtures/*.jsonl \
             "$shared"/data/dynamo-docs/*.jsonl; do
      seed "$f" '\x00'   # read as is (gzip by magic)
      seed "$f" '\x01'   # gzipped by the target
    done
    for f in "$shared"/cases/24-gzip-multi-member/*.jsonl; do seed "$f" '\x4f'; done
    ;;
  workload)
    for f in "$shared"/cases/*/*.jsonl "$shared"/data/aiperf/*trace*.jsonl "$shared"/data/aiperf/precise_schedule.jsonl \
             "$shared"/data/dynamo-docs/*.jsonl; do
      seed "$f" '\x00'
      seed "$f" '\x05'   # block size 16, lenient
    done
    for f in "$shared"/data/mooncake-fast25/*.jsonl; do [[ -f "$f" ]] && head_lines "$f" 12 '\x03'; done
    ;;
  request_end)
    for f in "$shared"/data/dynamo-docs/*.jsonl "$shared"/cases/*/timeline.jsonl; do seed "$f" '\x00'; seed "$f" '\x01'; done
    for f in "$root"/tests/fixtures/bench/*.jsonl; do seed "$f" '\x01'; done
    [[ -f "$shared/data/aiperf/profile_export.jsonl" ]] && head_lines "$shared/data/aiperf/profile_export.jsonl" 1 '\x00'
    ;;
  *) echo "make-corpus.sh: unknown target '$target'" >&2; exit 2 ;;
esac
echo "$target: $(find "$dir" -maxdepth 1 -type f | wc -l) seeds in $dir" >&2
