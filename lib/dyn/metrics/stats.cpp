// NumPy-compatible sums and summary statistics (SPEC 7; the percentile is records').
#include "dyn/metrics/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dyn/records/percentile.h"

namespace dyn::metrics {
namespace {

// NumPy's pairwise_sum for float64 (numpy/core/src/umath/loops_utils.h.src): plain loop below 8
// elements, eight interleaved accumulators up to 128, recursive halves (rounded to 8) above.
double pairwise(const double* a, std::size_t n) {
  if (n < 8) {
    double r = 0.0;
    for (std::size_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

}  // namespace

double numpy_sum(const double* values, std::size_t n) {
  constexpr std::size_t kBuffer = 8192;  // NumPy's default ufunc buffer size
  double total = 0.0;
  for (std::size_t off = 0; off < n; off += kBuffer) total += pairwise(values + off, std::min(kBuffer, n - off));
  return total;
}

double Stats::pct(int which) const {
  for (std::size_t i = 0; i < std::size(kPercentiles); ++i)
    if (static_cast<int>(kPercentiles[i]) == which) return p[i];
  return std::numeric_limits<double>::quiet_NaN();
}

Stats compute_stats(const std::vector<double>& values, double scale) {
  Stats s;
  s.count = values.size();
  if (values.empty()) return s;
  const double n = static_cast<double>(values.size());
  const double mean = numpy_sum(values.data(), values.size()) / n;
  std::vector<double> sq(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double d = values[i] - mean;
    sq[i] = d * d;
  }
  const double var = numpy_sum(sq.data(), sq.size()) / n;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.avg = mean;
  s.std = std::sqrt(var);
  s.min = sorted.front();
  s.max = sorted.back();
  for (std::size_t i = 0; i < std::size(kPercentiles); ++i)
    s.p[i] = records::percentile_linear(sorted, kPercentiles[i]);
  if (scale != 1.0) {
    s.avg *= scale;
    s.std *= scale;
    s.min *= scale;
    s.max *= scale;
    for (double& v : s.p) v *= scale;
  }
  return s;
}

}  // namespace dyn::metrics
