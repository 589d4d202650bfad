# Shows dyn-trace convert: Dynamo -> Mooncake (SPEC 6.2; case 26 keeps 4 distinct ids; mixed
# block sizes rejected), Mooncake -> Dynamo's agentic form, and Azure CSV (CRLF, 7 fractional
# digits, no final newline) -> Mooncake with fresh hash ids per row. request_end records without
# request.replay are never lost silently: a warning counts them, and none with it is an error.
c="$DYN_CASES/26-u64-hash-precision/trace.jsonl"
dyn-trace convert --from dynamo "$c" 2>/dev/null
dyn-trace convert --from dynamo "$c" 2>/dev/null | jq -c '.hash_ids | unique | length'
echo "--- documented examples"
dyn-trace convert --from dynamo "$DYN_DATA/dynamo-docs/request_trace_examples.envelope.jsonl" 2>/dev/null
echo "--- explicit block size that differs"
expect_status 3 dyn-trace convert --from dynamo --block-size 16 "$c" >/dev/null 2>&1
echo "--- mixed block sizes"
sed 's/"trace_block_size":64/"trace_block_size":32/' "$c" >b32.jsonl
cat "$c" b32.jsonl | dyn-trace convert --from dynamo 2>&1 >/dev/null | sed 's/<stdin>:[0-9]*/<stdin>:N/' | head -2; 
cat "$c" b32.jsonl | expect_status 3 dyn-trace convert --from dynamo >/dev/null 2>&1
echo "--- mooncake sessions -> agentic"
printf '%s\n' '{"timestamp":0,"session_id":"a","input_length":1000,"output_length":10,"hash_ids":[0,1]}' \
  '{"timestamp":10,"input_length":10,"output_length":10,"hash_ids":[7]}' \
  '{"session_id":"a","delay":1500,"input_length":1500,"output_length":10,"hash_ids":[0,1,2]}' \
  '{"timestamp":100,"session_id":"b","request_id":"b-first","input_length":512,"output_length":10,"hash_ids":[0]}' \
  '{"timestamp":5000,"session_id":"b","input_length":1024,"output_length":100,"hash_ids":[0,3]}' |
  dyn-trace convert --from mooncake --to agentic
echo "--- azure csv"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,1025,10\r\n2023-11-16 18:17:04.0319600,512,8\r\n2023-11-16 18:17:05.0000000,3,1' >az.csv
dyn-trace convert --from azure-csv az.csv
dyn-trace convert --from azure-csv --block-size 256 az.csv | jq -c .hash_ids
a="$DYN_DATA/azure-llm-2023/AzureLLMInferenceTrace_code.csv.gz"
expect_status 0 dyn-trace convert --from azure-csv "$a" >code.jsonl
wc -l <code.jsonl
tail -1 code.jsonl | jq -c '{timestamp, input_length, output_length, n: (.hash_ids|length), last: .hash_ids[-1]}'
jq -s '[.[].hash_ids[]] | (length == (unique|length))' code.jsonl
echo "--- request_end records without request.replay"
jq -c 'del(.request.replay)' "$c" >norep.jsonl
expect_status 3 dyn-trace convert --from dynamo norep.jsonl 2>&1 | sed 's/^dyn-trace: //'
d="$DYN_DATA/dynamo-docs/request_trace_examples.jsonl"
{ jq -c 'del(.request.replay)' "$d" | head -1; tail -n +2 "$d"; } >mixed.jsonl
dyn-trace convert --from dynamo mixed.jsonl 2>&1 >/dev/null | sed 's/^dyn-trace: //'
