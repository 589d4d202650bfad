# Shows that dyn-route serve --kv-policy parent-retain keeps a parent's blocks on its worker while
# its subagent runs (SPEC 6.4), as --sim does (kv-hints-sim-parent-retain): subagent c of session
# p (x-dynamo-parent-session-id) spawns; session f then needs room in dyn-mocker's 10-block pool
# and LRU evicts p's blocks (the oldest) without the policy, so p's next turn finds nothing
# cached. With it, the spawn sends kv.retain of p's blocks to p's worker's POST /v1/kv_hints
# (not tied to a request), the worker pins them, and p's next turn finds its 64-token prefix.
# The router counts the hint with the worker's outcome; the subagent's trace row says what was
# sent, and where.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
P=$(blocks p 4) C=$(blocks c 4) F=$(blocks f 6)
for policy in none parent-retain; do
  flags=()
  [[ $policy == none ]] || flags=(--kv-policy "$policy")
  start_pair "$policy" "${flags[@]}" || exit 1
  send "$r_url" p "$P" >/dev/null
  send "$r_url" c "$C" -H 'x-dynamo-parent-session-id: p' >/dev/null
  [[ $policy == none ]] || wait_outcomes "$r_url" 1 || exit 1
  send "$r_url" f "$F" >/dev/null
  echo "p again: cached tokens $(send "$r_url" p "$P")"
  end_pair "$policy"
done
