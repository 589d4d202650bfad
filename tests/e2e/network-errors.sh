# Shows network errors (issue 21.9): dyn-replay against a port nothing listens on says
# "cannot connect to URL: Connection refused" and exits 4, with --model given or not (GET
# /v1/models failing is not a usage error); a replay in which every request failed (here every
# answer is HTTP 500) does not exit 0; a long error message from the server reaches the row
# whole. dyn-bind live on a dead router says the same and exits 4.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
printf '%s\n' '{"timestamp":0,"input_length":64,"output_length":2,"hash_ids":[1]}' \
  '{"timestamp":5,"input_length":64,"output_length":2,"hash_ids":[2]}' >wl.jsonl
echo "== no --model, nothing listening"
expect_status 4 dyn-replay --url "http://127.0.0.1:$port" wl.jsonl >out.jsonl 2>err.txt
sed "s/$port/PORT/g" err.txt | grep -v '^dyn-replay: note'
echo "== --model m, nothing listening"
expect_status 4 dyn-replay --url "http://127.0.0.1:$port" --model m wl.jsonl >out.jsonl 2>err.txt
echo "rows $(wc -l <out.jsonl)"
sed "s/$port/PORT/g" out.jsonl | jq -c '.dyn.error' | sort -u
sed "s/$port/PORT/g" err.txt | grep -v -e 'requests planned' -e '  errors'
long=$(python3 -c 'print("x" * 3000)')
jq -n --arg m "too long to cut: $long" '{"routes": [{"match": {"path": "/v1/chat/completions"}, "status": 500,
  "headers": [["Content-Type", "application/json"]], "framing": "length",
  "segments": [{"data": ({"error": {"message": $m, "type": "internal_error"}} | tojson)}]}]}' >fail.json
start_scripted w fail.json
echo "== every request got HTTP 500"
expect_status 4 dyn-replay --url "$w_url" --model m wl.jsonl >out.jsonl 2>err.txt
grep -o 'error: every request failed.*' err.txt
jq -r '"row error: \(.dyn.error.code) \(.dyn.error.type), message bytes \(.dyn.error.message | length)"' out.jsonl | sort -u
echo "== dyn-bind live, nothing listening"
expect_status 4 dyn-bind live --url "http://127.0.0.1:$port" >/dev/null 2>err.txt
sed "s/$port/PORT/g" err.txt
