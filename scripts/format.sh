#!/usr/bin/env bash
# Formats every C++ file of the project with .clang-format (clang-format 14, Debian package
# clang-format). `scripts/format.sh --check [ROOT]` changes nothing and exits 1 listing the files
# that differ from the house style (ROOT: another copy of the tree, for the test's planted case;
# its files are found with git when it is a repository, else every .cpp and .h under it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  root="$(cd "${2:-$root}" && pwd)"
fi
cd "$root"
fmt=$(command -v clang-format-14 || command -v clang-format) || {
  echo "format.sh: clang-format not found (Debian package clang-format)" >&2
  exit 4
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
else
  mapfile -t files < <(find . -name '*.cpp' -o -name '*.h' | sed 's#^\./##' | sort)
fi
if ((check)); then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then echo "$f"; bad=1; fi
  done
  exit "$bad"
fi
"$fmt" --style=file -i "${files[@]}"
