#!/usr/bin/env bash
# Sanitizer runs of the test suite: builds the whole project with ASan+UBSan into build-asan and
# runs every ctest test (unit + e2e) there, then builds it with TSan into build-tsan and runs the
# tests that drive the router's concurrent paths (threaded unit tests, and the e2e tests running
# dyn-route serve / dyn-trace capture / dyn-mocker / live dyn-replay as real processes).
# Every sanitizer report of every process (servers the tests stop with SIGTERM included, whose
# exit status nobody reads) goes to a log file under BUILD/sanitizer-logs; the run fails when
# ctest fails or when any such log exists, and prints the logs.
# Usage: scripts/sanitize.sh [asan|tsan|all] [extra ctest args...]
#   DYN_TSAN_TESTS   ctest -R regex of the TSan run (default: the concurrent tests below)
#   DYN_SAN_JOBS     build and ctest parallelism (default 2)
#   DYN_HTTPLIB_SOURCE  folder with cpp-httplib's single-file httplib.h (default: unpacked from
#                    Debian's source package of the installed libcpp-httplib-dev into
#                    build-httplib-src, which needs the Debian mirror)
# Both builds compile cpp-httplib header-only (CMake DYN_HTTPLIB_SOURCE) so it is instrumented
# like the rest: TSan cannot see synchronisation inside Debian's uninstrumented .so, and ASan
# only checks that .so at the libc calls it makes.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
supp="$root/scripts/sanitizers"
what="${1:-all}"
[[ $# -gt 0 ]] && shift
jobs="${DYN_SAN_JOBS:-2}"
# The TSan run builds only what its tests run (all six tools, the load client, the threaded unit
# tests); DYN_TSAN_TARGETS=all builds everything.
tsan_targets="${DYN_TSAN_TARGETS:-dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker serve_load test_route test_route_admission test_http test_serve test_engine test_replay test_io}"
tsan_tests="${DYN_TSAN_TESTS:-^unit\.(route|route_admission|http|serve|engine|replay|io)$|^e2e\.(serve-.*|capture-.*|bind-live|replay-mooncake-sessions-live|replay-interrupt|mocker-stream-and-cache|example-capture-and-replay|affinity-real-producers|quickstart-smoke|soak-smoke)$}"

# httplib_source DIR: makes DIR/httplib.h the single-file cpp-httplib of the installed Debian
# package's source (same version, Debian's patches applied), fetched with apt-get source through a
# private deb-src list (the system's apt configuration is not touched).
httplib_source() {
  local dir=$1 apt version uri suite
  [[ -f $dir/httplib.h ]] && return 0
  version=$(dpkg-query -W -f='${source:Version}' libcpp-httplib-dev) || return 1
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
        grep -oE 'https?://[^ ]+' | grep -v security | head -1)
  suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
  apt="$dir.apt"
  rm -rf "$dir" "$apt"; mkdir -p "$apt/lists/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${uri:-http://deb.debian.org/debian} $suite main" >"$apt/sources.list"
  local opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
              -o Dir::State::Lists="$apt/lists" -o APT::Sandbox::User=root -qq)
  echo "== fetching cpp-httplib $version source (Debian) into $dir"
  apt-get "${opts[@]}" update >"$apt/log" 2>&1 &&
    (cd "$apt" && apt-get "${opts[@]}" source "cpp-httplib=$version") >>"$apt/log" 2>&1 || {
    cat "$apt/log" >&2; echo "cannot fetch cpp-httplib's source; set DYN_HTTPLIB_SOURCE" >&2; return 1; }
  mv "$apt"/cpp-httplib-*/ "$dir" && rm -rf "$apt" && [[ -f $dir/httplib.h ]]
}

# run_one NAME SANITIZERS TARGETS [ctest args...]: configure, build TARGETS ("all" = everything),
# test; 0 only when clean.
run_one() {
  local name=$1 san=$2 targets=$3; shift 3
  local build="$root/build-$name" logs
  logs="$build/sanitizer-logs"
  echo "== $name: configure and build $build (-fsanitize=$san)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDYN_WERROR=ON \
    -DDYN_SANITIZE="$san" -DDYN_HTTPLIB_SOURCE="$httplib" ${DYN_CMAKE_ARGS:-} >/dev/null || return 1
  local t args=()
  [[ $targets != all ]] && for t in $targets; do args+=(--target "$t"); done
  cmake --build "$build" -j"$jobs" "${args[@]}" >"$build/build.log" 2>&1 || { tail -40 "$build/build.log"; return 1; }
  rm -rf "$logs"; mkdir -p "$logs"
  # Common: reports to per-process files (log_path appends .PID), full stacks, fail hard.
  local common="log_path=$logs/$name:print_stacktrace=1"
  export UBSAN_OPTIONS="$common:halt_on_error=1:suppressions=$supp/ubsan.supp"
  export ASAN_OPTIONS="$common:detect_leaks=1:abort_on_error=0:exitcode=86:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
  export LSAN_OPTIONS="$common:suppressions=$supp/lsan.supp"
  export TSAN_OPTIONS="$common:halt_on_error=0:exitcode=86:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
  echo "== $name: ctest $*"
  local rc=0 t0=$SECONDS
  (cd "$build" && ctest --output-on-failure -j"$jobs" "$@") >"$build/ctest.log" 2>&1 || rc=1
  grep -E '^[0-9]+% tests passed|tests failed|\*\*\*|Total Test time' "$build/ctest.log" | tail -30
  local reports
  reports=$(find "$logs" -type f | wc -l)
  echo "== $name: $((SECONDS - t0)) s, ctest $([[ $rc == 0 ]] && echo passed || echo FAILED), $reports sanitizer report file(s) in $logs"
  if ((reports > 0)); then
    for f in "$logs"/*; do echo "--- $f"; head -60 "$f"; done
    rc=1
  fi
  return $rc
}

[[ $what =~ ^(asan|tsan|all)$ ]] || { echo "usage: scripts/sanitize.sh [asan|tsan|all] [ctest args...]" >&2; exit 2; }
httplib="${DYN_HTTPLIB_SOURCE:-$root/build-httplib-src}"
[[ -n ${DYN_HTTPLIB_SOURCE:-} ]] || httplib_source "$httplib" || exit 1

status=0
case "$what" in
  asan|all) run_one asan address,undefined all "$@" || status=1 ;;&
  tsan|all) run_one tsan thread "$tsan_targets" -R "$tsan_tests" "$@" || status=1 ;;
esac
exit $status
