# Shows that a real agent CLI, Codex 0.171.0 (npm @openai/codex, installed by this test into its
# temporary folder), spawns a subagent through dyn-route serve over two dyn-mocker workers, and that
# the router's trace shows the root and the subagent as distinct sessions linked by parent, each on
# one worker (hard affinity). Codex speaks only the Responses API (streamed /v1/responses, with
# namespace tools) and sends thread-id and, on the child, x-codex-parent-thread-id. Configured as in
# data/agent-headers/captured/README.md. The scripted replies (--replies): the root's first
# turn calls multi_agent_v1 `spawn_agent`; after its result the root calls `wait_agent` on the
# agent_id that spawn_agent returned (${result.agent_id}); the subagent's first turn calls
# `exec_command` (cat README.md); everything else answers "DONE".
# Skipped (exit 77) only when npm cannot install the package.
source "$DYN_ROOT/tests/e2e/helpers/agent_cli.sh"
npm_install_or_skip @openai/codex@0.171.0
cat >replies.jsonl <<'J'
{"offered":"spawn_agent","first_turn":true,"tool_call":{"name":"spawn_agent","arguments":{"message":"SUBAGENT-MARKER-1: show the README, then reply DONE."}}}
{"after_tool":"spawn_agent","offered":"wait_agent","tool_call":{"name":"wait_agent","arguments":{"targets":["${result.agent_id}"],"timeout_ms":60000}}}
{"match":"SUBAGENT-MARKER-1","first_turn":true,"tool_call":{"name":"exec_command","arguments":{"cmd":"cat README.md"}}}
{"text":"DONE"}
J
start_traced_pair replies.jsonl
mkdir -p codex-home
cat >codex-home/config.toml <<J
model = "gpt-5.1-codex"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "$r_url/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
J
CLI_ENV=(CODEX_HOME="$PWD/codex-home" MOCK_API_KEY=dummy)
run_cli "$PWD/cli/node_modules/.bin/codex" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
  "Spawn a subagent to say hello."
trace_facts
