# Shows the session header aliases in both settings: by default (as Dynamo) only Codex's
# thread-id names a Codex session, so a bare session-id or session_id (Hermes sends its cache
# scope, shared by unrelated runs, under that name) and the older underscore thread_id give no
# identity; --session-header-aliases (or DYN_SESSION_HEADER_ALIASES=1) reads them too, the thread
# id first. The same setting holds in dyn-route normalize, decide and serve.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
printf '%s\n' \
  '{"name":"thread-id","headers":{"thread-id":"th-1","session-id":"run-1"}}' \
  '{"name":"thread_id","headers":{"thread_id":"th-2","session_id":"run-1"}}' \
  '{"name":"bare session-id","headers":{"session-id":"run-3"}}' \
  '{"name":"hermes session_id","headers":{"session_id":"cron_job42"}}' >rows.jsonl
show() { jq -r '[.name, (.agent_context.session_id // "-"), (.source // "-")] | @tsv'; }
echo "== normalize, default"
dyn-route normalize rows.jsonl | show
echo "== normalize --session-header-aliases"
dyn-route normalize --session-header-aliases rows.jsonl | show
echo "== normalize, DYN_SESSION_HEADER_ALIASES=1 (and the flag's negation wins over it)"
DYN_SESSION_HEADER_ALIASES=1 dyn-route normalize rows.jsonl | show | awk -F'\t' '{print $1 "\t" $2}' | paste -sd' '
DYN_SESSION_HEADER_ALIASES=1 dyn-route normalize --no-session-header-aliases rows.jsonl | show | cut -f2 | paste -sd' '
echo "== decide: two turns of the cron scope bind only with aliases"
jq -c 'select(.name == "hermes session_id") | {headers, body: {prompt: "hello world, a prompt of some length"}, timestamp: (0, 1000)}' rows.jsonl >turns.jsonl
for a in "" --session-header-aliases; do
  dyn-route decide --workers 2 --router-session-affinity-ttl-secs 60 $a turns.jsonl |
    jq -r '[(.agent_context.session_id // "-"), .dyn.binding] | @tsv' | paste -sd' '
done
echo "== serve: the router's trace"
start_mocker w --speedup-ratio 100
for a in "" --session-header-aliases; do
  start_router r --worker "$w_url" --request-trace --request-trace-file-path "tr$a" --request-trace-file-format jsonl $a
  curl -sS -o /dev/null -H 'session-id: run-3' -H 'content-type: application/json' "$r_url/v1/chat/completions" \
    -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
  stop "$r_pid"
  echo "${a:-default}: $(jq -c '.agent_context // "no agent_context"' "tr$a")"
done
