# Shows that dyn-bench report reproduces the real AIPerf run's CSV from its per-request file
# (AIPerf's CSV plus the p10 column), that --aiperf-export writes the three files with the same
# numbers, and that the console table has AIPerf's columns.
fx="$DYN_DATA/aiperf"
dyn-bench report "$fx/profile_export.jsonl.gz" --format csv | tr -d '\r' >ours.csv
echo "== csv (CRLF removed)"
cat ours.csv
echo "== fixture csv equals ours without p10"
cut -d, -f7 --complement ours.csv | sed '/^Metric,Value/,$ d' >a
sed '/^Metric,Value/,$ d' "$fx/profile_export_aiperf.csv" | tr -d '\r' >b
sed -n '/^Metric,Value/,$ p' ours.csv >>a
sed -n '/^Metric,Value/,$ p' "$fx/profile_export_aiperf.csv" | tr -d '\r' >>b
cmp a b && echo identical
echo "== aiperf export"
dyn-bench report "$fx/profile_export.jsonl.gz" --format json --aiperf-export out >/dev/null
ls out
cmp out/profile_export_aiperf.csv <(dyn-bench report "$fx/profile_export.jsonl.gz" --format csv) && echo "csv written"
cmp <(jq -c .metadata.x_request_id out/profile_export.jsonl) <(gzip -dc "$fx/profile_export.jsonl.gz" | jq -c .metadata.x_request_id) && echo "all 100 records passed through in order"
jq -c '{ttft: .time_to_first_token.avg, ttft_p99: .time_to_first_token.p99, icl_std: .inter_chunk_latency.std,
        duration: .benchmark_duration.avg, errors: .error_summary}' out/profile_export_aiperf.json
echo "== table header"
dyn-bench report "$fx/profile_export.jsonl.gz" --format table | head -3
