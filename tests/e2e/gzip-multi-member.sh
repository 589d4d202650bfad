# Shows that a gzip file of three members (2+2+1 rows, case 24) yields all 5 rows in order,
# from a file and from stdin ("-").
c="$DYN_CASES/24-gzip-multi-member"
dyn-trace cat "$c/trace.jsonl.gz" | jq -r .request.request_id
dyn-trace cat - <"$c/trace.jsonl.gz" | wc -l
