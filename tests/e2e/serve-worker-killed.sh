# Shows that a worker killed mid-stream gives the client a clean error (an SSE error event and an
# incomplete response, no hang), the trace records it as a stream_cut, and under hard affinity the
# session's next turn rebinds to the live worker and succeeds. The trace says why the binding moved
# (dyn.rebind_reason), and dyn-bind check, taking TTL and mode from the router's run-config, reports
# that failover as a forced move, apart from violations, and passes (exit 0).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 0.2
start_mocker w1 --worker-id 1 --speedup-ratio 0.2
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 300 \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
m='[{"role":"user","content":"Write a very long essay about distributed caches."}]'
out=$(chat "$r_url" '{"x-session-id":"k-1"}' "$m")
echo "turn 1 status: ${out#* }"
first=${out%% *}
m=$(grow "$m" 1)
# Turn 2: a long stream; kill its worker once tokens flow.
curl -sS -N -o long.txt -H 'x-session-id: k-1' -H 'content-type: application/json' "$r_url/v1/chat/completions" \
  -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":3000,\"messages\":$m}" 2>curl.err &
cpid=$!
for i in $(seq 1 100); do [[ -s long.txt ]] && break; sleep 0.05; done
if [[ $first == 0 ]]; then kill -9 "$w0_pid"; else kill -9 "$w1_pid"; fi
start=$SECONDS
wait "$cpid"; rc=$?
echo "client exit non-zero: $([[ $rc != 0 ]] && echo yes || echo no)"
echo "client ended within 5 s: $([[ $((SECONDS - start)) -le 5 ]] && echo yes || echo no)"
echo "client saw error event: $(grep -c '"type":"stream_cut"' long.txt)"
m=$(grow "$m" 2)
out=$(chat "$r_url" '{"x-session-id":"k-1"}' "$m")
echo "turn 3 status: ${out#* }"
echo "turn 3 moved to the live worker: $([[ ${out%% *} != "$first" ]] && echo yes || echo no)"
stop "$r_pid"
jq -r '[.dyn.status, (.dyn.error.type // "-"), .dyn.binding, (.dyn.rebind_reason // "-")] | @tsv' tr
echo "== dyn-bind check"
expect_status 0 dyn-bind check tr 2>&1 | sed -E 's/from worker [01] to [01]/from worker W to the other/'
