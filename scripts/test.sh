#!/usr/bin/env bash
# The whole test suite: setup (packages + build), then every unit and e2e test under ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DYN_SETUP_EXTRA="${DYN_SETUP_EXTRA:-chromium wrk}" "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j2 "$@"
