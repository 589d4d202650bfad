# Shows that --worker-file is watched: the router starts on the workers it names (a URL or a JSON
# spec per line, comments and blank lines skipped), adds a worker when a line appears, drains one
# whose line says "draining": true, removes one whose line goes (its session's binding dropped, the
# next turn "rebound" with reason "removed"), reports a malformed line with FILE:LINE and keeps the
# others, and keeps its workers when the file cannot be read; an unreadable file at start is an
# I/O error (exit 4).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
printf '# fleet\n%s\n\n' "$w0_url" >workers.txt
start_router r --worker-file "$PWD/workers.txt" --worker-file-interval-ms 50 \
  --router-session-affinity-ttl-secs 300 --request-trace --request-trace-file-path "$PWD/tr" \
  --request-trace-file-format jsonl
workers() {  # the fleet as "id:state:source" words
  curl -sS "$r_url/v1/workers" | jq -r '[.workers[] | "\(.worker):\(.state):\(.source)"] | join(" ")'
}
wait_for() {  # wait_for WORDS: until workers prints WORDS (5 s at most)
  local i
  for i in $(seq 1 100); do [[ $(workers) == "$1" ]] && break; sleep 0.05; done
  echo "workers: $(workers)"
}
wait_for "0:serving:file"
m='[{"role":"user","content":"tell me about caches"}]'
echo "turn 1: $(chat "$r_url" '{"x-session-id":"s"}' "$m")"
printf '%s\n{"url": "%s/"}\nnot a url\n' "$w0_url" "$w1_url" >workers.txt.new && mv workers.txt.new workers.txt
wait_for "0:serving:file 1:serving:file"
printf '{"url": "%s", "draining": true}\n%s\n' "$w0_url" "$w1_url" >workers.txt.new && mv workers.txt.new workers.txt
wait_for "0:draining:file 1:serving:file"
echo "turn 2: $(chat "$r_url" '{"x-session-id":"s"}' "$(grow "$m" 1)")"
printf '%s\n' "$w0_url" >workers.txt.new && mv workers.txt.new workers.txt
wait_for "0:serving:file"
echo "turn 3: $(chat "$r_url" '{"x-session-id":"s"}' "$(grow "$(grow "$m" 1)" 2)")"
rm workers.txt
sleep 0.3
echo "file gone, workers kept: $(workers)"
stop "$r_pid"
jq -r '[.agent_context.session_id, .request.worker.decode_worker_id, .dyn.binding, (.dyn.rebind_reason // "-")] | @tsv' tr
grep -E 'workers.txt|added|removed|draining|serving again' r.log | sed -E -e 's/127\.0\.0\.1:[0-9]+/H:P/g' -e "s|$PWD/||"
expect_status 4 dyn-route serve --worker-file "$PWD/none.txt" --port 0 2>&1 | sed "s|$PWD/||"
