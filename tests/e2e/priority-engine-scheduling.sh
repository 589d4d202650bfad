# Shows the mock engine's priority scheduling in both polarity conventions (SPEC 8): dyn-mocker
# with --max-num-seqs 1 runs one sequence at a time, so requests waiting behind a long stream are
# served in admission order. Three wait with body priorities b 5, c 1, d 5: under vLLM's
# --scheduling-policy priority lower values go first (c, b, d); under SGLang's
# --enable-priority-scheduling higher values go first (b, d, c), equal ones in arrival order; with
# the default fcfs, arrival order. A priority that is not a 32-bit integer is 400, and the SGLang
# switch with vLLM's option, or its polarity flag alone, is a usage error.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
long='{"model":"mock-model","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"long"}]}'
short() { echo "{\"model\":\"mock-model\",\"max_tokens\":2,\"priority\":$1,\"messages\":[{\"role\":\"user\",\"content\":\"short\"}]}"; }
waiting() { curl -sS "$1/metrics" | awk 'index($1, "dyn_mocker_num_requests_waiting") == 1 {print $2}'; }
order() {  # order NAME [MOCKER FLAGS...]: the order b, c, d are served in behind a stream
  local name=$1 url pids=() n p
  start_mocker "$name" --max-num-seqs 1 --speedup-ratio 0.5 "${@:2}"
  url="${name}_url"; url=${!url}
  curl -sS -N -o "$name.s" -H 'content-type: application/json' "$url/v1/chat/completions" -d "$long" &
  local s=$!
  for i in $(seq 1 200); do [[ -s $name.s ]] && break; sleep 0.05; done
  rm -f "$name.order"
  for n in b:5 c:1 d:5; do
    (curl -sS -o /dev/null -H 'content-type: application/json' "$url/v1/chat/completions" -d "$(short "${n#*:}")" &&
      echo "${n%%:*}" >>"$name.order") &
    pids+=($!)
    for i in $(seq 1 200); do [[ $(waiting "$url") == "${#pids[@]}" ]] && break; sleep 0.05; done
  done
  kill "$s"; wait "$s" 2>/dev/null
  wait "${pids[@]}"
  local flags="${*:2}"
  echo "${flags:-fcfs}: $(paste -sd' ' "$name.order")"
  p="${name}_pid"; stop "${!p}"
}
order fcfs
order vllm --scheduling-policy priority
order sglang --enable-priority-scheduling
order sglow --enable-priority-scheduling --schedule-low-priority-values-first
echo "== bad input"
start_mocker m
echo "priority \"high\": $(curl -sS -o bad.txt -w '%{http_code}' -H 'content-type: application/json' "$m_url/v1/chat/completions" -d "$(short '"high"')") $(jq -r '.error.message' bad.txt)"
expect_status 2 dyn-mocker --enable-priority-scheduling --scheduling-policy priority 2>/dev/null
expect_status 2 dyn-mocker --schedule-low-priority-values-first 2>/dev/null
echo "usage errors: 2 2"
