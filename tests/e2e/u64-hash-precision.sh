# Shows that hash values above 2^63 (2^64-1 and 2^64-2, case 26) pass through byte-for-byte.
c="$DYN_CASES/26-u64-hash-precision"
dyn-trace cat "$c/trace.jsonl" | cmp - "$c/trace.jsonl" && echo identical
gzip -c "$c/trace.jsonl" | dyn-trace cat | cmp - "$c/trace.jsonl" && echo identical-from-gzip-stdin
