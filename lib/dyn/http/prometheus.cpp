// Prometheus text format helpers and the latency histogram.
#include "dyn/http/prometheus.h"

#include <fmt/format.h>

namespace dyn::http {

void LatencyHistogram::observe(double ms) {
  size_t i = 0;
  while (i < kBucketsMs.size() && ms > kBucketsMs[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(ms < 0 ? 0 : ms * 1000), std::memory_order_relaxed);
}

void LatencyHistogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < kBucketsMs.size(); ++i) {
    cum += counts_[i].load(std::memory_order_relaxed);
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, labels, kBucketsMs[i] / 1000.0, cum);
  }
  cum += counts_[kBucketsMs.size()].load(std::memory_order_relaxed);
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, labels, cum);
  std::string l = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
  out += fmt::format("{}_sum{} {}\n", name, l, sum_us_.load(std::memory_order_relaxed) / 1e6);
  out += fmt::format("{}_count{} {}\n", name, l, count_.load(std::memory_order_relaxed));
}

void prom_family(std::string& out, const std::string& name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void prom_sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  if (labels.empty()) {
    out += fmt::format("{} {}\n", name, value);
  } else {
    out += fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
}

}  // namespace dyn::http
