// Prometheus text exposition (format 0.0.4) for the servers' GET /metrics: metric family
// headers, samples and fixed-bucket latency histograms (dyn-route serve, dyn-mocker).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace dyn::http {

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

/// Appends one metric family header (# HELP, # TYPE).
void prom_family(std::string& out, const std::string& name, const char* type, const char* help);
/// Appends `name{labels} value` (`labels` without braces, e.g. `worker_id="0"`; "" = none).
void prom_sample(std::string& out, const std::string& name, const std::string& labels, double value);

}  // namespace dyn::http
