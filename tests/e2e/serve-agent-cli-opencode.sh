# Shows that a real agent CLI, OpenCode 1.18.33 (npm opencode-ai, installed by this test into its
# temporary folder), spawns a subagent through dyn-route serve over two dyn-mocker workers, and that
# the router's trace shows the root and the subagent as distinct sessions linked by parent, each on
# one worker (hard affinity). OpenCode speaks Chat Completions and sends x-session-id and, on the
# child, x-parent-session-id. Configured as in data/agent-headers/captured/README.md. The
# scripted replies (--replies): the root's first turn (offered `task`) calls `task`; the subagent's
# first turn (its prompt carries the marker) calls `glob`; everything else, including OpenCode's
# title request and the root's turn after the tool result, answers "DONE".
# Skipped (exit 77) only when npm cannot install the package.
source "$DYN_ROOT/tests/e2e/helpers/agent_cli.sh"
npm_install_or_skip opencode-ai@1.18.33
cat >replies.jsonl <<'J'
{"offered":"task","first_turn":true,"tool_call":{"name":"task","arguments":{"description":"say hello","prompt":"SUBAGENT-MARKER-1: list the markdown files, then reply DONE.","subagent_type":"general"}}}
{"match":"SUBAGENT-MARKER-1","first_turn":true,"tool_call":{"name":"glob","arguments":{"pattern":"*.md"}}}
{"text":"DONE"}
J
start_traced_pair replies.jsonl
mkdir -p work
cat >work/opencode.json <<J
{
  "provider": {
    "mock": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Mock",
      "options": { "baseURL": "$r_url/v1", "apiKey": "dummy" },
      "models": { "mock-model": { "name": "Mock Model", "tool_call": true } }
    }
  },
  "model": "mock/mock-model",
  "small_model": "mock/mock-model",
  "autoupdate": false,
  "share": "disabled"
}
J
CLI_ENV=(OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1)
run_cli "$PWD/cli/node_modules/.bin/opencode" run "Use the task tool to have a subagent say hello."
trace_facts
