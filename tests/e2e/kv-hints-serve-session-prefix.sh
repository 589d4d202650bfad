# Shows that dyn-route serve --kv-policy keeps a session-prefix index (issue 49; Dynamo's
# SessionPrefixIndexer): per session and worker, the block lineage of its latest turn, root first,
# kept after the worker evicts the blocks (GET /v1/session_prefix), forgotten when the session
# ends; a kv.retain names that lineage (block_hashes) beside the session id. Session a's 4-block
# turn is evicted from dyn-mocker's 10-block pool by two other sessions (a's second turn finds
# nothing cached), yet its lineage stays listed; session b's last turn (x-dynamo-session-final)
# takes b's out.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
source "$DYN_ROOT/tests/e2e/helpers/kv_hints_serve.sh"
A=$(blocks a 4) B=$(blocks b 2) F1=$(blocks f 4) F2=$(blocks g 6)
start_pair lineage --kv-policy evict-on-final || exit 1
lineages() { curl -s "$r_url/v1/session_prefix" | jq -c '{sessions, dropped, max_sessions,
  lineages: [.lineages[] | {session_id, workers: [.workers[] | {worker, blocks}]}]}'; }
echo "a: cached $(send "$r_url" a "$A")"
echo "b: cached $(send "$r_url" b "$B")"
lineages
send "$r_url" f "$F1" >/dev/null
send "$r_url" g "$F2" >/dev/null
echo "a again (its blocks evicted): cached $(send "$r_url" a "$A")"
lineages
echo "b's last turn: cached $(send "$r_url" b "$B" -H 'x-dynamo-session-final: true')"
lineages
# The lineage's root is the first block's sequence hash, the same the request trace records.
root=$(curl -s "$r_url/v1/session_prefix" | jq -r '.lineages[] | select(.session_id == "a") | .workers[0].root')
stop "$r_pid"
stop "$m_pid"
# (grep, not jq: jq reads a u64 hash as a double)
echo "a's trace rows starting with the lineage's root: $(grep -c "\"session_id\":\"a\".*\"input_sequence_hashes\":\[$root," trace-lineage)"
