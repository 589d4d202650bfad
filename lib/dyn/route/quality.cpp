// Decision quality: a placement against the eligible workers of the router's own picture (issue 55).
#include <algorithm>
#include <cmath>

#include "dyn/route/router.h"

namespace dyn::route {

DecisionAssessor::DecisionAssessor(const WorkerScore& chosen, Steer steer, uint32_t block_size, uint64_t tokens)
    : win_(chosen),
      steer_(steer),
      block_size_(block_size),
      tokens_(tokens),
      // Costs are sums of a few products of small numbers: equal ones may differ in the last bits.
      eps_(1e-9 * std::max(1.0, std::fabs(chosen.cost))),
      best_(chosen.overlap_blocks),
      best_cost_(chosen.eligible ? chosen.cost : INFINITY) {}

DecisionQuality DecisionAssessor::finish() const {
  DecisionQuality q;
  auto cached = [&](uint32_t blocks) { return std::min<uint64_t>(uint64_t{blocks} * block_size_, tokens_); };
  q.ties = ties_;
  q.predicted_cached_tokens = cached(win_.overlap_blocks);
  q.best_cached_tokens = cached(best_);
  q.avoidable_prefill_tokens = q.best_cached_tokens - q.predicted_cached_tokens;
  if (runner_up_) q.margin = *runner_up_ - win_.cost;
  // A pick is non-max only when it costs prefill: overlap beyond the prompt's tokens saves nothing.
  if (q.avoidable_prefill_tokens == 0) return q;
  switch (steer_) {
    case Steer::kAffinity: q.cause = NonMaxCause::kAffinity; return q;
    case Steer::kAdmission: q.cause = NonMaxCause::kAdmission; return q;
    case Steer::kPinned: q.cause = NonMaxCause::kPinned; return q;
    case Steer::kPolicy: break;
  }
  // The policy's own pick: compared with the cheapest eligible worker holding the most overlap.
  if (std::fabs(win_.cost - best_cost_) <= eps_) q.cause = NonMaxCause::kTie;
  else if (win_.cost < best_cost_) q.cause = NonMaxCause::kLoad;
  else q.cause = NonMaxCause::kPolicy;
  return q;
}

DecisionQuality assess_decision(std::span<const WorkerScore> scores, uint64_t chosen, Steer steer, uint32_t block_size,
                                uint64_t tokens) {
  const WorkerScore* win = nullptr;
  for (const WorkerScore& s : scores)
    if (s.worker == chosen) win = &s;
  if (!win) return {};  // not among the scores: nothing to compare with
  DecisionAssessor a(*win, steer, block_size, tokens);
  for (const WorkerScore& s : scores)
    if (&s != win) a.add(s);
  return a.finish();
}

Json quality_json(const QualityTotals& q) {
  Json causes = Json::object();
  for (size_t i = 0; i < std::size(kNonMaxCauses); ++i) causes[kNonMaxCauses[i].name] = q.non_max[i];
  return Json{
      {"decisions", q.decisions},
      {"kv_optimal", q.kv_optimal},
      {"kv_optimal_share", q.decisions ? static_cast<double>(q.kv_optimal) / static_cast<double>(q.decisions) : 0.0},
      {"predicted_cached_tokens", q.predicted_cached_tokens},
      {"avoidable_prefill_tokens", q.avoidable_prefill_tokens},
      {"non_max_overlap_selections", causes}};
}

Json staleness_json(const StalenessTotals& s) {
  return Json{{"requests", s.requests},
              {"predicted_tokens", s.predicted_tokens},
              {"delivered_tokens", s.delivered_tokens},
              {"over_requests", s.over_requests},
              {"over_tokens", s.over_tokens},
              {"under_requests", s.under_requests},
              {"under_tokens", s.under_tokens}};
}

}  // namespace dyn::route
