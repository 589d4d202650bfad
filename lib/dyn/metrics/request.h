// Per-request metrics (SPEC 7) read from request_end rows (dyn-route serve, dyn-replay, the
// simulator), AIPerf's profile_export.jsonl records, or computed from a streamed response timeline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dyn/base/json.h"

namespace dyn::metrics {

/// Where a run's rows came from. Decides the time unit of RequestRecord's latency fields.
enum class RowKind { kDyn, kAiperf };

/// An error result: HTTP status (0 for transport errors, 499 for a cancelled request), type and
/// message (dyn.error or AIPerf's error).
struct ErrorInfo {
  int64_t code = 0;
  std::string type, message;
};

/// One request. Latency fields are in `time_unit_ms`-scaled units: ms for dyn rows, ns for AIPerf
/// rows (AIPerf computes in integer ns; keeping them reproduces its aggregates bit for bit).
struct RequestRecord {
  std::string where;       ///< "file:line"
  std::string request_id;  ///< request.request_id / metadata.x_request_id
  std::string session_id;  ///< agent_context.session_id / metadata.x_correlation_id
  std::string parent_session_id;
  std::string worker;  ///< decode worker id as text, "" when unknown
  std::optional<int64_t> turn;
  std::string binding;                             ///< dyn.binding (new, hit, rebound, expired, none) or ""
  std::optional<ErrorInfo> error;                  ///< set for error/cancelled rows: counted in error summaries only
  std::optional<int64_t> start_ns, end_ns;         ///< unix ns: request start, end of the response
  std::optional<double> ttft, ttst, latency, itl;  ///< time unit (ms or ns); itl: AIPerf's definition
  /// Per-token ITL that excludes the first chunk's tokens: (latency - TTFT) / (OSL - tokens of
  /// the first chunk), time unit. Exact when per-chunk token counts are known (dyn.chunk_tokens,
  /// a ChunkTimeline); otherwise estimated as if the first chunk held one token (then equal to
  /// `itl`) and `itl_per_token_estimated` is set (issue 21.4). Dyn rows only.
  std::optional<double> itl_per_token;
  bool itl_per_token_estimated = false;
  std::vector<double> inter_chunk;                                                    ///< time unit
  std::optional<double> per_user_tps;                                                 ///< tokens/s (1 / ITL in seconds)
  std::optional<double> isl, osl, cached, output_token_count, reasoning_token_count;  ///< tokens
  std::optional<double> schedule_lag_ms;
  std::vector<uint64_t> hash_ids;  ///< dyn.hash_ids or request.replay.input_sequence_hashes
  uint32_t hash_block_size = 0;    ///< dyn.block_size: tokens per hash id (0 = not recorded)
  /// dyn.pause_ms: time the request waited in admission before a worker got it (SPEC 9; router
  /// traces and --sim rows), so a reference cache holds its blocks from dispatch, not arrival.
  std::optional<double> pause_ms;
  /// AIPerf metrics this toolkit does not know, kept as (tag, unit, values) in record order so
  /// an AIPerf run's other aggregates are still reproduced.
  std::vector<std::tuple<std::string, std::string, std::vector<double>>> extra;
  Json source;  ///< the original row (AIPerf records are re-exported verbatim)
  bool valid() const { return !error.has_value(); }
};

/// All requests of a run (or one side of a comparison).
struct RequestSet {
  RowKind kind = RowKind::kDyn;
  std::vector<RequestRecord> requests;  ///< input order
  uint64_t warmup_skipped = 0;          ///< rows with dyn.warmup (excluded from everything)
  uint64_t other_rows = 0;              ///< rows of other event types (ignored)
  uint64_t malformed = 0;               ///< lines the reader skipped
  /// The rows' event_source ("client", "router", "simulator", ...; SPEC 5.1), "mixed" when rows
  /// disagree, "" when none says.
  std::string event_source;
  /// Multiplier from the time unit to ms (1 for dyn rows, 1e-6 for AIPerf's ns).
  double time_to_ms() const { return kind == RowKind::kAiperf ? 1e-6 : 1.0; }
  /// Multiplier from the time unit to seconds.
  double time_to_s() const { return kind == RowKind::kAiperf ? 1e-9 : 1e-3; }
};

/// True when `row` has the shape of an AIPerf profile_export.jsonl record ("metadata" and
/// "metrics" objects, no trace "event_type").
bool is_aiperf_record(const Json& row);

/// Parses a request_end row (docs/records.md). Returns nullopt for other event types and for
/// warmup rows (`*warmup` set). ITL is recomputed as (latency - TTFT) / (OSL - 1) when all three
/// are known (SPEC 7), else taken from avg_itl_ms; latency is dyn.request_latency_ms, else
/// total_time_ms. dyn.status "error" or "cancelled" makes an error record.
std::optional<RequestRecord> parse_request_end(const Json& row, std::string where, bool* warmup = nullptr);

/// Parses an AIPerf record (both the 2025 schema with ttft/ttst tags and timestamp_ns, and the
/// later one with time_to_first_token and request_start_ns/request_end_ns). Time metrics are
/// converted to integer ns, ITL and per-user throughput recomputed from them as AIPerf does.
RequestRecord parse_aiperf_record(const Json& row, std::string where);

/// Adds one trace row to a dyn RequestSet as load_requests does: a request_end row becomes a
/// request, a warmup row is counted in warmup_skipped, another event type in other_rows; the row's
/// event_source joins set.event_source.
void add_request_row(RequestSet& set, const Json& row, std::string where);

/// Reads request rows from files ("-" = stdin; gzip, envelopes, malformed-line skipping via
/// records::RowReader). The kind is detected from the first data row; mixing AIPerf records with
/// trace rows is an error (Fatal, exit 3). route_decision and other event types are counted in
/// `other_rows`. Fatal (exit 4) for unreadable files.
RequestSet load_requests(const std::vector<std::string>& paths);

/// Where a set's timings were taken, in words for the tables that show them (dyn-bench compare,
/// report, dyn-replay's summary table): the client's view (dyn-replay rows, AIPerf records: the
/// network and the router included), the router's (a dyn-route serve or dyn-trace capture trace:
/// timed at the proxy), or the simulator's virtual clock. "" when the rows do not say.
std::string describe_view(const RequestSet& set);

/// A streamed response: chunk arrival times (ms since the request was sent) and tokens per chunk.
struct ChunkTimeline {
  std::vector<double> chunk_ms;  ///< content chunks only (no role-only, usage-only, [DONE])
  std::vector<double> tokens;    ///< tokens in each chunk (same length as chunk_ms)
};

/// Per-request metrics of SPEC 7 from a timeline: TTFT = first chunk; TTST = second - first;
/// latency = last content chunk (the end of a trailing [DONE] or usage chunk does not count);
/// inter-chunk = gaps between consecutive chunks (TTFT never among them);
/// ITL = (latency - TTFT) / (OSL - 1) with OSL = sum of tokens, defined for OSL >= 2 (AIPerf);
/// per-token ITL = (latency - TTFT) / (OSL - tokens of the first chunk), exact (chunks at 100,
/// 250, 400, 430 ms with 2, 1, 3, 1 tokens: ITL 55 ms, per-token ITL 66 ms);
/// per-user throughput = 1000 / ITL. Fields stay empty when undefined (no chunks).
RequestRecord metrics_from_timeline(const ChunkTimeline& timeline);

}  // namespace dyn::metrics
