// Measured load points for calibration and fidelity: rows of a silicon-sample CSV (AIConfigurator's
// columns) or closed-loop runs found in request_end rows of a real endpoint, one configuration at
// a time (SPEC 8 "Calibration").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dyn/base/error.h"

namespace dyn::fidelity {

/// One measured closed loop: `concurrency` clients, each sending a request of exactly `isl`
/// prompt tokens for `osl` output tokens as soon as its previous one ended.
struct LoadPoint {
  uint64_t isl = 0, osl = 0, concurrency = 0;
  double ttft_ms = 0;  ///< mean time to first token
  double tpot_ms = 0;  ///< mean time per output token after the first ((latency - TTFT) / (OSL - 1))
  uint32_t gpus = 1;   ///< GPUs of the engine (throughput per GPU divides by it)
  std::string where;   ///< "file:line" (CSV) or "file: N requests" (request_end rows)
  /// Output tokens per second per GPU, derived from TPOT as Dynamo's published comparison does
  /// (the silicon sample has no throughput column): 1000 x concurrency / tpot_ms / gpus.
  double tps_gpu() const;
};

/// One configuration's load points and what identifies it.
struct Selection {
  std::vector<LoadPoint> points;  ///< in input order, duplicates removed
  /// The configuration's identifying columns and values (CSV: every column but the per-row ones;
  /// request_end rows: model).
  std::vector<std::pair<std::string, std::string>> config;
  uint64_t duplicates = 0;  ///< rows dropped as repeats of an earlier measurement
  /// Value of a config column ("" when absent).
  std::string column(const std::string& name) const;
};

/// `--where COLUMN=VALUE` conditions (all must hold; the value compares as text, or as a number
/// when both sides are numbers: tp_size=2 matches "2.0").
using Where = std::vector<std::pair<std::string, std::string>>;

/// Parses "COLUMN=VALUE" (kExitUsage on a missing '=' or empty column).
Expected<std::pair<std::string, std::string>> parse_where(const std::string& text);

/// Reads `path` and selects one configuration:
/// - CSV with AIConfigurator's silicon-sample columns (isl, osl, batch_size = the closed-loop
///   concurrency, silicon_ttft_ms, silicon_tpot_ms, tp_size, pp_size, attention_dp_size, ...):
///   rows matching `where`; the configuration is every column except id, silicon_data_source and
///   the per-row ones; GPUs = tp_size x pp_size x attention_dp_size (each at least 1);
/// - JSONL request_end rows (dyn-trace capture, dyn-replay, dyn-route serve; gzip ok): ok rows
///   with output_tokens >= 2, grouped into closed-loop runs (same model, input_tokens and
///   output_tokens, overlapping in time, pauses under 100 ms bridged: separate runs need a longer
///   pause); each run's concurrency is the number of requests in flight for the longest time in
///   all, its TTFT and TPOT the means of ttft_ms and avg_itl_ms; columns: model, isl, osl,
///   concurrency; GPUs = `gpus`.
/// Errors (kExitBadData unless said): unreadable file (kExitIo), a CSV without a required column,
/// a row whose numbers do not parse (naming file and line), `where` naming an unknown column
/// (kExitUsage), no row matching, or rows of several configurations ("N configurations match",
/// listing each by the columns that tell them apart, with its row count).
Expected<Selection> select_points(const std::string& path, const Where& where, uint32_t gpus = 1);

/// The distinct ISL/OSL pairs of `points`, sorted.
std::vector<std::pair<uint64_t, uint64_t>> pairs_of(const std::vector<LoadPoint>& points);

}  // namespace dyn::fidelity
