# Shows priority scheduling in the simulator (SPEC 8): dyn-replay --sim with one engine running one
# sequence at a time. Behind a long first request, three arrive together with workload priorities
# (Dynamo's scale, higher is more important) 1, 5 and 1; --sim converts them to the engine's
# polarity as Dynamo does, so under vLLM's --scheduling-policy priority and SGLang's
# --enable-priority-scheduling alike the priority-5 request goes first, equal ones in arrival
# order; with fcfs, arrival order.
printf '%s\n' \
  '{"timestamp":0,"request_id":"first","input_length":128,"output_length":64,"hash_ids":[1,2]}' \
  '{"timestamp":5,"request_id":"p1-a","input_length":128,"output_length":4,"hash_ids":[3,4],"priority":1}' \
  '{"timestamp":5,"request_id":"p5","input_length":128,"output_length":4,"hash_ids":[5,6],"priority":5}' \
  '{"timestamp":5,"request_id":"p1-b","input_length":128,"output_length":4,"hash_ids":[7,8],"priority":1}' >wl.jsonl
for flags in "" "--scheduling-policy priority" "--enable-priority-scheduling"; do
  # shellcheck disable=SC2086
  expect_status 0 dyn-replay --sim --workers 1 --max-num-seqs 1 --block-size 64 $flags wl.jsonl >out.jsonl 2>/dev/null
  echo "${flags:-fcfs}: $(jq -rs 'sort_by(.event_time_unix_ms) | map(.request.request_id) | join(" ")' out.jsonl)"
done
