# Shows case 42 (huggingface/datasets#8241, microsoft/promptflow#4188): a UTF-8 BOM before row 1
# (Windows editors, PowerShell, Excel's "CSV UTF-8") is skipped by the one reader every tool
# shares, so each tool reads the BOM file exactly as the plain one: 3 workload rows (CRLF too),
# 3 trace rows, 2 Azure CSV rows; the --sim prompt-cache hit is the plain file's; no row is lost
# and nothing is reported malformed. The same for a gzip'd BOM file and for dyn-mocker --replies.
c="$DYN_ROOT/tests/fixtures/cases/42-jsonl-utf8-bom"
tail -c +4 "$c/trace-bom.jsonl" >trace-plain.jsonl
tail -c +4 "$c/azure-bom.csv" >azure-plain.csv
gzip -c "$c/workload-bom-crlf.jsonl" >workload-bom.jsonl.gz
head -c 3 "$c/trace-bom.jsonl" | od -An -tx1
same() {  # same LABEL COMMAND-WITH-{}: runs it on the BOM file and the plain file (exit 0 both)
  local label=$1 cmd=$2 bom=$3 plain=$4
  expect_status 0 ${cmd//\{\}/$bom} >bom.out 2>bom.err
  expect_status 0 ${cmd//\{\}/$plain} >plain.out 2>plain.err
  local eq=no
  cmp -s bom.out plain.out && eq=yes
  echo "$label: output lines $(wc -l <bom.out)/$(wc -l <plain.out), same output $eq, malformed reports $(grep -c malformed bom.err)"
}
w="$c/workload-bom-crlf.jsonl"
p="$c/workload-plain.jsonl"
same "dyn-trace cat (trace)" "dyn-trace cat {}" "$c/trace-bom.jsonl" trace-plain.jsonl
same "dyn-trace filter" "dyn-trace filter --where request.input_tokens>=100 {}" "$c/trace-bom.jsonl" trace-plain.jsonl
same "dyn-trace stats" "dyn-trace stats {}" "$c/trace-bom.jsonl" trace-plain.jsonl
same "dyn-trace convert azure-csv" "dyn-trace convert --from azure-csv {}" "$c/azure-bom.csv" azure-plain.csv
same "dyn-trace convert mooncake" "dyn-trace convert --from mooncake --to agentic {}" "$w" "$p"
same "dyn-trace sessionize" "dyn-trace sessionize {}" "$w" "$p"
same "dyn-route decide" "dyn-route decide --workers 2 {}" "$w" "$p"
same "dyn-route decide (gzip)" "dyn-route decide --workers 2 {}" workload-bom.jsonl.gz "$p"
same "dyn-replay --sim" "dyn-replay --sim --workers 1 --seed 1 {}" "$w" "$p"
same "dyn-bench report" "dyn-bench report --format json {}" "$c/trace-bom.jsonl" trace-plain.jsonl
same "dyn-bind show" "dyn-bind show {}" "$c/trace-bom.jsonl" trace-plain.jsonl
same "dyn-bind check" "dyn-bind check --ttl-secs 300 {}" "$c/trace-bom.jsonl" trace-plain.jsonl
dyn-trace convert --from azure-csv "$c/azure-bom.csv" | jq -c '{input_length, output_length}'
dyn-replay --sim --workers 1 --seed 1 "$w" 2>/dev/null | dyn-bench report --format json 2>/dev/null |
  jq -r '"--sim prompt-cache hit: \(.prompt_cache_hit_rate.avg * 100 | round / 100) %"'
# dyn-mocker's --replies file is read by its own loader: the same rule.
printf '\xef\xbb\xbf{"text":"first reply"}\n{"text":"second"}\n' >replies.jsonl
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker m --replies replies.jsonl
curl -sS -H 'content-type: application/json' "$m_url/v1/chat/completions" \
  -d '{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}' | jq -r '"mocker reply 1: " + .choices[0].message.content'
