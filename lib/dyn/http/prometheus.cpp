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

std::optional<uint64_t> prom_label_u64(std::string_view text, std::string_view metric, std::string_view label) {
  // The sample line: `metric{` at a line start (HELP and TYPE lines start with '#').
  size_t at = 0;
  for (;;) {
    at = text.find(metric, at);
    if (at == std::string_view::npos) return std::nullopt;
    const size_t after = at + metric.size();
    if ((at == 0 || text[at - 1] == '\n') && after < text.size() && text[after] == '{') {
      at = after + 1;
      break;
    }
    at = after;
  }
  // name="value" pairs up to the closing brace; a value may hold \" and \\ escapes.
  while (at < text.size() && text[at] != '}' && text[at] != '\n') {
    while (at < text.size() && (text[at] == ',' || text[at] == ' ')) ++at;
    const size_t eq = text.find('=', at);
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return std::nullopt;
    const std::string_view name = text.substr(at, eq - at);
    size_t end = eq + 2;
    while (end < text.size() && text[end] != '"' && text[end] != '\n') end += text[end] == '\\' ? 2 : 1;
    if (end >= text.size() || text[end] != '"') return std::nullopt;
    if (name == label) {
      const std::string_view v = text.substr(eq + 2, end - eq - 2);
      if (v.empty() || v.size() > 19) return std::nullopt;
      uint64_t n = 0;
      for (char c : v) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      return n;
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace dyn::http
