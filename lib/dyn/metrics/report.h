// Run-level metrics (SPEC 7): statistics per metric, throughput, goodput, cache hit rates, error
// summary, per-worker and per-session breakdowns; rendered as a console table, JSON or CSV in
// AIPerf's export shapes, and written as AIPerf's three profile_export files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/defaults.h"
#include "dyn/tokens/reference.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/metrics/request.h"
#include "dyn/metrics/stats.h"

namespace dyn::metrics {

/// One per-request metric over the run (AIPerf "record metric").
struct Series {
  std::string tag, header, unit;  ///< AIPerf tag, display header, display unit
  bool larger_is_better = false;
  Stats stats;  ///< in the display unit
};

/// One run-level value (AIPerf "aggregate"/"derived" metric).
struct Scalar {
  std::string tag, header, unit;
  double value = 0;
};

/// A service-level objective for goodput: metric tag and bound in display units (SPEC 7).
struct Slo {
  std::string tag;
  double value = 0;
};

/// Errors of one (code, type), with the first message seen.
struct ErrorCount {
  ErrorInfo info;
  uint64_t count = 0;
};

/// Per-worker breakdown (valid requests unless stated).
struct WorkerRow {
  std::string worker;
  uint64_t requests = 0, errors = 0;
  double share_pct = 0;  ///< of all valid requests
  Stats ttft_ms, latency_ms;
  double input_tokens = 0, cached_tokens = 0;
  std::optional<double> hit_pct;  ///< 100 * cached / input, when cached counts are known
};

/// Per-session breakdown (rows without a session id are not listed).
struct SessionRow {
  std::string session_id, parent_session_id;
  uint64_t turns = 0, errors = 0;
  std::vector<std::string> workers;  ///< distinct, in order of first use
  uint64_t worker_changes = 0;       ///< consecutive turns (by start) on different workers
  std::optional<double> ttft_avg_ms, latency_avg_ms, hit_pct;
  std::optional<double> first_start_ms, last_end_ms;  ///< unix ms
};

struct ReportOptions {
  std::vector<Slo> goodput;  ///< empty = no goodput
  /// Tokens per engine KV block for the theoretical hit rate (SPEC 7): the engines cache whole
  /// blocks of this size (dyn-mocker and --sim default 64, `dyn-bench --kv-block-size`).
  uint32_t kv_block_size = kDefaultKvBlockSize;
  /// Yardsticks (`--reference`, issue 18): the rows with hash ids and a block size, each holding
  /// its prompt's engine blocks from start to end, through one cache of reference_kv_blocks
  /// blocks (the cluster's sum) under each policy (tokens::reference_hit_tokens, as
  /// `dyn-replay --sim --reference`). Adds {pooled,belady}_cache_hit_rate (percent) and
  /// hit_rate_vs_{pooled,belady} (the rows' own hit rate over the same rows / the reference's).
  std::vector<tokens::ReferencePolicy> references;
  uint64_t reference_kv_blocks = 0;
};

struct Report {
  RowKind kind = RowKind::kDyn;
  std::vector<Series> series;
  std::vector<Scalar> scalars;
  std::vector<ErrorCount> errors;
  std::vector<WorkerRow> workers;
  std::vector<SessionRow> sessions;
  std::vector<Slo> goodput;
  uint64_t warmup_skipped = 0;
  const Series* find_series(std::string_view tag) const;
  const Scalar* find_scalar(std::string_view tag) const;
};

/// Parses "--goodput" text: space- or comma-separated `metric:value` pairs, values in display
/// units (ms, tokens/sec/user). Metric names are AIPerf tags (time_to_first_token,
/// time_to_second_token, inter_token_latency, request_latency, output_token_throughput_per_user)
/// or the short forms ttft, ttst, itl, e2e / latency. Unknown names and bad numbers are errors
/// (exit code 2).
Expected<std::vector<Slo>> parse_goodput(const std::string& text);

/// Computes the report. Per-request arrays are ordered by response end (AIPerf appends records
/// as they complete; the order decides the last bit of avg and std). Error rows count only in
/// error_request_count and `errors`. Duration = last response end - first request start of the
/// valid requests. Throws nothing; empty input gives a report with zero counts.
Report build_report(const RequestSet& set, const ReportOptions& options = {});

/// profile_export_aiperf.json: {tag: {unit, avg, p1 ... p99, min, max, std, count}} for series,
/// {tag: {unit, avg}} for scalars, then error_summary, and this toolkit's extras under "dyn"
/// (per_worker, per_session, goodput SLOs, warmup rows skipped).
Json report_json(const Report& report);

/// profile_export_aiperf.csv: "Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std" rows
/// sorted by header, a blank line, then "Metric,Value" rows sorted by header; numbers "%.2f".
std::string report_csv(const Report& report);

/// Console table: columns avg, min, max, p99, p90, p50, std (AIPerf's), then run values, errors,
/// per-worker rows and (when `per_session`) per-session rows.
std::string report_table(const Report& report, bool per_session);

/// One AIPerf per-request record (metadata, metrics with units, error) for a request; AIPerf
/// input records are returned unchanged.
Json aiperf_record(const RequestRecord& r, RowKind kind);

/// Writes DIR/profile_export.jsonl, DIR/profile_export_aiperf.json and
/// DIR/profile_export_aiperf.csv (creating DIR). Fatal(kExitIo) on write errors.
/// `input_config` (when not null) goes into the JSON as "input_config", where AIPerf records the
/// configuration of the run (dyn: cli::run_config of the tool that produced the rows).
void write_aiperf_export(const RequestSet& set, const Report& report, const std::string& dir,
                         const Json& input_config = Json());

/// Number with two decimals and thousands separators ("12,345.68"); "-" for NaN.
std::string format_number(double v, int decimals = 2);

}  // namespace dyn::metrics
