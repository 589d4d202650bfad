# Shows that a profile calibrated from a capture of a real endpoint recovers that endpoint's step
# times: dyn-mocker runs a known dyn JSON profile in real time (steps of 100 ms and more, so that
# the client and the HTTP path of a loaded test machine stay well inside one step), dyn-replay drives it in
# closed loops (three ISL/OSL pairs at concurrency 1, 2 and 4, 10 requests per client, streaming,
# exact output lengths, a pause between loops), and dyn-bench calibrate fits a profile to the
# request_end rows alone (the
# engine's token budget, chunking and KV pool given, as a user knows them). Each step time of the
# fitted profile, at the shapes these loops are made of (decodes of 2 and 4 sequences, a prefill
# of each length beside 1 and 3 decodes), is within 5 % of the true profile's; the fitted profile
# then predicts the capture through the simulator (dyn-bench fidelity) within 5 % too.
set -u
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
cat > true.json <<'JSON'
{"schema": "dyn.perf_profile.v1", "model": "m", "gpu": "mock", "tp": 1, "engine": "dyn-mocker", "engine_version": "test",
 "step_ms": {"base": 100, "prefill_step": 15, "prefill_token": 0.05, "prefill_attention": 0, "prefill_seq": 5,
             "decode_seq": 6, "kv_token": 0.008},
 "engine_settings": {"block_size": 16, "num_gpu_blocks": 100000, "max_num_seqs": 64,
                     "max_num_batched_tokens": 2048, "enable_chunked_prefill": true}}
JSON
start_mocker m --perf-profile true.json
id=1
for pair in "256 4" "1024 4" "512 8"; do
  read -r isl osl <<<"$pair"
  for c in 1 2 4; do
    rm -f w.jsonl
    for i in $(seq $((10 * c))); do
      # distinct hash ids: no prompt shares a cached block with another
      ids=$(seq -s, $id $((id + (isl + 511) / 512 - 1)))
      id=$((id + (isl + 511) / 512))
      echo "{\"input_length\": $isl, \"output_length\": $osl, \"hash_ids\": [$ids]}" >> w.jsonl
    done
    dyn-replay w.jsonl -u "$m_url" --endpoint-type completions --streaming --ignore-eos --concurrency $c \
      -m m >> rows.jsonl 2>replay.err || { cat replay.err >&2; exit 1; }
    sleep 0.3  # a pause between loops: calibrate tells runs apart by it
  done
done
echo "== the capture: closed loops found in the request_end rows"
jq -s -c 'group_by([.request.input_tokens, .request.output_tokens]) | map({isl: .[0].request.input_tokens,
  osl: .[0].request.output_tokens, requests: length, ok: (map(select(.dyn.status == "ok")) | length)})' rows.jsonl
dyn-bench calibrate rows.jsonl --max-num-batched-tokens 2048 --chunked-prefill on --max-num-partial-prefills 0 \
  --num-gpu-blocks-override 100000 --max-num-seqs 64 --gpu mock --engine dyn-mocker --engine-version test \
  -o fit.json --format json > cal.json
jq -c '{profile: .profile | {model, gpu, tp, engine, engine_version, settings: .engine_settings}, train_rows: .train.rows, held_out_rows: .held_out.rows}' cal.json
echo "== step times: fitted vs true at the shapes the loops ran (within 5 %)"
step() {  # step FILE P NP D K -> ms
  jq -r --argjson p "$2" --argjson np "$3" --argjson d "$4" --argjson k "$5" '.step_ms |
    [.base, (if $p > 0 then .prefill_step else 0 end), $p * .prefill_token, ($p * $p / 2) * .prefill_attention,
     $np * .prefill_seq, $d * .decode_seq, $k * .kv_token] | add | if . < 1 then 1 else . end' "$1"
}
# The steps these loops are made of: decodes of all c sequences, and a prefill beside the c - 1
# others decoding (a closed loop's steady state), at each ISL (contexts ISL + half the output).
for pair in "256 4" "1024 4" "512 8"; do
  read -r isl osl <<<"$pair"
  ctx=$((isl + osl / 2))
  for shape in "0 0 2 $((2 * ctx))" "0 0 4 $((4 * ctx))" "$isl 1 1 $ctx" "$isl 1 3 $((3 * ctx))"; do
    read -r p np d k <<<"$shape"
    t=$(step true.json $p $np $d $k)
    f=$(step fit.json $p $np $d $k)
    jq -rn --argjson t "$t" --argjson f "$f" --arg s "P=$p Np=$np D=$d K=$k" \
      '"\($s): \(if ((($f - $t) / $t) | fabs) <= 0.05 then "within 5 %" else "OFF by \((($f - $t) / $t * 1000 | round) / 10) % (true \($t), fitted \($f))" end)"'
  done
done
echo "== the fitted profile predicts the capture through the simulator"
dyn-bench fidelity rows.jsonl --perf-profile fit.json --format json |
  jq -r '"TTFT MAPE within 5 %: \(.ttft_mape_pct <= 5)", "TPOT MAPE within 5 %: \(.tpot_mape_pct <= 5)"'
