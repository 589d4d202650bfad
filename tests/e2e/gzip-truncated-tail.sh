# Shows that a gzip trace cut mid-member (SIGKILL mid-write, case 23) yields its 3 complete rows,
# a warning with the rows recovered, exit 0; --strict makes it exit 3; the complete file gives 5.
c="$DYN_CASES/23-gzip-truncated-tail"
expect_status 0 dyn-trace cat "$c/trace.jsonl.gz" | jq -r .request.request_id
expect_status 3 dyn-trace cat --strict "$c/trace.jsonl.gz" >/dev/null 2>&1
dyn-trace cat "$c/complete.jsonl.gz" 2>complete.err | wc -l
echo "complete stderr bytes=$(wc -c <complete.err)"
