# Shows that a short replay leaks nothing under valgrind memcheck (--leak-check=full): a few
# Mooncake sessions replayed live by dyn-replay through dyn-route serve (tracing on, stopped with
# SIGTERM) to a dyn-mocker, and the same workload through dyn-replay --sim; zero memcheck errors
# and zero definitely/indirectly lost bytes in each program. Skipped (77) without valgrind or in
# a sanitizer build.
set -u
bash "$DYN_ROOT/scripts/valgrind-replay.sh" "$DYN_BUILD" >out.txt
rc=$?
[[ $rc == 77 ]] && exit 77
cat out.txt >&2
echo "valgrind exit $rc"
grep -E '^dyn-' out.txt
