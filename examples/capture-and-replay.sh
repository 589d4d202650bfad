#!/usr/bin/env bash
# User stories: capture a client's traffic with dyn-trace capture, then replay the captured
# session against a live endpoint with dyn-replay.
#  1. start a worker (dyn-mocker here; any OpenAI-compatible endpoint works) and a recording proxy
#     in front of it (dyn-trace capture writes Dynamo request_end rows, never prompt text);
#  2. a client (curl) runs a three-turn agent session through the proxy, as Claude Code would send
#     it (X-Claude-Code-Session-Id), each turn resending the growing conversation;
#  3. stop the proxy (SIGTERM flushes the trace) and look at the captured rows;
#  4. replay the captured session against a fresh worker: dyn-replay reads the Dynamo trace
#     directly (sequence hashes become synthetic prompts with the same prefix sharing) and writes
#     one client-side request_end row per turn.
# Usage: examples/capture-and-replay.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/tools.sh" dyn-mocker dyn-trace dyn-replay
tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 200); do [[ -s "$1" ]] && { cat "$1"; return; }; sleep 0.05; done; return 4; }

dyn-mocker --port 0 --port-file "$tmp/worker.port" --speedup-ratio 20 2>/dev/null & pids+=($!)
worker="http://127.0.0.1:$(wait_port "$tmp/worker.port")"
dyn-trace capture --upstream "$worker" --port 0 --port-file "$tmp/proxy.port" \
  --request-trace-file-path "$tmp/capture" 2>/dev/null & proxy_pid=$!; pids+=($proxy_pid)
proxy="http://127.0.0.1:$(wait_port "$tmp/proxy.port")"

# A three-turn session: every turn resends the conversation so far plus one new user message.
messages='[{"role":"system","content":"You are a careful coding agent. Think step by step."}]'
for turn in 1 2 3; do
  messages=$(jq -c --arg t "Turn $turn: read the next file and summarise what it does, in detail." \
    '. + [{"role":"user","content":$t}]' <<<"$messages")
  reply=$(curl -sf "$proxy/v1/chat/completions" -H 'content-type: application/json' \
    -H 'X-Claude-Code-Session-Id: demo-session-1' \
    -d "$(jq -cn --argjson m "$messages" '{model:"mock-model",messages:$m,max_tokens:24,stream:false}')" |
    jq -r '.choices[0].message.content')
  messages=$(jq -c --arg r "$reply" '. + [{"role":"assistant","content":$r}]' <<<"$messages")
done
kill -TERM "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true

echo "captured rows (session, input, cached, output tokens):"
dyn-trace cat "$tmp"/capture.*.jsonl.gz |
  dyn-trace filter --fields 'session=agent_context.session_id,input=request.input_tokens,cached=request.cached_tokens,output=request.output_tokens' --format tsv

# Replay the captured session against a fresh worker (cold cache), turns in order as a closed loop.
dyn-mocker --port 0 --port-file "$tmp/fresh.port" --speedup-ratio 20 2>/dev/null & pids+=($!)
fresh="http://127.0.0.1:$(wait_port "$tmp/fresh.port")"
dyn-trace cat "$tmp"/capture.*.jsonl.gz |
  dyn-replay - --url "$fresh" --streaming --no-progress 2>/dev/null >"$tmp/replayed.jsonl"
echo "replayed turns (session, input, cached, status):"
jq -r '[.agent_context.session_id, .request.input_tokens, .request.cached_tokens, .dyn.status] | @tsv' "$tmp/replayed.jsonl"
