// Prometheus text exposition for the frontend: counters and fixed-bucket latency histograms.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace dyn::serve {

/// A latency histogram in milliseconds with fixed buckets (1 ms … 60 s). Lock-free; observe()
/// may be called from any thread.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 15> kBucketsMs = {1,   2,    5,    10,   20,    50,    100,  200,
                                                         500, 1000, 2000, 5000, 10000, 30000, 60000};
  void observe(double ms);
  /// Appends `<name>_bucket{<labels>le="..."}`, `_sum`, `_count` lines (seconds, as Prometheus
  /// convention wants; `labels` is "" or `key="v",`).
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBucketsMs.size() + 1> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

/// Per-worker counters (index = worker id).
struct WorkerCounters {
  std::atomic<uint64_t> requests{0};     ///< requests dispatched to the worker
  std::atomic<uint64_t> errors{0};       ///< of those, ended in an error (HTTP >= 400, transport, cut)
  std::atomic<uint64_t> cancelled{0};    ///< client went away
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> input_tokens{0}, output_tokens{0}, cached_tokens{0};
};

/// Appends one metric family header (# HELP, # TYPE).
void prom_family(std::string& out, const std::string& name, const char* type, const char* help);
/// Appends `name{labels} value`.
void prom_sample(std::string& out, const std::string& name, const std::string& labels, double value);

}  // namespace dyn::serve
