# Shows that a client that disconnects mid-stream releases its lease at once (GET /v1/bindings
# shows 0 active leases while the binding stays), that the router stops the upstream request
# (the mocker counts it cancelled and has nothing running), that the trace row says "cancelled",
# and that the session's next turn still hits its binding.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 0.2
start_mocker w1 --worker-id 1 --speedup-ratio 0.2
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 300 \
  --request-trace --request-trace-file-path "$PWD/tr" --request-trace-file-format jsonl
m='[{"role":"user","content":"Write a very long essay about consensus protocols."}]'
curl -sS -N -o long.txt -H 'x-session-id: cd-1' -H 'content-type: application/json' "$r_url/v1/chat/completions" \
  -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":3000,\"messages\":$m}" 2>/dev/null &
cpid=$!
for i in $(seq 1 100); do [[ -s long.txt ]] && break; sleep 0.05; done
echo "lease while streaming: $(curl -sS "$r_url/v1/bindings" | jq '.bindings[0].active_leases')"
kill "$cpid"; wait "$cpid" 2>/dev/null
leases=1
for i in $(seq 1 100); do
  leases=$(curl -sS "$r_url/v1/bindings" | jq '.bindings[0].active_leases')
  [[ $leases == 0 ]] && break
  sleep 0.05
done
echo "lease after the disconnect: $leases"
w=$(curl -sS "$r_url/v1/bindings" | jq -r '.bindings[0].worker')
url=$([[ $w == 0 ]] && echo "$w0_url" || echo "$w1_url")
for i in $(seq 1 100); do
  running=$(curl -sS "$url/metrics" | awk '/^dyn_mocker_num_requests_running/{print $2}')
  [[ $running == 0 ]] && break
  sleep 0.05
done
echo "bound worker running after the disconnect: $running"
echo "bound worker cancelled: $(curl -sS "$url/metrics" | awk '/^dyn_mocker_requests_cancelled_total/{print $2}')"
echo "router cancelled: $(curl -sS "$r_url/metrics" | awk -v w="worker=\"$w\"" 'index($0, "dyn_worker_cancelled_total{" w) == 1 {print $2}')"
m=$(grow "$m" 1)
out=$(chat "$r_url" '{"x-session-id":"cd-1"}' "$m")
echo "next turn: ${out#* }, same worker: $([[ ${out%% *} == "$w" ]] && echo yes || echo no)"
stop "$r_pid"
jq -r '[.dyn.status, .dyn.binding] | @tsv' tr
