# Shows the servers' exit status (README, exit status table): dyn-route serve, dyn-trace capture
# and dyn-mocker exit 0 after SIGTERM and 130 after SIGINT; the frontends flush their trace either
# way (one row for the one request). SIGINT is restored to its default first: a shell starts
# background jobs with SIGINT ignored.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
sigint_default='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
run_and_stop() {  # run_and_stop SIGNAL STATUS NAME COMMAND...: start, one request (frontends), signal: exit STATUS
  local sig=$1 want=$2 name=$3; shift 3
  rm -f "$name.port" "$name.jsonl"
  python3 -c "$sigint_default" "$@" --port 0 --port-file "$name.port" >"$name.log" 2>&1 &
  local pid=$!
  wait_file "$name.port"
  local url="http://127.0.0.1:$(cat "$name.port")"
  curl -sS -o /dev/null -H 'content-type: application/json' "$url/v1/chat/completions" \
    -d '{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}'
  kill "-$sig" "$pid"
  expect_status "$want" wait "$pid"
  local rows=""
  [[ $name != m ]] && rows=": trace rows $(cat "$name.jsonl" 2>/dev/null | wc -l)"
  echo "$name on SIG$sig$rows"
}
start_mocker w
for entry in TERM:0 INT:130; do  # the signal, then the exit status it gives
  sig=${entry%:*} want=${entry#*:}
  run_and_stop "$sig" "$want" m dyn-mocker
  run_and_stop "$sig" "$want" r dyn-route serve --worker "$w_url" --request-trace --request-trace-file-path "$PWD/r.jsonl" --request-trace-file-format jsonl
  run_and_stop "$sig" "$want" cap dyn-trace capture --upstream "$w_url" --request-trace-file-path "$PWD/cap.jsonl" --request-trace-file-format jsonl
done
