// Side-by-side comparison of two runs (dyn-bench compare): the same metrics with differences and
// ratios, e.g. affinity on against affinity off.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/metrics/report.h"

namespace dyn::metrics {

/// One compared value. diff = b - a; ratio = b / a (nullopt when a is 0); `better` says which
/// side is better given the metric's direction ("a", "b" or "same").
struct CompareRow {
  std::string tag, header, unit, stat;  ///< stat: avg, p50, p90, p99 for series; value for scalars
  double a = 0, b = 0, diff = 0;
  std::optional<double> ratio;
  std::string better;
};

/// Rows for every series (avg, p50, p90, p99) and run value present in either report, in report
/// order (a's first, then metrics only b has). Timestamps are left out; they differ by design.
/// Metrics missing on one side are skipped.
std::vector<CompareRow> compare_reports(const Report& a, const Report& b);

/// {"a": label_a, "b": label_b, "metrics": [{tag, header, unit, stat, a, b, diff, ratio, better}],
///  "per_worker": {"a": [...], "b": [...]}} (per-worker request share and hit rate).
Json compare_json(const Report& a, const Report& b, const std::string& label_a, const std::string& label_b);

/// Console table: Metric, stat, A, B, B-A, B/A, better.
std::string compare_table(const Report& a, const Report& b, const std::string& label_a, const std::string& label_b);

}  // namespace dyn::metrics
