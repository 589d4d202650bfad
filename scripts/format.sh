#!/usr/bin/env bash
# Formats every C++ file of the project with .clang-format (clang-format 14, Debian package
# clang-format). `scripts/format.sh --check` changes nothing and exits 1 listing the files that
# differ from the house style.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fmt=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then echo "$f"; bad=1; fi
  done
  exit "$bad"
fi
"$fmt" --style=file -i "${files[@]}"
