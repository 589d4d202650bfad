// The frontend's Prometheus counters per worker (the text format: dyn/http/prometheus.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "dyn/http/prometheus.h"

namespace dyn::serve {

/// Per-worker counters (index = worker id).
struct WorkerCounters {
  std::atomic<uint64_t> requests{0};   ///< requests dispatched to the worker
  std::atomic<uint64_t> errors{0};     ///< of those, ended in an error (HTTP >= 400, transport, cut)
  std::atomic<uint64_t> cancelled{0};  ///< client went away
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> answered{0};  ///< ended with a complete response (not exported: health's evidence)
  std::atomic<uint64_t> input_tokens{0}, output_tokens{0}, cached_tokens{0};
};

// The text format's helpers live with the other server helpers (dyn/http).
using http::LatencyHistogram;
using http::prom_family;
using http::prom_sample;

}  // namespace dyn::serve
