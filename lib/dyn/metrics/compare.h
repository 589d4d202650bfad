// Side-by-side comparison of two set-ups (dyn-bench compare), each given as one run or as several
// repeats of it: the same metrics with their mean and spread per side, differences, ratios, and
// which side is better only where the difference exceeds the spread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/metrics/report.h"

namespace dyn::metrics {

/// One compared value over the runs of each side. a, b: the means of the per-run values; a_sd,
/// b_sd: their sample standard deviation (ddof 1, the spread), only with 2 or more runs on that
/// side; diff = b - a; ratio = b / a (nullopt when a is 0). `better` is the side whose mean is
/// better given the metric's direction ("a", "b", "same" when the means are equal, "-" for a
/// metric with no better direction); `exceeds_spread` says whether that difference is larger
/// than the spread: |b - a| > a_sd + b_sd (the two mean ± sd bands do not overlap), nullopt when
/// a side has a single run (no spread is known: the difference is only indicative).
struct CompareRow {
  std::string tag, header, unit, stat;  ///< stat: avg, p50, p90, p99 for series; value for scalars
  double a = 0, b = 0, diff = 0;
  std::optional<double> a_sd, b_sd;
  std::vector<double> a_runs, b_runs;  ///< the per-run values the means come from, in run order
  std::optional<double> ratio;
  std::string better;
  std::optional<bool> exceeds_spread;
};

/// One side of a comparison: its label and the reports of its runs (at least one), with what the
/// rows measured (describe_view of the runs' rows, "" when unknown).
struct CompareSide {
  std::string label;
  std::vector<Report> runs;
  std::vector<std::string> files;  ///< one per run, for the header lines
  std::string view;
};

/// Rows for every series (avg, p50, p90, p99) and run value present in the first run of both
/// sides, in report order (a's first, then metrics only b has). Timestamps are left out; they
/// differ by design. A metric missing from any run of a side is skipped.
std::vector<CompareRow> compare_runs(const std::vector<Report>& a, const std::vector<Report>& b);

/// compare_runs with one run per side.
std::vector<CompareRow> compare_reports(const Report& a, const Report& b);

/// {"a": label, "b": label, "a_runs": n, "b_runs": n, "a_view", "b_view", "metrics": [{tag, header,
/// unit, stat, a, b, a_sd, b_sd, a_runs, b_runs, diff, ratio, better, exceeds_spread}],
/// "per_worker": {"a": [...], "b": [...]}} (per-worker request share and hit rate, mean over runs).
Json compare_json(const CompareSide& a, const CompareSide& b);

/// Console table: Metric, stat, A, B (mean ± sd with several runs), B-A, B/A, better; the two
/// sides' runs and views above it, per-worker shares and a legend of the columns below it.
std::string compare_table(const CompareSide& a, const CompareSide& b);

}  // namespace dyn::metrics
