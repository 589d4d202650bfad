// One seeded generator per run so offline routing, simulation and replays repeat exactly (SPEC 3.1).
#pragma once

#include <cstdint>
#include <random>

namespace dyn {

/// Seeded pseudo-random source (mt19937_64). Not thread-safe: guard it or use one per thread.
/// Distributions are implemented here rather than with std:: distributions because the standard
/// leaves their algorithms unspecified, and outputs must be identical across library versions.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : gen_(seed) {}
  uint64_t next_u64() { return gen_(); }
  /// Uniform integer in [0, n); n must be > 0.
  uint64_t below(uint64_t n) { return next_u64() % n; }
  /// Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Exponential with the given mean (> 0).
  double exponential(double mean);
  /// Gamma(shape k > 0, scale theta > 0) by Marsaglia-Tsang.
  double gamma(double shape, double scale);
  /// Standard normal (Box-Muller).
  double normal();

 private:
  std::mt19937_64 gen_;
};

}  // namespace dyn
