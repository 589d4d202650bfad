// Seeded distributions with fixed algorithms.
#include "dyn/base/random.h"

#include <cmath>

namespace dyn {

double Rng::exponential(double mean) { return -mean * std::log1p(-uniform()); }

double Rng::normal() {
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::gamma(double shape, double scale) {
  if (shape < 1.0) {
    // Boost a shape < 1 (Marsaglia-Tsang needs shape >= 1).
    double u = uniform();
    if (u < 1e-300) u = 1e-300;
    return gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = uniform();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v * scale;
  }
}

}  // namespace dyn
