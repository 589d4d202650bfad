# Shows that with --tokenizer-url the router asks the engine's tokenizer for what the engine will
# tokenize (issue 51.3), so requests reach the worker whose KV events hold those ids: a chat
# request with its tools and template options (chat_template_kwargs, reasoning_effort merged in),
# an Anthropic Messages request and a Responses request in the chat form vLLM's frontend converts
# them to (Claude Code's per-request attribution block left out, tool calls and results as chat
# messages). The stand-in tokenizer (helpers/char_tokenizer.py) applies a minimal chat template,
# one token per character. Where precise routing is unavailable (a Responses request continuing a
# stored response; a tokenizer that is slow or, like SGLang's, takes prompts only) the request
# still succeeds on approximate tokens, with one warning per reason.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_events.sh"
bs=16
$py "$DYN_ROOT/tests/e2e/helpers/char_tokenizer.py" & _dyn_pids+=("$!")
wait_file tok.port
tok_url="http://127.0.0.1:$(cat tok.port)"
start_pub 0; start_pub 1
start_mocker w0 --worker-id 0 --block-size $bs --speedup-ratio 100
start_mocker w1 --worker-id 1 --block-size $bs --speedup-ratio 100
start_router r --worker "$w0_url" --worker "$w1_url" --health-timeout-ms 10000 --router-mode kv --kv-cache-block-size $bs \
  --router-kv-events --worker-kv-events "$w0_url=$(ev 0)" --worker-kv-events "$w1_url=$(ev 1)" --tokenizer-url "$tok_url"
sync_pubs 0 1
worker() { tr -d '\r' <h.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}'; }
post() {  # post PATH BODY: status and worker
  curl -s -m 10 -H "content-type: application/json" -D h.txt -o /dev/null -w '%{http_code}' "$r_url$1" -d "$2"
  echo " worker $(worker)"
}
q=$(printf 'refactor the parser %.0s' $(seq 4))
tools='[{"type":"function","function":{"name":"grep","parameters":{"type":"object"}}}]'
chat_body=$(jq -nc --arg q "$q" --argjson t "$tools" '{model: "m", max_tokens: 1, tools: $t,
  chat_template_kwargs: {enable_thinking: false}, reasoning_effort: "high",
  messages: [{role: "user", content: $q}]}')
# The engine's template text of each request (what char_tokenizer.py renders).
chat_text="tools:$(jq -c -S . <<<"$tools")
kwargs:{\"enable_thinking\":false,\"reasoning_effort\":\"high\"}
user:$q
"
msgs_body=$(jq -nc --arg q "$q" '{model: "m", max_tokens: 1,
  system: [{type: "text", text: "x-anthropic-billing-header: cc_version=2.1.3; cch=9f1e;"},
           {type: "text", text: "You are Claude Code, a coding agent."}],
  messages: [{role: "user", content: [{type: "text", text: $q}]},
             {role: "assistant", content: [{type: "tool_use", id: "toolu_1", name: "Read", input: {path: "p.c"}}]},
             {role: "user", content: [{type: "tool_result", tool_use_id: "toolu_1", content: "int parse(void);"}]}]}')
msgs_text="system:You are Claude Code, a coding agent.
user:$q
assistant:call:Read {\"path\": \"p.c\"}
tool:int parse(void);
"
resp_body=$(jq -nc --arg q "$q" '{model: "m", max_output_tokens: 1, instructions: "You are Codex.",
  input: [{type: "message", role: "user", content: $q},
          {type: "function_call", call_id: "c1", name: "shell", arguments: "{\"cmd\":\"ls\"}"},
          {type: "function_call_output", call_id: "c1", output: "parser.c"}]}')
resp_text="system:You are Codex.
user:$q
assistant:call:shell {\"cmd\":\"ls\"}
tool:parser.c
"
s=$(send 1 "$(stored "$chat_text" 1,2,3,4,5,6,7,8,9,10,11,12)"); wait_seq 1 "$s"
s=$(send 0 "$(stored "$msgs_text" 21,22,23,24,25,26,27,28,29,30,31,32)"); wait_seq 0 "$s"
s=$(send 1 "$(stored "$resp_text" 41,42,43,44,45,46,47,48,49,50)"); wait_seq 1 "$s"
# Three sends each: on a match every one goes to the worker holding the blocks (without one, ties
# between the two idle workers are broken at random).
post3() { for _ in 1 2 3; do post "$@"; done | sort | uniq -c | awk '{print $1 "x", $2, $3, $4}'; }
echo "== routed on the engine's tokens (blocks: chat and responses on worker 1, messages on worker 0)"
echo "chat with tools and template options: $(post3 /v1/chat/completions "$chat_body")"
echo "anthropic messages: $(post3 /v1/messages "$msgs_body")"
echo "responses: $(post3 /v1/responses "$resp_body")"
echo "== what the tokenizer was asked"
jq -c '{messages: [.messages[] | .role], tools: (.tools | length), chat_template_kwargs, add_generation_prompt}' tok.bodies.jsonl |
  uniq -c
echo "== precise routing unavailable: approximate, never a failed request"
prev=$(jq -c '. + {previous_response_id: "resp_1"}' <<<"$resp_body")
echo "responses after a stored response: $(post /v1/responses "$prev" | cut -d' ' -f1), again $(post /v1/responses "$prev" | cut -d' ' -f1)"
grep -c "warning: tokenizer: precise routing is unavailable for /v1/responses: previous_response_id" r.log
echo slow >tok.mode
start=$(date +%s.%N)
echo "slow tokenizer: $(post /v1/chat/completions "$chat_body" | cut -d' ' -f1)," \
  "answered within 2.5 s (the tokenizer takes 3 s): $(echo "$(date +%s.%N) - $start < 2.5" | bc | sed 's/1/yes/; s/0/no/')"
echo "tokenizer errors: $(curl -s "$r_url/metrics" | awk '$1=="dyn_tokenizer_errors_total"{print $2}')"
grep -c "warning: tokenizer: POST .*/tokenize failed.*routing is approximate" r.log
stop "$r_pid"
echo "== a tokenizer that takes prompts only (SGLang)"
echo prompt-only >tok.mode
start_router r2 --worker "$w0_url" --kv-cache-block-size $bs --tokenizer-url "$tok_url"
r_url=$r2_url
: >tok.bodies.jsonl
echo "chat: $(post /v1/chat/completions "$chat_body" | cut -d' ' -f1), messages: $(post /v1/messages "$msgs_body" | cut -d' ' -f1)," \
  "completions: $(post /v1/completions '{"model":"m","prompt":"once upon a time","max_tokens":1}' | cut -d' ' -f1)"
echo "asked: $(jq -r 'if has("prompt") then "prompt" else "messages" end' tok.bodies.jsonl | uniq -c | awk '{print $1 "x", $2}' | paste -sd' ')"
grep -c "warning: tokenizer: .*refused a chat request's messages.*precise routing is unavailable for chat, messages and responses" r2.log
