# Shows that dyn-route serve --router-decision-log writes a route_decision row per placement into
# the request trace, beside request_end and joined to it by request.request_id: every candidate with
# its overlap, load terms and cost, the binding and the quality fields, and no prompt text. RATE
# samples per request id, so two replicas given the same x-request-id values log the same requests;
# a RATE outside [0, 1], or the log without a trace, is a usage error. dyn-bench audit reads the
# live trace with every piece of evidence it needs.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --block-size 16 --speedup-ratio 100
start_mocker w1 --block-size 16 --speedup-ratio 100
ws=(--worker "$w0_url" --worker "$w1_url" --router-mode kv --kv-cache-block-size 16 --health-timeout-ms 10000)
echo "== usage errors"
expect_status 2 dyn-route serve "${ws[@]}" --request-trace --router-decision-log=1.5 2>&1 | head -1
expect_status 2 dyn-route serve "${ws[@]}" --request-trace --router-decision-log=lots 2>&1 | head -1
expect_status 2 dyn-route serve "${ws[@]}" --router-decision-log 2>&1 | head -1
DYN_ROUTER_DECISION_LOG_SAMPLE_RATE=-1 expect_status 2 dyn-route serve "${ws[@]}" --request-trace 2>&1 | head -1

secret="the-secret-prompt-text"
turns() {  # turns URL: 3 sessions x 3 turns, each turn with an x-request-id
  local url=$1 s t msgs
  for s in a b c; do
    msgs="[{\"role\":\"user\",\"content\":\"$secret session $s $(printf 'lorem ipsum %.0s' $(seq 20))\"}]"
    for t in 1 2 3; do
      curl -sS -o /dev/null -H "x-dynamo-session-id: $s" -H "x-request-id: req-$s-$t" -H 'content-type: application/json' \
        "$url/v1/chat/completions" -d "{\"model\":\"m\",\"max_tokens\":2,\"messages\":$msgs}"
      msgs=$(grow "$msgs" "$t")
    done
  done
}
echo "== every request: a decision row joined to its request_end"
start_router r "${ws[@]}" --router-session-affinity-ttl-secs 60 --request-trace \
  --request-trace-file-path all.jsonl --request-trace-file-format jsonl --router-decision-log
turns "$r_url"
stop "$r_pid"
jq -s -r '[.[] | select(.event_type == "request_end")] as $e | [.[] | select(.event_type == "route_decision")] as $d |
  "request_end \($e | length), route_decision \($d | length)",
  "joined \([$e[] | .request.request_id as $id | select(any($d[]; .request.request_id == $id))] | length)",
  "same worker \([$e[] | . as $x | select(any($d[]; .request.request_id == $x.request.request_id and
     .request.worker.decode_worker_id == $x.request.worker.decode_worker_id))] | length)",
  "candidates per row \([$d[] | .dyn.explain.workers | length] | unique)",
  "candidate keys \($d[0].dyn.explain.workers[0] | keys_unsorted)",
  "decision keys \($d[0].dyn | keys_unsorted)",
  "bindings \([$d[] | .dyn.binding] | group_by(.) | map("\(.[0]) \(length)") | join(", "))",
  "agent_context on every row \([$d[] | select(.agent_context.session_id != null)] | length)",
  "request_end quality keys \([$e[0].dyn | keys_unsorted[] | select(test("predicted|stale|avoidable|kv_optimal"))])"' all.jsonl
echo "prompt text in the trace: $(grep -c "$secret" all.jsonl)"

echo "== RATE 0.5: the same requests sampled by two replicas"
for n in 1 2; do
  start_router "r$n" "${ws[@]}" --request-trace --request-trace-file-path "half$n.jsonl" \
    --request-trace-file-format jsonl --router-decision-log=0.5
  url="r${n}_url"; turns "${!url}"
  pid="r${n}_pid"; stop "${!pid}"
done
sampled() { jq -r 'select(.event_type == "route_decision") | .request.x_request_id' "$1" | sort; }
echo "replica 1 logged $(sampled half1.jsonl | wc -l) of 9; replica 2 the same ids: $(cmp -s <(sampled half1.jsonl) <(sampled half2.jsonl) && echo yes || echo no)"
echo "request_end rows: $(jq -s '[.[] | select(.event_type == "request_end")] | length' half1.jsonl)"
echo "== the environment variable sets RATE (0: none logged)"
DYN_ROUTER_DECISION_LOG_SAMPLE_RATE=0 start_router r3 "${ws[@]}" --request-trace --request-trace-file-path none.jsonl \
  --request-trace-file-format jsonl
turns "$r3_url"
stop "$r3_pid"
echo "route_decision rows: $(grep -c route_decision none.jsonl)"
echo "== dyn-bench audit reads the live trace: every request with all its evidence"
dyn-bench audit all.jsonl --kv-block-size 16 --format json | jq -c '.runs[0] | {source: .event_source,
  rows: [.request_end_rows, .route_decision_rows], requests: .total.requests, attributed: .total.attributed_requests,
  balanced: (.total.cold_tokens + .total.routing_tokens + .total.stale_tokens + .total.unexplained_tokens
             - .total.over_attributed_tokens == .total.miss_tokens)}'
