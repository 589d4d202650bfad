# Shows that filter writes selected rows byte-for-byte (case 26: 2^64-1 and 2^64-2 survive), that
# --where compares u64 values exactly, and that projections keep every digit.
c="$DYN_CASES/26-u64-hash-precision/trace.jsonl"
dyn-trace filter "$c" | cmp - "$c" && echo identical
gzip -c "$c" | dyn-trace filter --event request_end | cmp - "$c" && echo identical-from-gzip-stdin
dyn-trace filter "$c" --where 'request.replay.input_sequence_hashes.2=18446744073709551614' | cmp - "$c" && echo exact-equal-selects
dyn-trace filter "$c" --where 'request.replay.input_sequence_hashes.2=18446744073709551615' | wc -l
dyn-trace filter "$c" --where 'request.replay.input_sequence_hashes.1>18446744073709551614' | wc -l
dyn-trace filter "$c" --fields h=request.replay.input_sequence_hashes,h1=request.replay.input_sequence_hashes.1
dyn-trace filter "$c" --fields request.replay.input_sequence_hashes.1 --format csv
