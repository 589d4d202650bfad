# Shows that dyn-bind live fetches a router's GET /v1/bindings over HTTP (a test server on
# 127.0.0.1, port 0) and prints it as JSONL or a table, accepting both a bare array and
# {"bindings": [...]}, and that an unreachable router is an I/O error (exit 4).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
mkdir -p a/v1 b/v1
cat >a/v1/bindings <<'JSON'
[{"key":"session:s1","worker":0,"active_leases":1,"idle_deadline_unix_ms":null,"parent_group":null},
 {"key":"parent:s1","worker":1,"active_leases":0,"idle_deadline_unix_ms":1700000300000,"parent_group":"s1"}]
JSON
printf '{"bindings": %s}' "$(cat a/v1/bindings)" >b/v1/bindings
serve() {  # serve DIR on 127.0.0.1, port 0; prints the port
  python3 -c '
import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
h.log_message = lambda *a: None
s = http.server.HTTPServer(("127.0.0.1", 0), h)
print(s.server_address[1], flush=True)
s.serve_forever()' "$1" >"$1.port" &
  echo $! >"$1.pid"
  for _ in $(seq 50); do [[ -s "$1.port" ]] && break; sleep 0.1; done
}
command -v python3 >/dev/null || { echo "python3 is needed for the test server" >&2; exit 77; }
serve a; serve b
_dyn_pids+=("$(cat a.pid)" "$(cat b.pid)")
expect_status 0 dyn-bind live --url "http://127.0.0.1:$(cat a.port)"
expect_status 0 dyn-bind live --url "http://127.0.0.1:$(cat b.port)/" --format table
dyn-bind live --url "127.0.0.1:$(cat b.port)/v1/bindings" | wc -l
stop "$(cat a.pid)"
expect_status 4 dyn-bind live --url "http://127.0.0.1:$(cat a.port)" --timeout-secs 2 2>&1 | sed 's/:[0-9]*\/v1/:PORT\/v1/'
