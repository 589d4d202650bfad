# Sourced by the examples: puts build/bin first on PATH and checks that the tools an example runs
# are there (scripts/quickstart.sh builds all six; a partial build may lack one), naming how to build a missing one
# (exit 4). Usage: source "$here/tools.sh" TOOL...
PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../build/bin:$PATH"
for t in "$@"; do
  command -v "$t" >/dev/null || { echo "$(basename "$0"): $t not found in build/bin or PATH;" \
    "build it with: cmake --build build -j2 --target $t (or scripts/setup.sh: every tool and the tests)" >&2; exit 4; }
done
