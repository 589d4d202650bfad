// Decision quality: a placement against the eligible workers of the router's own picture (issue 55).
#include <algorithm>
#include <cmath>

#include "dyn/route/router.h"

namespace dyn::route {

DecisionQuality assess_decision(std::span<const WorkerScore> scores, uint64_t chosen, Steer steer, uint32_t block_size,
                                uint64_t tokens) {
  DecisionQuality q;
  const WorkerScore* win = nullptr;
  for (const WorkerScore& s : scores)
    if (s.worker == chosen) win = &s;
  if (!win) return q;  // not among the scores: nothing to compare with
  auto cached = [&](uint32_t blocks) { return std::min<uint64_t>(uint64_t{blocks} * block_size, tokens); };
  // Costs are sums of a few products of small numbers: equal ones may differ in the last bits.
  const double eps = 1e-9 * std::max(1.0, std::fabs(win->cost));
  uint32_t best = win->overlap_blocks;
  std::optional<double> runner_up;
  for (const WorkerScore& s : scores) {
    if (!s.eligible || &s == win) continue;
    best = std::max(best, s.overlap_blocks);
    runner_up = runner_up ? std::min(*runner_up, s.cost) : s.cost;
    if (std::fabs(s.cost - win->cost) <= eps) ++q.ties;
  }
  q.predicted_cached_tokens = cached(win->overlap_blocks);
  q.best_cached_tokens = cached(best);
  q.avoidable_prefill_tokens = q.best_cached_tokens - q.predicted_cached_tokens;
  if (runner_up) q.margin = *runner_up - win->cost;
  // A pick is non-max only when it costs prefill: overlap beyond the prompt's tokens saves nothing.
  if (q.avoidable_prefill_tokens == 0) return q;
  switch (steer) {
    case Steer::kAffinity: q.cause = NonMaxCause::kAffinity; return q;
    case Steer::kAdmission: q.cause = NonMaxCause::kAdmission; return q;
    case Steer::kPinned: q.cause = NonMaxCause::kPinned; return q;
    case Steer::kPolicy: break;
  }
  // The policy's own pick: compared with the cheapest eligible worker holding the most overlap.
  double best_cost = INFINITY;
  for (const WorkerScore& s : scores)
    if (s.eligible && s.overlap_blocks == best) best_cost = std::min(best_cost, s.cost);
  if (std::fabs(win->cost - best_cost) <= eps) q.cause = NonMaxCause::kTie;
  else if (win->cost < best_cost) q.cause = NonMaxCause::kLoad;
  else q.cause = NonMaxCause::kPolicy;
  return q;
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
