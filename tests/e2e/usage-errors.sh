# Shows the exit-code contract for usage errors (2), unreadable input (4) and --version (0).
expect_status 2 dyn-trace --no-such-flag 2>/dev/null
expect_status 2 dyn-trace 2>/dev/null
expect_status 4 dyn-trace cat /nonexistent/file 2>err.txt; cat err.txt
# A trace folder that does not exist: exit 4 before the server listens (no "listening", no port file).
expect_status 4 dyn-route serve --worker http://127.0.0.1:1 --port 0 --port-file r.port --request-trace \
  --request-trace-file-path /nonexistent/dir/tr 2>err.txt; cat err.txt
expect_status 4 dyn-trace capture --upstream http://127.0.0.1:1 --port 0 --port-file c.port \
  --request-trace-file-path /nonexistent/dir/tr 2>err.txt; cat err.txt
ls r.port c.port 2>/dev/null
expect_status 0 dyn-trace --version >/dev/null
for t in dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker; do $t --version; done
