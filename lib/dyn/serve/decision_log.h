// The live router's decision log and quality counters (issue 55): a route_decision row per sampled
// placement into the request trace, each placement's quality on its exchange, and predicted
// against delivered cached tokens.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dyn/route/quality.h"
#include "dyn/route/router.h"

namespace dyn::serve {

struct Exchange;
struct ResponseFacts;
class RequestTrace;

/// Whether request `id` is in a `rate` sample: FNV-1a 64 of its bytes, mixed by splitmix64's
/// finalizer, below rate x 2^64. Deterministic per id, so replicas given the same id (a client's
/// x-request-id) agree; rate 1 takes every id, 0 none. `rate` in [0, 1].
bool decision_sampled(std::string_view id, double rate);

/// Serve mode's decision log: `rate` unset = off (no rows), else the sample fraction
/// (--router-decision-log[=RATE], DYN_ROUTER_DECISION_LOG_SAMPLE_RATE). Thread-safe.
class DecisionLog {
 public:
  DecisionLog(std::optional<double> rate, uint32_t block_size, RequestTrace& trace)
      : rate_(rate), block_size_(block_size), trace_(trace) {}

  /// Whether the placement of `ex` is logged (so it must ask the router for every candidate's
  /// score: RouteRequest::explain). The sample key is x-request-id when the client sent one (the
  /// id replicas share), else the router's request id.
  bool wants(const Exchange& ex) const;
  /// A placement `p` of `ex` was taken: its quality goes on the exchange (request_end's dyn fields)
  /// and, when wants(ex), its route_decision row into the trace, written like request_end rows
  /// (SegmentWriter::write_line: an append under a lock, compression off the caller's thread).
  void placed(Exchange& ex, const route::Placement& p);
  /// The exchange ended: its engine-reported cached tokens (usage) against the prediction.
  void ended(const Exchange& ex, const ResponseFacts* facts);
  route::StalenessTotals staleness() const;
  /// Rows written.
  uint64_t rows() const;

 private:
  std::optional<double> rate_;
  uint32_t block_size_;
  RequestTrace& trace_;
  mutable std::mutex mu_;
  route::StalenessTotals staleness_;
  uint64_t rows_ = 0;
};

/// The quality counters' Prometheus families (dyn_router_* decision quality, staleness).
void quality_families(std::string& o, const route::QualityTotals& q, const route::StalenessTotals& s);

}  // namespace dyn::serve
