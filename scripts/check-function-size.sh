#!/usr/bin/env bash
# Lists every function in lib/ and cmd/ longer than the house limit (docs/design.md: 150 lines,
# from its signature to its closing brace), found with universal-ctags (Debian package
# universal-ctags), and exits 1 when there is one. Usage: scripts/check-function-size.sh [ROOT]
set -euo pipefail
root="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)"
limit=150
command -v ctags >/dev/null || { echo "check-function-size.sh: ctags not found (universal-ctags)" >&2; exit 4; }
cd "$root"
long=$(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat='%{end} %{line} %F %N' lib cmd |
  awk -v lim="$limit" '$1 != "" && $1 - $2 + 1 > lim { printf "%s:%d: %s is %d lines (limit %d)\n", $3, $2, $4, $1 - $2 + 1, lim }' |
  sort)
if [[ -n "$long" ]]; then
  echo "$long"
  exit 1
fi
echo "function size: no function in lib/ or cmd/ over $limit lines"
