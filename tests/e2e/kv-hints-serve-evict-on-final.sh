# Shows that dyn-route serve --kv-policy evict-on-final puts a finished session's own blocks first
# out on its worker (SPEC 6.4), as --sim does (kv-hints-sim-evict-on-final): session d's one turn
# is its last (x-dynamo-session-final); when session f needs room in dyn-mocker's 10-block pool,
# LRU evicts session o's older blocks without the policy, so o's next turn finds nothing cached.
# With it, d's request carries a kv.evict of its own blocks in nvext.kv_hint (applied by the
# worker at its completion), d's blocks go first and o's next turn finds its 64-token prefix.
# The router counts the hint, the worker reports it accepted, the trace row of d's request says
# what was sent. A body with an nvext of its own (evict-on-final-nvext) gets the hint added to it.
# A policy setting without its policy is a usage error.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
O=$(blocks o 4) D=$(blocks d 4) F=$(blocks f 6)
for policy in none evict-on-final evict-on-final-nvext; do
  flags=()
  [[ $policy == none ]] || flags=(--kv-policy evict-on-final)
  start_pair "$policy" "${flags[@]}" || exit 1
  extra=
  [[ $policy != *nvext ]] || extra=',"nvext":{"agent_hints":{"priority":1}}'
  send "$r_url" o "$O" >/dev/null
  body_extra=$extra send "$r_url" d "$D" -H 'x-dynamo-session-final: true' >/dev/null
  send "$r_url" f "$F" >/dev/null
  echo "o again: cached tokens $(send "$r_url" o "$O")"
  end_pair "$policy"
done
echo "== a policy's setting without the policy"
expect_status 2 dyn-route serve --worker http://127.0.0.1:9 --kv-policy-parent-ttl-s 5 2>err
grep -o 'kv-policy-parent-ttl-s needs.*' err
