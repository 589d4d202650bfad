#!/usr/bin/env bash
# Generates dynamo.request.trace.v1 request_end rows from the Mooncake FAST'25 conversation
# trace, for benchmarks and the filter-vs-jq test. Never commit the output.
#   gen-request-end.sh [--mb M] [--rows N] [--trace FILE] > out.jsonl
# --mb M: repeat the trace (hash ids and times shifted per repetition) until >= M MB are written;
# --rows N: stop after N rows. Rows carry: session from the conversation's first private block
# (hash_ids[1]), a parent session for some, worker = session mod 8, cached_tokens = blocks already
# seen (infinite prefix cache), ttft/total times from the lengths, tool calls on short answers, and
# input_sequence_hashes above 2^63 (u64 traps on purpose).
set -euo pipefail
mb=0
rows=0
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
trace="$here/../data/mooncake-fast25/conversation_trace.jsonl.gz"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --trace) trace="$2"; shift 2 ;;
    *) echo "gen-request-end.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $mb == 0 && $rows == 0 ]] && rows=1000000000 && mb=0
awk -v target_mb="$mb" -v max_rows="$rows" '
{ lines[NR] = $0 }
function field(s, key,   i, rest) {
  i = index(s, "\"" key "\":"); rest = substr(s, i + length(key) + 3)
  sub(/^ */, "", rest); sub(/[,}].*$/, "", rest); return rest + 0
}
END {
  target = target_mb * 1048576; written = 0; n = 0; base = 1777312800000
  for (rep = 0; ; rep++) {
    off = rep * 10000000
    for (li = 1; li <= NR; li++) {
      s = lines[li]
      ts = field(s, "timestamp"); inl = field(s, "input_length"); outl = field(s, "output_length")
      h = s; sub(/^.*"hash_ids": *\[/, "", h); sub(/\].*$/, "", h)
      k = split(h, ids, /, */)
      hashes = ""; cached = 0; prefix = 1
      for (j = 1; j <= k; j++) {
        id = ids[j] + off
        if (prefix && (id in seen)) cached += 512; else prefix = 0
        seen[id] = 1
        hashes = hashes (j > 1 ? "," : "") "1844674407" sprintf("%010d", id)
      }
      if (cached > inl) cached = inl
      key = (k > 1 && ids[1] == 0) ? ids[2] : ids[1]
      sid = "sess-" (key + off)
      ctx = "{\"session_id\":\"" sid "\""
      if (key % 5 == 0) ctx = ctx ",\"parent_session_id\":\"sess-" (key + off - 1) "\""
      ctx = ctx "}"
      ttft = 20 + (inl - cached) / 97.0; total = ttft + outl * 12.5
      recv = base + rep * 3600000 + ts; endt = int(recv + total)
      tools = ""
      if (outl < 50) tools = ",\"finish_reason_metadata\":{\"finish_reason\":\"tool_calls\",\"tool_calls\":[{\"choice_index\":0,\"tool_call_index\":0,\"id\":\"call-" n "\",\"name\":\"search\"}]}"
      line = sprintf("{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"event_time_unix_ms\":%.0f,\"event_source\":\"router\",\"agent_context\":%s,\"request\":{\"request_id\":\"req-%d\",\"model\":\"mooncake-replay\",\"input_tokens\":%d,\"output_tokens\":%d,\"cached_tokens\":%d,\"request_received_ms\":%.0f,\"ttft_ms\":%.3f,\"total_time_ms\":%.3f,\"kv_hit_rate\":%.4f,\"worker\":{\"decode_worker_id\":%d}%s,\"replay\":{\"trace_block_size\":512,\"input_length\":%d,\"input_sequence_hashes\":[%s]}}}",
        endt, ctx, n, inl, outl, cached, recv, ttft, total, (inl > 0 ? cached / inl : 0), (key + off) % 8, tools, inl, hashes)
      print line
      written += length(line) + 1; n++
      if (max_rows > 0 && n >= max_rows) exit
      if (target > 0 && written >= target) exit
    }
    if (target == 0) exit
  }
}' <(gzip -dcf "$trace")
