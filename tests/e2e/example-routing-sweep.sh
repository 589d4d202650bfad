# Shows that examples/routing-sweep.sh (the scripted routing experiment) runs and prints its
# table: router modes x affinity x load levels simulated over the bundled Mooncake slice,
# reproducible by seed; and that given the raw Mooncake trace (no session ids) it says so and
# sessionizes it first, so that affinity has sessions to bind (the rows with and without affinity
# differ, where the raw trace gave identical rows).
bash "$DYN_ROOT/examples/routing-sweep.sh"
echo "== raw Mooncake rows (no session ids), one load level"
{ gzip -dc "$DYN_DATA/mooncake-fast25/conversation_trace.jsonl.gz" 2>/dev/null || true; } | head -1000 >raw.jsonl
expect_status 0 bash "$DYN_ROOT/examples/routing-sweep.sh" raw.jsonl 4 1 2>err.txt >table.txt
grep -o 'raw.jsonl has no session ids; sessionizing it with dyn-trace sessionize' err.txt
awk 'NR > 1 {print $1, $2, $4, $5, $6, $7}' table.txt >rows.txt
awk '{row[$1" "$2] = $3" "$4" "$5" "$6} END {for (m in row) if (m ~ / off$/) { sub(/ off$/, "", m);
     print m, (row[m" off"] != row[m" 300"]) ? "rows differ with affinity" : "identical rows with and without affinity" } }' rows.txt | sort
