// Unit tests for lib/dyn/records: the one percentile (SPEC 7).
#include <doctest/doctest.h>

#include <vector>

#include "dyn/records/percentile.h"

using namespace dyn::records;

TEST_CASE("percentile_linear is NumPy's linear method, its two-sided lerp included (SPEC 7)") {
  const std::vector<double> v{1, 2, 3, 4};
  CHECK(percentile_linear(v, 50) == 2.5);
  CHECK(percentile_linear(v, 25) == 1.75);
  CHECK(percentile_linear(v, 0) == 1);
  CHECK(percentile_linear(v, 100) == 4);
  CHECK(percentile_linear({7}, 90) == 7);
  // np.percentile([0.1, 0.7, 3.3, 1e16], p) with NumPy 1.24: the one-sided a + (b - a) * t that
  // dyn-trace stats used gave 1.9999999999999998, 7000000000000002.0 and 9700000000000002.0.
  const std::vector<double> w{0.1, 0.7, 3.3, 1e16};
  CHECK(percentile_linear(w, 50) == 2.0);
  CHECK(percentile_linear(w, 90) == 7000000000000003.0);
  CHECK(percentile_linear(w, 99) == 9699999999999998.0);
  CHECK(percentile_linear(w, 25) == 0.5499999999999999);
}
