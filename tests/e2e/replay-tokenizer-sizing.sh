# Shows dyn-replay --tokenizer-url: each synthetic prompt is sized with the engine's POST /tokenize
# (here a stand-in tokenizer with one token per character, so the 4-byte convention would make
# prompts about 4x too long) until the request is exactly the row's input_length tokens. A
# dyn-route serve in front of dyn-mocker, asking the same stand-in, counts the tokens of every
# request it forwards (its request_end rows): they equal the workload's input_length, for chat
# (the template's "user:" and newline included) and completions. Without the flag they do not.
# An unreachable tokenizer stops the run before anything is sent (exit 4, the URL named);
# --tokenizer-url with --sim is a usage error.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
python3 "$DYN_ROOT/tests/e2e/helpers/char_tokenizer.py" & tok_pid=$!; _dyn_pids+=("$tok_pid")
wait_file tok.port
tok="http://127.0.0.1:$(cat tok.port)"
# Six rows: lengths inside a block, on a block edge, several blocks, two rows sharing a prefix.
cat >w.jsonl <<'J'
{"timestamp":0,"input_length":1,"output_length":2,"hash_ids":[1]}
{"timestamp":1,"input_length":37,"output_length":2,"hash_ids":[2]}
{"timestamp":2,"input_length":64,"output_length":2,"hash_ids":[3]}
{"timestamp":3,"input_length":150,"output_length":2,"hash_ids":[4,5,6]}
{"timestamp":4,"input_length":100,"output_length":2,"hash_ids":[7,8]}
{"timestamp":5,"input_length":128,"output_length":2,"hash_ids":[7,8]}
J
start_mocker w0 --speedup-ratio 100
# run NAME [dyn-replay ARGS]: replays w.jsonl through a router that counts with the stand-in.
run() {
  local name=$1; shift
  start_router "r$name" --worker "$w0_url" --health-timeout-ms 10000 --tokenizer-url "$tok" \
    --request-trace --request-trace-file-path "$PWD/tr$name"
  local url="r${name}_url" pid="r${name}_pid"
  expect_status 0 dyn-replay w.jsonl --url "${!url}" --block-size 64 --no-progress "$@" >"rows$name.jsonl" 2>"err$name.txt"
  stop "${!pid}"
  # The router's count of each forwarded request vs the workload row (request ids are row order).
  paste <(jq -r .input_length w.jsonl) \
        <(zcat "tr$name"* | jq -r '[(.request.x_request_id | ltrimstr("row-") | tonumber), .request.replay.input_length] | @tsv' | sort -n | cut -f2) |
    awk '{n++; if ($1 == $2) eq++} END {print n " requests, " eq+0 " with exactly input_length tokens"}'
}
echo "== chat, sized by the tokenizer"
run chat --tokenizer-url "$tok"
# input_length 1 cannot be reached in chat ("user:" and a newline are 6 tokens): that row says so.
jq -c 'select(.dyn.prompt_sizing) | .dyn.prompt_sizing' rowschat.jsonl
grep -c "warning: tokenizer: 1 of 6 prompts could not be sized to exactly input_length tokens" errchat.txt
echo "== completions, sized by the tokenizer"
run comp --endpoint-type completions --tokenizer-url "$tok"
echo "== rows sharing hash ids share their sized prompt's leading block"
jq -s -r '[.[] | select(.dyn.hash_ids == [7,8]) | .request.replay.input_sequence_hashes[0]] | unique | length' rowscomp.jsonl
echo "== chat without --tokenizer-url (4 bytes per token)"
run plain
echo "== the tokenizer is unreachable"
stop "$tok_pid"
expect_status 4 dyn-replay w.jsonl --url "$w0_url" --block-size 64 --no-progress --tokenizer-url "$tok" >rows-down.jsonl 2>err-down.txt
echo "rows $(wc -l <rows-down.jsonl)"
grep -c "error: --tokenizer-url: POST $tok/tokenize failed.*nothing was sent" err-down.txt
echo "== with --sim"
expect_status 2 dyn-replay w.jsonl --block-size 64 --sim --tokenizer-url "$tok" >/dev/null 2>err-sim.txt
grep -c "cannot be used with --sim" err-sim.txt
cat err*.txt >&2
