#!/usr/bin/env bash
# The whole test suite: setup (packages + build), then every unit and e2e test under ctest, then
# the fuzz smoke run (fuzz/README.md): the libFuzzer targets built with clang in ./build-fuzz
# (only the targets and the library code they need) and fuzzed a few seconds each, as ctest tests.
# Env: DYN_FUZZ_SMOKE=0 skips the fuzz part (a quick local run; CI always runs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DYN_SETUP_EXTRA="${DYN_SETUP_EXTRA:-chromium wrk}" "$root/scripts/setup.sh"
rc=0
(cd "$root/build" && ctest --output-on-failure -j2 "$@") || rc=$?
if [[ "${DYN_FUZZ_SMOKE:-1}" != 0 ]]; then
  cmake -S "$root" -B "$root/build-fuzz" -DDYN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo ${DYN_CMAKE_ARGS:-} >/dev/null
  cmake --build "$root/build-fuzz" -j2 --target dyn_fuzz
  (cd "$root/build-fuzz" && ctest --output-on-failure -j1 -L fuzz) || rc=$?
fi
exit "$rc"
