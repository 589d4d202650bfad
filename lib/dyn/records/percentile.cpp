// NumPy's linear percentile (SPEC 7).
#include "dyn/records/percentile.h"

#include <cmath>
#include <cstddef>

namespace dyn::records {

double percentile_linear(const std::vector<double>& sorted, double p) {
  const std::size_t n = sorted.size();
  const double q = p / 100.0;
  const double index = static_cast<double>(n - 1) * q;
  if (index >= static_cast<double>(n - 1)) return sorted[n - 1];
  if (index <= 0) return sorted[0];
  const double lo_f = std::floor(index);
  const auto lo = static_cast<std::size_t>(lo_f);
  const double a = sorted[lo], b = sorted[lo + 1];
  const double t = index - lo_f;
  const double diff = b - a;
  // np.lib.function_base._lerp: from the nearer end, so t = 1 gives b exactly.
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

}  // namespace dyn::records
