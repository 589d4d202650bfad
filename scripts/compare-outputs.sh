#!/usr/bin/env bash
# Runs one fixed set of commands with two builds and diffs what each wrote: a refactoring that
# claims "no behaviour change" shows it here. The set: dyn-route decide and dyn-replay --sim over
# the Mooncake FAST'25 conversation trace, raw and sessionized, in several router modes (with and
# without session affinity, --explain); dyn-trace cat, filter, stats, sessionize and convert over
# the fixtures of tests/fixtures and data/ (plain, gzip, multi-member, truncated, envelopes, a
# BOM, u64 hashes, malformed rows), and the other readers of trace rows (decide, dyn-bench report,
# dyn-bind show) over the malformed ones. Each command's stdout, stderr and exit status are compared;
# the program names in stderr ("dyn-trace: warning: ...") are the same in both builds.
# Usage: scripts/compare-outputs.sh OLD_BUILD NEW_BUILD [--quick]
#   OLD_BUILD, NEW_BUILD: build folders (their bin/ is used; nothing is built or changed).
#   --quick: the first 2,000 rows of the trace instead of all 12,031 (about a tenth of the time).
# Prints one line per command (same / DIFFERS, or USAGE when the old build refused the command
# line) and the first lines of each difference; exits 0 when every output is the same, 1
# otherwise, 2 on a usage error of this script.
set -uo pipefail
if [[ $# -lt 2 || ! -x "$1/bin/dyn-route" || ! -x "$2/bin/dyn-route" ]]; then
  echo "usage: $0 OLD_BUILD NEW_BUILD [--quick]   (each with bin/dyn-route, bin/dyn-replay, bin/dyn-trace)" >&2
  exit 2
fi
old="$(cd "$1" && pwd)/bin" new="$(cd "$2" && pwd)/bin" quick="${3:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d /tmp/dyn-compare.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
data="$root/data" cases="$root/tests/fixtures/cases"

# Inputs: the trace plain (so both builds read the same bytes without gzip in the way), and its
# sessionized form made by the old build (the sessionize output itself is compared below).
gzip -dc "$data/mooncake-fast25/conversation_trace.jsonl.gz" >"$tmp/raw.jsonl"
if [[ $quick == --quick ]]; then
  head -2000 "$tmp/raw.jsonl" >"$tmp/raw.head" && mv "$tmp/raw.head" "$tmp/raw.jsonl"
fi
"$old/dyn-trace" sessionize "$tmp/raw.jsonl" >"$tmp/sessions.jsonl" 2>/dev/null
# Trace rows with every kind of bad line: the fixtures' request_end rows, an envelope with an extra
# member, a record carrying an "event" member, invalid UTF-8, a non-object, NUL padding, an integer
# past 64 bits, a control character in a string, a blank line.
{
  head -5 "$root/tests/fixtures/bench/affinity-hard.jsonl"
  echo '{"timestamp":3,"event":{"event_type":"request_end","event_time_unix_ms":7,"request":{"request_id":"e1","input_tokens":9}},"writer":"x","seq":1}'
  echo '{"event_type":"tool_end","event_time_unix_ms":5,"event":{"x":1},"timestamp":2,"tool":{"duration_ms":4}}'
  printf '{"event_type":"request_end","note":"\xff"}\n'
  echo '[1,2]'
  printf '\0\0\0\0\n'
  echo '{"event_type":"request_end","request":{"input_tokens":18446744073709551616}}'
  echo '{"event_type":"request_end","event_time_unix_ms":9,"request":{"request_id":"c\b\f\u0001","ttft_ms":1.5}}'
  echo
  tail -3 "$root/tests/fixtures/bench/affinity-rr.jsonl"
} >"$tmp/mixed.jsonl"

cmds=()
add() { cmds+=("$*"); }
for f in raw sessions; do
  for mode in round-robin random power-of-two least-loaded kv; do
    add "dyn-route decide --workers 8 --router-mode $mode $tmp/$f.jsonl"
  done
  add "dyn-route decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 $tmp/$f.jsonl"
  add "dyn-route decide --workers 4 --router-mode kv --router-session-affinity-ttl-secs 300 --router-session-affinity-mode soft --seed 7 $tmp/$f.jsonl"
  add "dyn-route decide --workers 8 --router-mode kv --explain --router-temperature 0.5 $tmp/$f.jsonl"
  for mode in round-robin least-loaded kv; do
    add "dyn-replay --sim --workers 8 --router-mode $mode $tmp/$f.jsonl"
  done
  add "dyn-replay --sim --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 $tmp/$f.jsonl"
done
add "dyn-route decide --workers 2 $data/dynamo-docs/request_trace_examples.envelope.jsonl"
add "dyn-replay --sim --workers 2 $data/aiperf/test_trace_session_ids.jsonl"
trace_inputs=("$tmp/mixed.jsonl" "$data/dynamo-docs/request_trace_examples.envelope.jsonl"
  "$data/dynamo-docs/request_trace_examples.jsonl" "$root/tests/fixtures/bench/affinity-hard.jsonl"
  "$root/tests/fixtures/bench/affinity-rr.jsonl")
for c in "$cases"/{23,24,26,42}-*/*; do
  case "$c" in *.md) ;; *) trace_inputs+=("$c") ;; esac
done
for f in "${trace_inputs[@]}"; do
  add "dyn-trace cat $f"
  add "dyn-trace cat --sort $f"
  add "dyn-trace stats $f"
  add "dyn-trace stats --format table $f"
  add "dyn-trace filter --event request_end $f"
  add "dyn-trace filter --where request.input_tokens>5 --fields id=request.request_id,request.ttft_ms,agent_context $f"
  add "dyn-trace filter --format tsv --fields request.request_id,event_type,request.worker $f"
  add "dyn-trace filter --format csv --fields request.request_id,agent_context.session_id $f"
done
add "dyn-trace cat --strict $tmp/mixed.jsonl"
# The other readers of trace rows: decide (Dynamo records), the report and affinity tools.
for f in "$tmp/mixed.jsonl" "$root/tests/fixtures/bench/affinity-hard.jsonl"; do
  add "dyn-route decide --workers 2 $f"
  add "dyn-bench report --format json $f"
  add "dyn-bind show --format jsonl $f"
done
add "dyn-trace stats $tmp/sessions.jsonl"
add "dyn-trace filter --session s1 --with-subagents $root/tests/fixtures/bench/affinity-hard.jsonl"
add "dyn-trace sessionize $tmp/raw.jsonl"
add "dyn-trace convert --from dynamo $data/dynamo-docs/request_trace_examples.envelope.jsonl"
add "dyn-trace convert --from azure-csv $data/azure-llm-2023/AzureLLMInferenceTrace_code.csv.gz"

differ=0 n=0
for c in "${cmds[@]}"; do
  n=$((n + 1))
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    # Word splitting of $c is wanted: every argument above is free of spaces.
    # shellcheck disable=SC2086
    (cd "$tmp" && PATH="$bin:$PATH" NO_COLOR=1 $c >"$tmp/$side.out" 2>"$tmp/$side.err"; echo "exit $?" >>"$tmp/$side.err")
    # --sim's summary line carries the wall time it took: that part is no output of the model.
    sed -i -E 's/in [0-9.]+ s wall \([0-9]+ requests\/s, [0-9]+x real time\)/in T s wall (R requests\/s, X real time)/' \
      "$tmp/$side.err"
  done
  label="${c//$tmp\//}"
  label="${label//$root\//}"
  if grep -qx 'exit 2' "$tmp/old.err"; then
    # A usage error compares nothing: the set above has rotted (a flag renamed or removed).
    differ=$((differ + 1))
    printf 'USAGE    %s: %s\n' "$label" "$(head -1 "$tmp/old.err")"
  elif cmp -s "$tmp/old.out" "$tmp/new.out" && cmp -s "$tmp/old.err" "$tmp/new.err"; then
    printf 'same     %s (%s lines)\n' "$label" "$(wc -l <"$tmp/new.out")"
  else
    differ=$((differ + 1))
    printf 'DIFFERS  %s\n' "$label"
    diff "$tmp/old.out" "$tmp/new.out" | head -6 | sed 's/^/    stdout /'
    diff "$tmp/old.err" "$tmp/new.err" | head -6 | sed 's/^/    stderr /'
  fi
done
echo "compare-outputs: $n commands, $differ differ ($old vs $new)"
[[ $differ == 0 ]]
