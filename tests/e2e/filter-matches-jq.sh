# Shows that dyn-trace filter selects and projects exactly what the equivalent jq program does,
# on Dynamo's documented records (bare and enveloped) and on request_end rows generated from the
# Mooncake trace, and that selected rows are the original bytes.
d="$DYN_DATA/dynamo-docs"
"$DYN_ROOT/bench/gen-request-end.sh" --rows 800 >gen.jsonl
unwrap='(if (has("event") and has("timestamp") and (has("event_type")|not)) then .event else . end)'
# same NAME FILE JQ_PROGRAM -- FILTER_ARGS...: rows compared after jq -c normalization (jq 1.6
# rewrites u64 values as doubles on both sides, so only the selection is compared here).
same() {
  local name="$1" file="$2" prog="$3"; shift 4
  dyn-trace filter "$file" "$@" | jq -c . >got.jsonl
  jq -c "$unwrap | $prog" "$file" >want.jsonl
  if cmp -s got.jsonl want.jsonl; then echo "same $name: $(wc -l <got.jsonl) rows"
  else echo "DIFF $name"; diff want.jsonl got.jsonl | head -5; fi
}
# raw NAME FILE JQ_RAW_PROGRAM -- FILTER_ARGS...: text output compared byte for byte.
raw() {
  local name="$1" file="$2" prog="$3"; shift 4
  dyn-trace filter "$file" "$@" >got.txt
  jq -r "$unwrap | $prog" "$file" >want.txt
  if cmp -s got.txt want.txt; then echo "same $name: $(wc -l <got.txt) lines"
  else echo "DIFF $name"; diff want.txt got.txt | head -5; fi
}
f="$d/request_trace_examples.jsonl"
same event "$f" 'select(.event_type=="request_end")' -- --event request_end
same two-events "$f" 'select(.event_type=="request_end" or .event_type=="tool_end")' -- --event request_end --event tool_end
same session "$f" 'select(.agent_context.trajectory_id=="research-run-42:researcher" or .agent_context.session_id=="research-run-42:researcher" or .session_id=="research-run-42:researcher")' -- --session research-run-42:researcher
same session-old-schema "$f" 'select(.agent_context.session_id=="research-run-42")' -- --session research-run-42
same parent "$f" 'select(.agent_context.parent_session_id=="research-run-42:planner" or .agent_context.parent_trajectory_id=="research-run-42:planner")' -- --parent research-run-42:planner
same where-number "$f" 'select((.request.output_tokens|type)=="number" and .request.output_tokens>=16)' -- --where 'request.output_tokens>=16'
same where-substring "$f" 'select((.agent_context.parent_session_id|type)=="string" and (.agent_context.parent_session_id|contains("planner")))' -- --where 'agent_context.parent_session_id~planner'
same where-not-equal "$f" 'select(.event_source!="dynamo")' -- --where 'event_source!=dynamo'
same window "$f" 'select(.event_time_unix_ms>=1777312801000 and .event_time_unix_ms<1777312801500)' -- --since 1777312801000 --until 1777312801500
same envelope "$d/request_trace_examples.envelope.jsonl" 'select(.event_type=="request_end" and .agent_context.session_id!=null)' -- --event request_end --where 'agent_context.session_id~research'
same project "$f" '{event_type: .event_type, sid: .agent_context.session_id, tool: .request.finish_reason_metadata.tool_calls[0].name}' -- --fields event_type,sid=agent_context.session_id,tool=request.finish_reason_metadata.tool_calls.0.name
raw tsv "$f" '[.event_type, .agent_context.session_id, .request.model, .request.output_tokens]|@tsv' -- --fields event_type,agent_context.session_id,request.model,request.output_tokens --format tsv --no-header
raw csv "$f" 'select(.event_type=="request_end")|[.schema, .agent_context.session_id, .request.output_tokens]|@csv' -- --event request_end --fields schema,s=agent_context.session_id,request.output_tokens --format csv --no-header
echo "--- header lines"
dyn-trace filter "$f" --fields event_type,s=agent_context.session_id --format tsv | head -1
dyn-trace filter "$f" --fields event_type,s=agent_context.session_id --format csv | head -1
echo "--- generated request_end rows"
g=gen.jsonl
same cached "$g" 'select(.event_type=="request_end" and .request.cached_tokens>0)' -- --event request_end --where 'request.cached_tokens>0'
same worker "$g" 'select(.request.worker.decode_worker_id==3)' -- --worker 3
same session-with-subagents "$g" 'select(.agent_context.session_id=="sess-974" or .agent_context.parent_session_id=="sess-974")' -- --session sess-974 --with-subagents
same session-only "$g" 'select(.agent_context.session_id=="sess-978")' -- --session sess-978
same parent-gen "$g" 'select(.agent_context.parent_session_id=="sess-6624")' -- --parent sess-6624
same and "$g" 'select(.request.input_tokens>=10000 and .request.model=="mooncake-replay" and .request.ttft_ms<150.5)' -- --where 'request.input_tokens>=10000' --where 'request.model=mooncake-replay' --where 'request.ttft_ms < 150.5'
same ratio "$g" 'select(.request.kv_hit_rate>0.5)' -- --where 'request.kv_hit_rate>0.5'
same tool-calls "$g" 'select(.request.finish_reason_metadata.tool_calls[0].name=="search")' -- --where 'request.finish_reason_metadata.tool_calls.0.name=search'
raw gen-tsv "$g" 'select(.request.cached_tokens<=512)|[.agent_context.session_id, .request.input_tokens, .request.ttft_ms, .request.worker.decode_worker_id]|@tsv' -- --where 'request.cached_tokens<=512' --fields agent_context.session_id,request.input_tokens,request.ttft_ms,request.worker.decode_worker_id --format tsv --no-header
echo "--- selected rows are the input bytes"
dyn-trace filter "$g" --where 'request.cached_tokens>0' | grep -cvxF -f "$g"
gzip -c "$g" | dyn-trace filter --where 'request.cached_tokens>0' | cmp - <(dyn-trace filter "$g" --where 'request.cached_tokens>0') && echo gzip-stdin-same
echo "--- subagent chains: root -> child -> grandchild, learned in one pass"
printf '%s\n' '{"event_type":"request_end","agent_context":{"session_id":"root"},"request":{"request_id":"r1"}}' \
  '{"event_type":"request_end","agent_context":{"session_id":"other"},"request":{"request_id":"o1"}}' \
  '{"event_type":"request_end","agent_context":{"session_id":"child","parent_session_id":"root"},"request":{"request_id":"c1"}}' \
  '{"event_type":"request_end","agent_context":{"session_id":"grandchild","parent_session_id":"child"},"request":{"request_id":"g1"}}' \
  '{"event_type":"request_end","agent_context":{"session_id":"child"},"request":{"request_id":"c2"}}' \
  '{"event_type":"request_end","agent_context":{"session_id":"x","parent_session_id":"other"},"request":{"request_id":"x1"}}' >tree.jsonl
dyn-trace filter tree.jsonl --session root --with-subagents --fields request.request_id --format tsv --no-header | tr '\n' ' '; echo
dyn-trace filter tree.jsonl --session root --fields request.request_id --format tsv --no-header | tr '\n' ' '; echo
