# Shows case 21 (ai-dynamo/dynamo#12354) end to end: the raw HTTP/1.1 request with lower-case
# x-dynamo-session-id / x-dynamo-parent-session-id, sent byte for byte to dyn-route serve, gets
# 200 and its request_end row carries the agent_context. With affinity on, a binding (pin) is
# created for the subagent's parent group and a second identical request goes to the same worker;
# with affinity off the identity is still in the trace but placement stays round-robin.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
req="$DYN_CASES/21-dynamo-header-lowercase/request.http"
send_raw() {  # prints the status line's code and the x-dyn-worker header of one raw request
  exec 3<>"/dev/tcp/127.0.0.1/${1##*:}"
  cat "$req" >&3
  local line status="" worker=""
  while IFS= read -r -t 5 line <&3; do
    line=${line%$'\r'}
    [[ -z $status ]] && status=$(awk '{print $2}' <<<"$line")
    [[ ${line,,} == x-dyn-worker:* ]] && worker=${line#*: }
    [[ -z $line ]] && break
  done
  exec 3<&- 3>&-
  echo "status $status worker $worker"
}
start_mocker w0 --worker-id 0
start_mocker w1 --worker-id 1
for ttl in none 300; do
  echo "== affinity ttl: $ttl"
  rm -f tr
  args=()
  [[ $ttl != none ]] && args=(--router-session-affinity-ttl-secs "$ttl")
  start_router r --worker "$w0_url" --worker "$w1_url" --request-trace --request-trace-file-path "$PWD/tr" \
    --request-trace-file-format jsonl "${args[@]}"
  send_raw "$r_url"
  send_raw "$r_url"
  curl -sS "$r_url/v1/bindings" | jq -c '[.bindings[] | {kind, parent_session_id, worker}]'
  stop "$r_pid"
  jq -c '[.agent_context, .request.worker.decode_worker_id, .dyn.binding]' tr
done
