# Shows session affinity in dyn-route decide (SPEC 2): on the AIPerf session fixture the rows of a
# session keep their worker while the TTL holds (round-robin would move them); a gap longer than the
# TTL expires the binding; subagents share their parent's group binding; header rows (case 21,
# lower-case Dynamo headers) carry the identity and a second identical request follows the pin;
# Dynamo request_end rows are routed with their recorded agent_context.
f="$DYN_DATA/aiperf/test_trace_session_ids.jsonl"
row() { jq -r '[.request.request_id, (.agent_context.session_id // "-"), .request.worker.decode_worker_id, .dyn.binding] | @tsv'; }
echo "== aiperf fixture, round-robin, no affinity"
dyn-route decide --workers 4 "$f" | row
echo "== aiperf fixture, round-robin, affinity 300 s"
dyn-route decide --workers 4 --router-session-affinity-ttl-secs 300 "$f" | row
echo "== TTL 10 s: a 5 s gap keeps the binding, a 20 s idle gap expires it"
printf '%s\n' '{"session_id":"s","timestamp":0,"input_length":10,"output_length":1,"hash_ids":[1]}' \
  '{"session_id":"s","timestamp":5000,"input_length":10,"output_length":1,"hash_ids":[1]}' \
  '{"session_id":"s","timestamp":30000,"input_length":10,"output_length":1,"hash_ids":[1]}' \
  '{"session_id":"c1","parent_session_id":"s","timestamp":30001,"input_length":10,"output_length":1,"hash_ids":[2]}' \
  '{"session_id":"c2","parent_session_id":"s","timestamp":30002,"input_length":10,"output_length":1,"hash_ids":[3]}' |
  DYN_ROUTER_SESSION_AFFINITY_TTL_SECS=10 dyn-route decide --workers 3 | row
echo "== header rows (case 21 headers), kv mode, hard affinity"
h='{"x-dynamo-session-id":"research-run-42:researcher","x-dynamo-parent-session-id":"research-run-42:planner"}'
b='{"model":"my-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
printf '%s\n' "{\"headers\":$h,\"body\":$b,\"timestamp\":0}" "{\"headers\":$h,\"body\":$b,\"timestamp\":100}" \
  '{"headers":{"x-request-id":"r-3","x-dynamo-worker-instance-id":"1"},"body":{"prompt":"explicit"},"timestamp":200}' |
  dyn-route decide --workers 3 --router-mode kv --router-session-affinity-ttl-secs 60 |
  jq -c '[.agent_context, .request.request_id, .request.x_request_id, .request.input_tokens, .request.worker.decode_worker_id, .dyn.binding]'
echo "== Dynamo request_end rows (documented examples)"
dyn-route decide --workers 2 --router-mode kv --router-session-affinity-ttl-secs 60 \
  "$DYN_DATA/dynamo-docs/request_trace_examples.jsonl" 2>err.txt |
  jq -c '[.event_time_unix_ms, .agent_context.session_id, .request.request_id, .request.input_tokens, .request.worker.decode_worker_id, .dyn.binding, .dyn.request_blocks]'
cat err.txt
