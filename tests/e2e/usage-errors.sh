# Shows the exit-code contract for usage errors (2), unreadable input (4) and --version (0).
expect_status 2 dyn-trace --no-such-flag 2>/dev/null
expect_status 2 dyn-trace 2>/dev/null
expect_status 4 dyn-trace cat /nonexistent/file 2>err.txt; cat err.txt
expect_status 0 dyn-trace --version >/dev/null
for t in dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker; do $t --version; done
