// dyn-bench plot: one self-contained HTML report with inline SVG charts (no scripts, no network).
#pragma once

#include <string>

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

}  // namespace dyn::metrics
