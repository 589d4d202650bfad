# Shows the exit-code contract for usage errors (2), unreadable input (4) and --version (0).
dyn-trace --no-such-flag 2>/dev/null; echo "unknown flag: $?"
dyn-trace 2>/dev/null; echo "no subcommand: $?"
dyn-trace cat /nonexistent/file 2>err.txt; echo "missing file: $?"; cat err.txt
dyn-trace --version >/dev/null; echo "version: $?"
for t in dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker; do $t --version; done
