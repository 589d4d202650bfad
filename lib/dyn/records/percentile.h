// The one percentile of every summary the tools print (SPEC 7: NumPy's linear method, as AIPerf
// computes it): dyn-bench reports, dyn-trace stats, dyn-replay's schedule lag.
#pragma once

#include <vector>

namespace dyn::records {

/// Linear-interpolation percentile of an ascending `sorted` array, p in [0, 100]: position
/// (n - 1) * (p / 100), interpolated like np.percentile(method="linear") including its two-sided
/// lerp (from the nearer neighbour, so a position of exactly one element gives that element).
/// Requires a non-empty array. Thread-safe.
double percentile_linear(const std::vector<double>& sorted, double p);

}  // namespace dyn::records
