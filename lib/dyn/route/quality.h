// Decision quality (issue 55): how a placement compares with the best the router's own picture
// allowed, the figures behind dyn-route serve's /metrics, decide's summary, --sim's rows and
// dyn-bench audit.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>

#include "dyn/base/json.h"
#include "dyn/base/named.h"

namespace dyn::route {

/// Why a placement did not take the eligible worker with the most overlap (a non-max-overlap
/// selection). kNone: it did (kv-optimal).
enum class NonMaxCause {
  kNone,
  kLoad,       ///< the cost model preferred it: its load terms outweighed the overlap (SPEC 3.2)
  kTie,        ///< its cost equalled a higher-overlap worker's; the tie-break chose it
  kAffinity,   ///< a session binding kept the request on its worker (SPEC 2.2)
  kAdmission,  ///< the admission controller placed the program there (SPEC 9)
  kPinned,     ///< the client named the worker (x-dynamo-worker-instance-id)
  kPolicy,     ///< a policy that does not minimise cost (temperature draw, round robin, random, ...)
};
/// Causes by their names in records and metrics (`cause` label), in the order above; kNone has none.
inline constexpr Named<NonMaxCause> kNonMaxCauses[] = {
    {NonMaxCause::kLoad, "load", "the load terms outweighed the overlap"},
    {NonMaxCause::kTie, "tie", "equal cost; the tie-break chose a lower overlap"},
    {NonMaxCause::kAffinity, "affinity", "a session binding kept the worker"},
    {NonMaxCause::kAdmission, "admission", "the admission controller chose the worker"},
    {NonMaxCause::kPinned, "pinned", "the client named the worker"},
    {NonMaxCause::kPolicy, "policy", "the policy does not minimise cost"},
};
/// The record name of `c` ("" for kNone).
inline const char* non_max_cause_name(NonMaxCause c) {
  return c == NonMaxCause::kNone ? "" : name_in(kNonMaxCauses, c);
}

/// What chose the worker before the policy could: nothing (kPolicy), a live session binding, the
/// admission controller, or the client.
enum class Steer { kPolicy, kAffinity, kAdmission, kPinned };

/// One placement measured against the router's own picture at the moment of decision.
struct DecisionQuality {
  uint64_t predicted_cached_tokens = 0;  ///< min(chosen overlap x block size, prompt tokens)
  uint64_t best_cached_tokens = 0;       ///< the same for the eligible worker with the most overlap
  /// best - predicted: prefill a higher-overlap eligible worker would have saved (Dynamo's
  /// avoidable_prefill_tokens, ai-dynamo/dynamo PR 13987).
  uint64_t avoidable_prefill_tokens = 0;
  /// The runner-up's cost minus the winner's (another eligible worker's lowest cost); negative when
  /// a binding or a pin kept a costlier worker. Unset with no other eligible worker.
  std::optional<double> margin;
  uint32_t ties = 0;  ///< other eligible workers whose cost equals the winner's
  NonMaxCause cause = NonMaxCause::kNone;
  bool kv_optimal() const { return cause == NonMaxCause::kNone; }
};

/// Running sums of DecisionQuality over placements, for counters and summaries.
struct QualityTotals {
  uint64_t decisions = 0, kv_optimal = 0;
  uint64_t predicted_cached_tokens = 0, avoidable_prefill_tokens = 0;
  uint64_t non_max[std::size(kNonMaxCauses)] = {};  ///< per cause, kNonMaxCauses order
  void add(const DecisionQuality& q) {
    ++decisions;
    predicted_cached_tokens += q.predicted_cached_tokens;
    avoidable_prefill_tokens += q.avoidable_prefill_tokens;
    if (q.kv_optimal()) ++kv_optimal;
    else ++non_max[static_cast<size_t>(q.cause) - 1];
  }
};

/// `q` as a summary object (decide --summary, dyn-replay --sim's summary): decisions, kv_optimal,
/// kv_optimal_share (0..1; 0 with no decision), predicted_cached_tokens, avoidable_prefill_tokens,
/// non_max_overlap_selections {cause: count} in kNonMaxCauses order.
Json quality_json(const QualityTotals& q);

struct StalenessTotals;
/// `s` as a summary object: requests, predicted_tokens, delivered_tokens, over_requests,
/// over_tokens, under_requests, under_tokens.
Json staleness_json(const StalenessTotals& s);

/// Predicted against delivered cached tokens (the engine's usage): staleness of the router's index
/// counted by sign, as llm-d asks (llm-d-router 2896/2897: the chosen endpoint's predicted hit
/// beside the engine's).
struct StalenessTotals {
  uint64_t requests = 0;  ///< requests whose engine reported cached tokens
  uint64_t predicted_tokens = 0, delivered_tokens = 0;
  uint64_t over_requests = 0, over_tokens = 0;    ///< predicted > delivered (a stale index)
  uint64_t under_requests = 0, under_tokens = 0;  ///< delivered > predicted (the index missed blocks)
  void add(uint64_t predicted, uint64_t delivered) {
    ++requests;
    predicted_tokens += predicted;
    delivered_tokens += delivered;
    if (predicted > delivered) {
      ++over_requests;
      over_tokens += predicted - delivered;
    } else if (delivered > predicted) {
      ++under_requests;
      under_tokens += delivered - predicted;
    }
  }
};

}  // namespace dyn::route
