# Shows that dyn-route serve sent SIGTERM under load (16 clients streaming back to back) loses no
# finished request: the responses in flight complete, every request a client saw complete
# ([DONE]) has its request_end row with status ok on disk afterwards (compared one by one through
# x-request-id), no stream is cut (the router drains before it closes connections; later
# requests get 503), and every gzip segment (rolled every 7 rows, flushed only at exit) passes gzip -t.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 5
start_mocker w1 --worker-id 1 --speedup-ratio 5
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 300 \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-roll-lines 7 \
  --request-trace-file-flush-interval-ms 60000
client() {
  local c=$1 i
  for i in $(seq 1 1000); do
    curl -sS -N -o "out.$c.$i" -H "x-session-id: load-$c" -H "x-request-id: req-$c-$i" \
      -H 'content-type: application/json' "$r_url/v1/chat/completions" \
      -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":40,\"messages\":[{\"role\":\"user\",\"content\":\"turn $i of client $c\"}]}" \
      2>/dev/null || return 0
  done
}
pids=()
for c in $(seq 1 16); do client "$c" & pids+=($!); done
# Stop while streams are in flight: once the first 40 requests have completed.
for i in $(seq 1 400); do
  [[ $(grep -l -s 'data: \[DONE\]' out.* | wc -l) -ge 40 ]] && break
  sleep 0.05
done
stop "$r_pid"
for p in "${pids[@]}"; do wait "$p"; done
grep -l -s 'data: \[DONE\]' out.* | sed 's/^out\.\([0-9]*\)\.\([0-9]*\)$/req-\1-\2/' | sort >completed.txt
echo "client-side completions >= 40: $([[ $(wc -l <completed.txt) -ge 40 ]] && echo yes || echo no)"
cut=0
for f in out.*; do grep -q '^data: ' "$f" && ! grep -q 'data: \[DONE\]' "$f" && cut=$((cut + 1)); done
echo "streams cut by the shutdown: $cut"
segs=$(ls tr.*.jsonl.gz | wc -l)
echo "segments: more than one: $([[ $segs -gt 1 ]] && echo yes || echo no)"
bad=0
for f in tr.*.jsonl.gz; do gzip -t "$f" || bad=$((bad + 1)); done
echo "segments failing gzip -t: $bad"
dyn-trace cat tr.*.jsonl.gz | jq -r 'select(.dyn.status == "ok") | .request.x_request_id' | sort >rows.txt
echo "completed requests without an ok row: $(comm -23 completed.txt rows.txt | wc -l)"
echo "ok rows without a completed request: $(comm -13 completed.txt rows.txt | wc -l)"
