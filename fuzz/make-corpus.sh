#!/usr/bin/env bash
# Assembles the seed corpus of one fuzz target into DIR from the checked-in seeds (fuzz/seeds/,
# regression inputs included), the test fixtures (tests/fixtures, its cases/) and the public data in data/ (small files only).
# Usage: fuzz/make-corpus.sh TARGET DIR   (TARGET: sse headers jsonl workload request_end render kv_events
# worker_url kv_hints)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cases="$root/tests/fixtures/cases"
data="$root/data"
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
  { gzip -dcf "$1" 2>/dev/null || true; } | head -n "$2" >"$tmp"   # data files may be gzipped
  seed "$tmp" "${3:-}"
  rm -f "$tmp"
}
for f in "$root"/fuzz/seeds/"$target"/*; do seed "$f"; done
case "$target" in
  sse)
    for f in "$cases"/*/*.sse "$cases"/01-sse-split-mid-json/read-*.bin; do seed "$f"; done
    ;;
  headers)
    # Header blocks of the captured requests (the lines between the request line and the body).
    for f in "$cases"/*/request.http; do
      tmp="$(mktemp)"
      sed -n '2,/^\r\{0,1\}$/p' "$f" >"$tmp"
      seed "$tmp"
      rm -f "$tmp"
    done
    seed "$cases/14-codex-header-spellings/headers.json"
    # Real agents' headers (data/agent-headers): each request as "name: value" lines and as JSON.
    for f in "$data"/agent-headers/observed_headers.jsonl "$data"/agent-headers/captured/*.jsonl; do
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
    for f in "$cases"/*/*.jsonl "$cases"/*/*.gz "$root"/tests/fixtures/*.jsonl \
             "$data"/dynamo-docs/*.jsonl; do
      seed "$f" '\x00'   # read as is (gzip by magic)
      seed "$f" '\x01'   # gzipped by the target
    done
    for f in "$cases"/24-gzip-multi-member/*.jsonl; do seed "$f" '\x4f'; done
    ;;
  workload)
    for f in "$cases"/*/*.jsonl "$data"/aiperf/*trace*.jsonl "$data"/aiperf/precise_schedule.jsonl \
             "$data"/dynamo-docs/*.jsonl; do
      seed "$f" '\x00'
      seed "$f" '\x05'   # block size 16, lenient
    done
    for f in "$data"/mooncake-fast25/*.jsonl.gz; do [[ -f "$f" ]] && head_lines "$f" 12 '\x03'; done
    ;;
  request_end)
    for f in "$data"/dynamo-docs/*.jsonl "$cases"/*/timeline.jsonl; do seed "$f" '\x00'; seed "$f" '\x01'; done
    for f in "$root"/tests/fixtures/bench/*.jsonl; do seed "$f" '\x01'; done
    [[ -f "$data/aiperf/profile_export.jsonl.gz" ]] && head_lines "$data/aiperf/profile_export.jsonl.gz" 1 '\x00'
    ;;
  render)
    # Request bodies, and the rows and captures that hold requests.
    for f in "$cases"/*/*.json "$data"/agent-headers/captured/*.jsonl "$data"/dynamo-docs/*.jsonl; do seed "$f"; done
    ;;
  kv_events) ;;  # generator bytes: the checked-in seeds alone (one per layout and unusable kind)
  worker_url) ;;  # the checked-in URLs alone (spellings of one worker, IPv6, prefixes, ports)
  kv_hints) ;;  # flags byte + a KvHint: the checked-in seeds alone (each action type, cap, range, bad version)
  *) echo "make-corpus.sh: unknown target '$target'" >&2; exit 2 ;;
esac
echo "$target: $(find "$dir" -maxdepth 1 -type f | wc -l) seeds in $dir" >&2
