# Helpers for the KV event e2e tests (sourced after servers.sh): independent vLLM-format
# publishers (helpers/vllm_kv_events.py) driven through fifos, and the router's /metrics. The tests
# start their routers with --health-timeout-ms 10000: a /health poll slowed by a loaded machine must
# not take a worker out of routing, since these tests check where requests go.
py=/usr/bin/python3
kv="$DYN_ROOT/tests/e2e/helpers/vllm_kv_events.py"
# start_pub N: publisher N reading commands from fifo pN.in; endpoints in pN.json.
start_pub() {
  rm -f "p$1.in" "p$1.json"; mkfifo "p$1.in"
  $py "$kv" publish "p$1.json" <"p$1.in" >"p$1.out" 2>"p$1.err" &
  _dyn_pids+=("$!"); printf -v "p$1_pid" '%s' "$!"
  exec {fd}>"p$1.in"; printf -v "p$1_fd" '%s' "$fd"
  wait_file "p$1.json"
}
# ev N: "PUB,REPLAY" addresses of publisher N.
ev() { jq -r '.endpoint + "," + .replay_endpoint' "p$1.json"; }
# send N JSON: one command to publisher N; prints the batch's sequence number.
send() {
  local fd="p$1_fd" before
  before=$(wc -l <"p$1.out")
  echo "$2" >&"${!fd}"
  for _ in $(seq 200); do [[ $(wc -l <"p$1.out") -gt $before ]] && break; sleep 0.02; done
  tail -1 "p$1.out" | awk '{print $2}'
}
# metric NAME WORKER: the router's sample of NAME for that worker (needs r_url).
metric() { curl -s "$r_url/metrics" | awk -v n="$1" -v w="worker=\"$2\"" '$1 ~ "^"n"\\{" && index($1, w) {print $2}' | head -1; }
# wait_seq N SEQ: until the router applied publisher N's batch SEQ.
wait_seq() {
  for _ in $(seq 250); do [[ "$(metric dyn_kv_events_last_seq "$1")" == "$2" ]] && return 0; sleep 0.02; done
  echo "router never reached batch $2 of worker $1 (at $(metric dyn_kv_events_last_seq "$1"))"
}
# sync_pubs N...: ZMQ drops what is published before a subscription reaches the publisher, so
# send empty batches until the router has seen one from each (later ones then arrive in order).
sync_pubs() {
  local n s
  for n in "$@"; do
    for _ in $(seq 100); do s=$(send "$n" '{"events":[]}'); [[ "$(metric dyn_kv_events_last_seq "$n")" -ge 0 ]] 2>/dev/null && break; sleep 0.05; done
    wait_seq "$n" "$s"
  done
}
# stored TEXT IDS: a batch with the BlockStored of TEXT's complete blocks of $bs tokens, one token
# per character (as helpers/char_tokenizer.py counts), under the engine block ids IDS (1,2,...).
stored() {
  jq -nc --arg t "$1" --argjson ids "[$2]" --argjson bs "$bs" '
    ($t | explode) as $tok | (($tok | length) / $bs | floor) as $n |
    {events: [{type: "BlockStored", block_hashes: $ids[0:$n], parent_block_hash: null,
               token_ids: $tok[0:($n * $bs)], block_size: $bs, lora_id: null, medium: "GPU"}]}'
}
