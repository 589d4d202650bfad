# Shows that dyn-replay rejects a bad workload before sending anything (cases 06 and 08): the
# error names the file line and the numbers involved, the exit status is 3, and the unreachable
# URL is never contacted (a contacted URL would fail with exit 4 instead).
c="$DYN_CASES"
url=http://127.0.0.1:1
echo "== 08 fixed schedule (auto)"
expect_status 3 dyn-replay "$c/08-mooncake-missing-timestamp/trace.jsonl" --url $url --model m 2>err.txt
sed "s|$c/||" err.txt
echo "== 08 --fixed-schedule"
expect_status 3 dyn-replay "$c/08-mooncake-missing-timestamp/trace.jsonl" --url $url --model m --fixed-schedule 2>err.txt
echo "== 06 strict"
expect_status 3 dyn-replay "$c/06-mooncake-hashids-vs-length/trace.jsonl" --url $url --model m 2>err.txt
sed "s|$c/||" err.txt
echo "== 06 strict, block size 16"
expect_status 3 dyn-replay "$c/06-mooncake-hashids-vs-length/trace.jsonl" --url $url --model m --block-size 16 2>err.txt
sed "s|$c/||" err.txt
# Lenient: the workload is accepted and every request is tried (and fails: nothing listens).
echo "== 06 lenient against a closed port"
expect_status 4 dyn-replay "$c/06-mooncake-hashids-vs-length/trace.jsonl" --url $url --model m --lenient --speedup 1000 \
  --connect-timeout-seconds 1 >rows.jsonl 2>err.txt
jq -c '[.request.request_id, .dyn.status, .dyn.error.type, .request.replay.input_length]' rows.jsonl | sort
echo "== usage: --session-headers bogus"
expect_status 2 dyn-replay "$c/06-mooncake-hashids-vs-length/trace.jsonl" --url $url --session-headers bogus 2>/dev/null
