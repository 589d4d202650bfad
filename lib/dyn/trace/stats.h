// dyn-trace stats: per-session and per-worker summaries of request_end rows (SPEC 5, SPEC 7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/io/output.h"

namespace dyn::trace {

struct StatsOptions {
  std::vector<std::string> inputs;  ///< files in order; empty or "-" = stdin (gzip by magic)
  bool table = false;               ///< a fixed-width text table instead of JSONL
  bool strict = false;              ///< exit 3 on a truncated gzip stream or malformed row
};

/// Reads trace rows (bare or enveloped, gzip or plain) and writes one summary per session, then
/// one per worker, then one per tool name (kind "tool": tool, calls, tool_ms, mean_ms,
/// duration_ms {p50,p90,p99}, tool_source; the name is tool.tool_class of harness rows, else the
/// names of the reply's tool calls joined by "+", else "unknown"), then a total, each sorted by
/// id (JSONL keys in this order):
///   kind ("session" | "worker" | "total"), session_id | worker, parent_session_id (sessions),
///   requests, errors, input_tokens, output_tokens, cached_tokens, cached_ratio (Σcached/Σinput),
///   ttft_ms {p50,p90,p99}, latency_ms {p50,p90,p99} (request.total_time_ms; both
///   records::percentile_linear), tool_calls (from finish_reason_metadata.tool_calls),
///   tool_events (tool_end/tool_error rows), tool_ms and tool_source: the sum of those rows'
///   tool.duration_ms ("harness") or, for a session without such rows, of the gaps after each
///   reply that stopped for a tool (finish_reason tool_calls/tool_use or tool calls listed) until
///   the session's next request arrived ("inferred"; Dynamo: tool_wait ~ next request_received_ms
///   − this event_time_unix_ms); the total says "mixed" when both occur; null without any), workers
///   (sessions: distinct decode_worker_ids) or sessions (workers: distinct session count),
///   first_event_unix_ms, last_event_unix_ms.
/// Requests are request_end rows; rows marked dyn.warmup are skipped; rows with dyn.status other
/// than "ok" count as errors and stay out of the percentiles and token sums. A row without a
/// session or worker is grouped under null. Percentiles of an empty set are null.
/// Memory: O(requests) for the percentiles. Returns the exit code (0; 3 in strict mode on bad input).
int trace_stats(const StatsOptions& options, io::Output& out);

}  // namespace dyn::trace
