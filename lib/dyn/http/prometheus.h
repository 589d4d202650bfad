// Prometheus text exposition (format 0.0.4) for the servers' GET /metrics: metric family
// headers, samples and fixed-bucket latency histograms (dyn-route serve, dyn-mocker).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

/// The value of label `label` on the first sample of `metric` in Prometheus text `text` (format
/// 0.0.4), when it is a decimal integer: for an info gauge, whose facts are its labels, e.g.
/// vLLM's `vllm:cache_config_info{block_size="16",...,num_gpu_blocks="2340",...} 1.0`
/// (vllm/v1/metrics/loggers.py). nullopt when the metric, the label or a number is missing
/// (vLLM writes an unset field as "None") or it has over 19 digits. Escaped quotes in other
/// labels' values are skipped over.
std::optional<uint64_t> prom_label_u64(std::string_view text, std::string_view metric, std::string_view label);

}  // namespace dyn::http
