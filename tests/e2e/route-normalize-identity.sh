# Shows that dyn-route normalize maps header rows to agent_context (SPEC 1): case 14 (Codex
# spellings and precedence, with and without the aliases), case 16 (nested Claude Code subagents),
# case 21 (lower-case Dynamo headers), every captured Claude Code / Codex / OpenCode request, and
# error rows with line numbers.
c="$DYN_CASES"
echo "== case 14 (sets b and d only with --session-header-aliases: Dynamo reads thread-id alone)"
for a in "" --session-header-aliases; do
  jq -c 'to_entries[] | {name: .key, headers: .value}' "$c/14-codex-header-spellings/headers.json" |
    dyn-route normalize $a | jq -r '[.name, (.agent_context.session_id // "-"), (.agent_context.parent_session_id // "-"), (.source // "-")] | @tsv'
done
echo "== case 16"
dyn-route normalize "$c/16-claude-nested-subagent/requests.jsonl" |
  jq -r '[.name, .agent_context.session_id, (.agent_context.parent_session_id // "-")] | @tsv'
echo "== case 21"
sed -n '2,/^\r\{0,1\}$/p' "$c/21-dynamo-header-lowercase/request.http" | tr -d '\r' | grep ':' |
  jq -R -s -c '{headers: [split("\n")[] | select(length > 0) | capture("^(?<n>[^:]+):[ ]*(?<v>.*)$") | [.n, .v]]}' |
  dyn-route normalize | jq -c '.agent_context'
echo "== captured (run, seq, role, depth, session, parent)"
for f in "$DYN_DATA"/agent-headers/captured/*.jsonl; do
  dyn-route normalize "$f" | jq -r '[.run, .seq_in_run, .role, (.agent_depth // "-"), (.agent_context.session_id // "-"), (.agent_context.parent_session_id // "-")] | @tsv'
done
echo "== errors"
printf '%s\n' '{"headers":{"x-session-id":"a","X-Session-Id":"b"}}' \
  "{\"headers\":{\"x-session-id\":\"$(printf 'x%.0s' $(seq 257))\"}}" \
  '{"headers":[["x-dynamo-worker-instance-id","w1"]]}' '{"headers":"nope"}' '{"headers":{"X-Session-ID":" ok "}}' |
  expect_status 3 dyn-route normalize 2>err.txt
cat err.txt
