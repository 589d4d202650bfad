// dyn-bench plot: one self-contained HTML report with inline SVG charts (no scripts, no network).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dyn/metrics/report.h"

namespace dyn::metrics {

struct PlotOptions {
  std::string title = "dyn-bench report";
  std::size_t max_sessions = 40;  ///< sessions drawn in the timeline (first by start time)
};

/// HTML with: the summary table; TTFT and request-latency histograms; latency over time (one dot
/// per request, coloured by worker); per-worker request share and prompt-cache hit rate bars; a
/// per-session timeline (one row per session, one bar per turn from start to end, coloured by the
/// worker that served it). Deterministic for the same input. Thread-safe.
std::string render_html(const RequestSet& set, const Report& report, const PlotOptions& options = {});

/// One input run of a multi-run plot: its label (legend), its rows and report, and optionally its
/// value of the swept parameter.
struct PlotRun {
  std::string label;
  const RequestSet* set = nullptr;
  const Report* report = nullptr;
  std::optional<double> x;  ///< value of the swept parameter (all runs or none)
  std::string group;        ///< the series it belongs to in the sweep charts ("" = none: all runs one line per metric)
};

/// HTML comparing runs, each its own series in one colour with a legend (never merged): a
/// side-by-side table (requests, errors, prompt-cache hit %, TTFT and latency p50/p90, ITL avg,
/// request and output-token throughput), TTFT and request-latency CDFs (one line per run; more
/// than 6 runs become small multiples, one chart per run), and sweep charts — hit %, TTFT p50/p90
/// and request throughput against the swept parameter (`sweep_name`, runs' x). With groups (every
/// run has one), each sweep chart draws one line per group through its runs in order of x: e.g.
/// TTFT p90 against request rate for each routing policy. Without a swept value the runs are
/// separate set-ups: one dot each above its label, never joined by a line. Up to 20 runs get
/// distinct colours (then colour and dash pattern).
/// Deterministic for the same input. Thread-safe.
std::string render_runs_html(const std::vector<PlotRun>& runs, const std::string& sweep_name,
                             const PlotOptions& options = {});

}  // namespace dyn::metrics
