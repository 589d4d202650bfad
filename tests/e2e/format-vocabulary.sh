# Shows that --format has one vocabulary across the six subcommands that take it: each lists the
# formats it writes from one table, json means the machine-readable output everywhere, jsonl (the
# old spelling of dyn-bind and dyn-trace) writes the same bytes as json wherever json is accepted,
# and a format of the vocabulary that a subcommand does not write is a usage error naming its set.
dyn-replay "$DYN_DATA/aiperf/test_trace_session_ids.jsonl" --sim --workers 2 2>/dev/null >rows.jsonl
echo "== the choices each subcommand's --help lists"
for cmd in "dyn-bind show" "dyn-bind live" "dyn-trace stats" "dyn-trace filter" "dyn-bench report" "dyn-bench compare"; do
  # shellcheck disable=SC2086
  printf '%s: %s\n' "$cmd" "$($cmd --help | grep -o -- '--format TEXT:{[^}]*}[^ ]*' | sed 's/--format TEXT://')"
done
echo "== json and jsonl write the same bytes"
same() {  # a command line with FORMAT where the format goes: its json output's lines, and whether jsonl's matches
  "${@/FORMAT/json}" >json.out
  "${@/FORMAT/jsonl}" >jsonl.out
  cmp -s json.out jsonl.out && echo "same $(wc -l <json.out) lines: $*" || echo "DIFFERENT: $*"
}
same dyn-bind show rows.jsonl --format FORMAT
same dyn-trace stats rows.jsonl --format FORMAT
same dyn-trace filter rows.jsonl --format FORMAT
same dyn-bench report rows.jsonl --format FORMAT
same dyn-bench compare rows.jsonl rows.jsonl --format FORMAT
echo "== json: JSON Lines where the output is rows, one document for a report"
dyn-bind show rows.jsonl --format json | jq -r '"\(.key): \(.turns) turns"'
dyn-trace stats rows.jsonl --format json | jq -r .kind | sort | uniq -c | sed 's/^ *//'
dyn-bench report rows.jsonl --format jsonl | jq -c '[.request_count.avg, (.dyn != null)]'
echo "== auto off a terminal is json; the default of filter is json"
[[ $(dyn-trace stats rows.jsonl) == "$(dyn-trace stats rows.jsonl --format json)" ]] && echo "stats: auto = json"
[[ $(dyn-trace filter rows.jsonl) == "$(dyn-trace filter rows.jsonl --format jsonl)" ]] && echo "filter: default = json"
echo "== a format the subcommand does not write"
expect_status 2 dyn-bind show rows.jsonl --format csv 2>&1 | sed 's/^/show: /'
expect_status 2 dyn-trace filter rows.jsonl --format table 2>&1 | sed 's/^/filter: /'
expect_status 2 dyn-bench compare rows.jsonl rows.jsonl --format tsv 2>&1 | sed 's/^/compare: /'
