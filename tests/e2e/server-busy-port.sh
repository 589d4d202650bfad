# Shows that no server shares a port silently: dyn-mocker, dyn-route serve and dyn-trace capture
# started on a port another server listens on say which port is busy and exit 4 (cpp-httplib's
# default SO_REUSEPORT let the second one start and take part of the traffic), and the first
# server still answers alone afterwards.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w
port=$(cat w.port)
try() {  # try NAME COMMAND...: start on the busy port: exit 4 (not timeout's 124), print the error line
  local name=$1; shift
  expect_status 4 timeout 10 "$@" --port "$port" >"$name.out" 2>"$name.err"
  echo "== $name"
  grep -o "cannot bind 127.0.0.1:[0-9]* (port in use, or not allowed)" "$name.err" | sed "s/:$port /:PORT /"
}
try mocker dyn-mocker
try router dyn-route serve --worker "$w_url"
try capture dyn-trace capture --upstream "$w_url" --request-trace-file-path "$PWD/cap.jsonl"
curl -sS -o /dev/null -w 'first server: %{http_code}\n' "$w_url/health"
