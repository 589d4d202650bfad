# Shows request migration (--migration-limit, Dynamo's name): a worker killed (SIGKILL) while it
# streams a chat completion or an Anthropic message, the router continues the generation on the
# other worker from the text already sent, and the client reads one well-formed stream whose text
# is byte for byte the text one worker streams for the same request uninterrupted: no token
# duplicated or lost, one role chunk (one message_start), one finish, one usage counting the
# whole generation, one [DONE], no error event (and a planted duplicated token fails the check). The row says dyn.migrations 1 with the stream
# attempt, and the session's next turn is "rebound" (reason "unhealthy"). Without
# --migration-limit the same kill cuts the stream (stream_cut).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker ref --worker-id 9
n=40
chat_body="{\"model\":\"mock-model\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":$n,\"messages\":[{\"role\":\"user\",\"content\":\"write an essay on caches\"}]}"
msg_body="{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":$n,\"messages\":[{\"role\":\"user\",\"content\":\"write an essay on caches\"}]}"
chat_text() { grep '^data: {' "$1" | sed 's/^data: //' | jq -j '.choices[0].delta.content // empty'; }
msg_text() { grep '^data: {' "$1" | sed 's/^data: //' | jq -j 'select(.type=="content_block_delta") | .delta.text'; }
curl -sS -N -o ref-chat.txt "$ref_url/v1/chat/completions" -H 'content-type: application/json' -d "$chat_body"
curl -sS -N -o ref-msg.txt "$ref_url/v1/messages" -H 'content-type: application/json' -d "$msg_body"
# run NAME PATH BODY ROUTER_FLAGS...: two slow workers, a router, one stream whose worker is killed
# once 8 content events have reached the client; the client's bytes land in NAME.txt.
run() {
  local name=$1 path=$2 body=$3; shift 3
  start_mocker a --worker-id 0 --speedup-ratio 0.1
  start_mocker b --worker-id 1 --speedup-ratio 0.1
  start_router r --worker "$a_url" --worker "$b_url" --router-session-affinity-ttl-secs 300 \
    --router-session-affinity-mode hard --request-trace --request-trace-file-path "$PWD/$name.trace" \
    --request-trace-file-format jsonl "$@"
  curl -sS -N -D "$name.h" -o "$name.txt" -H 'x-session-id: m-1' -H 'content-type: application/json' \
    "$r_url$path" -d "$body" 2>/dev/null &
  local cpid=$! i
  for i in $(seq 1 200); do (($(grep -c '"content":"\|text_delta' "$name.txt" 2>/dev/null) >= 8)) && break; sleep 0.02; done
  if [[ $(tr -d '\r' <"$name.h" | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}') == 0 ]]; then
    kill -9 "$a_pid"; else kill -9 "$b_pid"; fi
  wait "$cpid"
  local rc=$?; echo "$name: client exit $([[ $rc == 0 ]] && echo 0 || echo non-zero)"
  curl -sS -o /dev/null -w "$name: next turn %{http_code}\n" -H 'x-session-id: m-1' \
    -H 'content-type: application/json' "$r_url$path" -d "${body/\"stream\":true/\"stream\":false}"
  stop "$r_pid"; stop "$a_pid"; stop "$b_pid"
  jq -c '[.dyn.status, (.dyn.error.type // "-"), .dyn.binding, (.dyn.rebind_reason // "-"), (.dyn.migrations // 0),
          [.dyn.attempts[]? | [.stage, .error]], (if .dyn.status == "ok" then .request.output_tokens else "-" end)]' "$name.trace"
}
run chat /v1/chat/completions "$chat_body" --migration-limit 1
cmp <(chat_text ref-chat.txt) <(chat_text chat.txt) && echo "chat: text identical to one uninterrupted stream ($(chat_text chat.txt | wc -c) bytes)"
# The check catches a duplicated token: the same stream with one content event planted twice.
awk '/"content":"[^"]/ && ++n == 5 {print} {print}' chat.txt >planted.txt
cmp -s <(chat_text ref-chat.txt) <(chat_text planted.txt) || echo "chat: a planted duplicated token is caught"
echo "chat: role chunks $(grep -c '"role":"assistant"' chat.txt), finishes $(grep -c '"finish_reason":"length"' chat.txt), [DONE] $(grep -c '^data: \[DONE\]' chat.txt), errors $(grep -c '"error"' chat.txt), ids $(grep '^data: {' chat.txt | sed 's/^data: //' | jq -r .id | sort -u | wc -l)"
echo "chat: usage $(grep '^data: {' chat.txt | sed 's/^data: //' | jq -c 'select(.usage != null) | .usage.completion_tokens')"
run msg /v1/messages "$msg_body" --migration-limit 1
cmp <(msg_text ref-msg.txt) <(msg_text msg.txt) && echo "messages: text identical to one uninterrupted stream ($(msg_text msg.txt | wc -c) bytes)"
echo "messages: events $(grep '^event:' msg.txt | sort | uniq -c | awk '{printf "%s=%s ", $3, $1}')"
echo "messages: usage $(grep '^data: {' msg.txt | sed 's/^data: //' | jq -c 'select(.type=="message_delta") | .usage.output_tokens')"
run cut /v1/chat/completions "$chat_body"
echo "without migration: stream_cut events $(grep -c stream_cut cut.txt)"
