# Shows the per-worker circuit breaker: after --cb-failure-threshold failed requests in a row (here
# 500s to a client-pinned worker, which are not retried) the worker's circuit opens, GET
# /v1/workers says "down" and /metrics circuit state 1, and requests go to the other worker only;
# after --cb-timeout-duration-secs (3 s) it is half-open and routed to again; --cb-success-threshold
# successes close it. stderr names each change.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_scripted s0 "$DYN_ROOT/tests/fixtures/fleet/worker-flaky.json"
start_mocker w1 --worker-id 1
start_router r --worker "$s0_url" --worker "$w1_url" --router-mode round-robin --cb-failure-threshold 2 \
  --cb-success-threshold 2 --cb-timeout-duration-secs 3
ask() {  # ask TEXT [PIN]: status and worker of one chat request
  curl -sS -D h.txt -o a.json "$r_url/v1/chat/completions" -H 'content-type: application/json' \
    ${2:+-H "x-dynamo-worker-instance-id: $2"} \
    -d "{\"model\":\"mock-model\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}]}"
  echo "$1${2:+ (pinned to $2)}: $(head -1 h.txt | awk '{print $2}') worker $(tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')"
}
# state WANT: worker 0's state, circuit and circuit metric, once they read WANT (up to 10 s: the
# circuit hears a request's outcome when its exchange ends, just after the client has the answer,
# and opens to half_open 3 s after it opened; 3 s, not 1, so that the four requests routed while
# it is open finish first on a loaded machine: under ctest -j2 beside other builds one went to
# worker 0 after the 1 s timeout had run out).
state() {
  local i got
  for i in $(seq 1 200); do
    got="$(curl -sS "$r_url/v1/workers" | jq -r '.workers[0] | "\(.state) circuit \(.circuit)"'), metric $(curl -sS "$r_url/metrics" | awk '/^dyn_worker_circuit_state\{worker="0"/{print $2}')"
    [[ $got == "$1" ]] && break
    sleep 0.05
  done
  echo "worker 0: $got"
}
ask "fails" 0
state "serving circuit closed, metric 0"
ask "fails" 0
state "down circuit open, metric 1"
for i in 1 2 3 4; do ask "routed $i"; done
state "serving circuit half_open, metric 2"
ask "works-now" 0
state "serving circuit half_open, metric 2"
ask "works-now" 0
state "serving circuit closed, metric 0"
ask "routed 5"
ask "routed 6"
grep -E 'circuit' r.log | sed -E 's/127\.0\.0\.1:[0-9]+/H:P/g'
