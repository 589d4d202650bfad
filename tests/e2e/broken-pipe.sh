# Shows that `dyn-trace cat big.jsonl.gz | head -1` exits 0 with nothing on stderr.
for i in $(seq 1 200000); do echo "{\"event_type\":\"request_end\",\"event_time_unix_ms\":$i}"; done | gzip -1 >big.jsonl.gz
expect_status 0 dyn-trace cat big.jsonl.gz 2>err.txt | head -1
echo "stderr_bytes=$(wc -c <err.txt)"
