#!/usr/bin/env bash
# e2e runner: runs one test script and compares it with the goldens beside it.
#   run.sh TEST.sh            compare; exit 1 on any difference
#   run.sh --update TEST.sh   rewrite the goldens (review them in git)
#   run.sh --all [--update]   every script in this folder
# Goldens: TEST.stdout (exact), TEST.exit (status, default 0), TEST.stderr.glob (each line a
# shell glob that some stderr line must match; optional). Exit 77 = skipped. Scripts run in a fresh temporary
# directory with DYN_BIN first on PATH; they read $DYN_ROOT, $DYN_BUILD,
# $DYN_DATA (the public data in data/) and $DYN_CASES (tests/fixtures/cases: one case per folder).
# A script checks a command's exit status with `expect_status WANT COMMAND...` (helpers/status.sh,
# exported to it): a status other than WANT fails the test, naming the command.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
update=0
all=0
scripts=()
for a in "$@"; do
  case "$a" in
    --update) update=1 ;;
    --all) all=1 ;;
    *) scripts+=("$a") ;;
  esac
done
if [[ $all == 1 ]]; then
  for s in "$here"/*.sh; do
    case "$(basename "$s")" in run.sh|lib.sh) ;; *) scripts+=("$s") ;; esac
  done
fi
: "${DYN_ROOT:=$(cd "$here/../.." && pwd)}"
: "${DYN_BUILD:=$DYN_ROOT/build}"
: "${DYN_BIN:=$DYN_BUILD/bin}"
DYN_DATA="$DYN_ROOT/data"
DYN_CASES="$DYN_ROOT/tests/fixtures/cases"
export DYN_ROOT DYN_BUILD DYN_BIN DYN_DATA DYN_CASES
export PATH="$DYN_BIN:$PATH"
export NO_COLOR=1
# shellcheck source=helpers/status.sh
source "$here/helpers/status.sh"
export -f expect_status
failed=0
for script in "${scripts[@]}"; do
  script="$(cd "$(dirname "$script")" && pwd)/$(basename "$script")"
  base="${script%.sh}"
  name="$(basename "$base")"
  work="$(mktemp -d "${TMPDIR:-/tmp}/dyn-e2e-$name.XXXXXX")"
  ( cd "$work" && DYN_EXPECT_LOG="$work/.expect" bash "$script" >"$work/.stdout" 2>"$work/.stderr" )
  status=$?
  if [[ $status == 77 ]]; then
    # A script that cannot run here (a missing optional program) says why on stderr and exits 77;
    # ctest reports it as skipped (SKIP_RETURN_CODE), never as passed.
    echo "SKIP $name: $(tail -1 "$work/.stderr")"
    rm -rf "$work"
    [[ ${#scripts[@]} == 1 ]] && exit 77
    continue
  fi
  if [[ $update == 1 && -s "$work/.expect" ]]; then
    # The script's own expectation failed: no golden update can make it pass.
    echo "FAIL $name: not updated, a checked exit status differs:"; cat "$work/.expect"
    failed=1
    rm -rf "$work"
    continue
  fi
  if [[ $update == 1 ]]; then
    cp "$work/.stdout" "$base.stdout"
    if [[ $status != 0 ]]; then echo "$status" >"$base.exit"; else rm -f "$base.exit"; fi
    echo "updated $name (exit $status)"
    rm -rf "$work"
    continue
  fi
  ok=1
  want_status=0
  [[ -f "$base.exit" ]] && want_status="$(cat "$base.exit")"
  if [[ "$status" != "$want_status" ]]; then
    echo "FAIL $name: exit $status, want $want_status"; ok=0
  fi
  if [[ -s "$work/.expect" ]]; then
    echo "FAIL $name: a checked exit status differs:"; cat "$work/.expect"; ok=0
  fi
  if [[ -f "$base.stdout" ]]; then
    if ! diff -u "$base.stdout" "$work/.stdout" >"$work/.diff"; then
      echo "FAIL $name: stdout differs from golden:"; head -50 "$work/.diff"; ok=0
    fi
  else
    echo "FAIL $name: no golden $name.stdout (run with --update and review)"; ok=0
  fi
  if [[ -f "$base.stderr.glob" ]]; then
    while IFS= read -r pat; do
      [[ -z "$pat" ]] && continue
      found=0
      while IFS= read -r line; do
        # shellcheck disable=SC2053
        if [[ "$line" == $pat ]]; then found=1; break; fi
      done <"$work/.stderr"
      if [[ $found == 0 ]]; then echo "FAIL $name: no stderr line matches: $pat"; ok=0; fi
    done <"$base.stderr.glob"
  fi
  if [[ $ok == 0 ]]; then
    echo "--- stderr of $name:"; head -40 "$work/.stderr"
    # The servers' own logs (start_mocker/start_router write NAME.log): a crash or a refusal
    # shows there, and the work folder is gone after this.
    for log in "$work"/*.log; do
      [[ -s "$log" ]] || continue
      echo "--- last lines of $(basename "$log"):"; tail -15 "$log"
    done
    failed=1
  else
    echo "ok $name"
  fi
  rm -rf "$work"
done
exit $failed
