# Helpers for the real agent CLI e2e tests (sourced, not a test): install a CLI from npm into the
# test's temporary folder, start two scripted dyn-mocker workers behind dyn-route serve with
# request tracing, run the CLI as in data/agent-headers/captured/README.md, and print the
# facts the trace shows about the root agent and its subagent (no ids, ports or times).
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"

# npm_install_or_skip PACKAGE@VERSION: installs into ./cli (never globally); exit 77 when npm is
# missing or cannot install the package (no registry), with the reason on stderr.
npm_install_or_skip() {
  command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed" >&2; exit 77; }
  mkdir -p cli
  if ! (cd cli && npm init -y >/dev/null 2>&1 &&
        timeout 300 npm install --no-audit --no-fund --loglevel=error "$1" >npm.log 2>&1); then
    echo "skip: npm could not install $1 (registry unreachable?): $(tail -3 cli/npm.log | tr '\n' ' ')" >&2
    exit 77
  fi
}

# start_traced_pair REPLIES: two dyn-mocker workers scripted by REPLIES behind dyn-route serve
# (hard affinity, TTL 300 s, request trace to ./tr.*.jsonl.gz); sets r_url, r_pid.
start_traced_pair() {
  start_mocker w0 --worker-id 0 --replies "$1"
  start_mocker w1 --worker-id 1 --replies "$1"
  start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 300 \
    --router-session-affinity-mode hard --request-trace --request-trace-file-path "$PWD/tr"
}

# run_cli COMMAND...: runs the CLI in ./work (one README.md) with a fresh empty HOME, a clean
# environment (PATH and what the caller put in CLI_ENV), stdin from /dev/null, under timeout.
# Prints the exit status and the last line of its stdout; on failure its stderr tail goes to
# stderr.
run_cli() {
  mkdir -p home work
  [[ -f work/README.md ]] || echo "# scratch project" >work/README.md
  local rc=0
  (cd work && env -i PATH="$PATH" HOME="$PWD/../home" TERM=dumb NO_COLOR=1 "${CLI_ENV[@]}" \
     timeout 150 "$@" </dev/null >../cli.out 2>../cli.err) || rc=$?
  echo "cli exit status: $rc"
  echo "cli final text: $(sed 's/\x1b\[[0-9;]*m//g' cli.out | awk 'NF{l=$0} END{print l}')"
  if [[ $rc != 0 ]]; then
    echo "--- cli stderr (tail) ---" >&2; tail -30 cli.err >&2
    echo "--- router log (tail) ---" >&2; tail -10 r.log >&2
  fi
}

# trace_facts: stops the router (flushing its trace), then reads the trace with dyn-trace and
# prints what it shows about the root agent (the session without a parent) and its subagents.
trace_facts() {
  stop "$r_pid"
  dyn-trace cat tr.*.jsonl.gz >rows.jsonl
  local f='session=agent_context.session_id,parent=agent_context.parent_session_id,worker=request.worker.decode_worker_id,finish=request.finish_reason_metadata.finish_reason,tools=request.finish_reason_metadata.tool_calls,status=dyn.status'
  local roots root
  roots=$(dyn-trace filter --fields "$f" rows.jsonl | jq -r 'select(.parent == null) | .session' | sort -u)
  echo "requests in trace: $(wc -l <rows.jsonl)"
  echo "sessions in trace: $(jq -r '.agent_context.session_id' rows.jsonl | sort -u | wc -l)"
  echo "sessions without a parent: $(grep -c . <<<"$roots")"
  root=$(head -1 <<<"$roots")
  dyn-trace filter --session "$root" --fields "$f" rows.jsonl >root.jsonl
  dyn-trace filter --parent "$root" --fields "$f" rows.jsonl >sub.jsonl
  # One line per role: request count, sorted finish reasons (with tool names), workers used.
  local role file
  for role in root subagent; do
    file=$([[ $role == root ]] && echo root.jsonl || echo sub.jsonl)
    jq -s -r --arg role "$role" '
      "\($role) requests: \(length)",
      "\($role) finishes: \(map(.finish + (if .tools then ":" + (.tools | map(.name) | join(",")) else "" end)) | sort | join(" "))",
      "\($role) sessions: \(map(.session) | unique | length)",
      "\($role) workers: \(map(.worker) | unique | length)"' "$file"
  done
  jq -s -r --arg root "$root" --slurpfile sub sub.jsonl '
    "subagent session differs from root: \(if ($sub | length) > 0 and ($sub | all(.session != $root)) then "yes" else "no" end)",
    "subagent parent = root: \(if ($sub | length) > 0 and ($sub | all(.parent == $root)) then "yes" else "no" end)",
    "every request ok: \(if all(.dyn.status == "ok") then "yes" else "no" end)"' rows.jsonl
}
