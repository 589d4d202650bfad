// Summary statistics exactly as AIPerf computes them with NumPy (SPEC 7): mean and population std
// from pairwise sums, linear-interpolation percentiles (records::percentile_linear).
#pragma once

#include <cstddef>
#include <vector>

namespace dyn::metrics {

/// Sum of `n` doubles in NumPy's order: blocks of 8192 elements (the reduction buffer), each
/// summed pairwise (8 accumulators up to 128 elements, halves above). Reproduces np.sum bit for
/// bit on contiguous float64 arrays, which AIPerf's aggregates depend on. Thread-safe.
double numpy_sum(const double* values, std::size_t n);

/// The percentiles every report carries (SPEC 7).
inline constexpr double kPercentiles[] = {1, 5, 10, 25, 50, 75, 90, 95, 99};

/// Statistics of one metric over a run. Values are in the metric's display unit.
struct Stats {
  std::size_t count = 0;
  double avg = 0, min = 0, max = 0, std = 0;
  double p[9] = {};  ///< in the order of kPercentiles
  /// Percentile by its number (1, 5, 10, 25, 50, 75, 90, 95, 99); NaN for another.
  double pct(int which) const;
};

/// Statistics of `values` taken in the given order (the order matters for the last bit of avg and
/// std, as in NumPy), each result multiplied by `scale` afterwards (AIPerf computes in ns and
/// converts with value * 1e-6). avg = sum / n; std = sqrt(sum((x - avg)^2) / n) (ddof 0).
/// Empty input gives count 0 and zeros.
Stats compute_stats(const std::vector<double>& values, double scale = 1.0);

}  // namespace dyn::metrics
