// demote-prefetch's planned prefetches: one per session, taken when due, cancelled on return.
#include "dyn/kvpolicy/prefetch_plan.h"

namespace dyn::kvpolicy {

void PrefetchPlan::plan(const std::string& session, size_t worker, uint64_t turn, double due_ms) {
  cancel(session);
  by_due_.emplace(due_ms, session);
  by_session_.emplace(session, Planned{worker, turn, due_ms});
}

bool PrefetchPlan::cancel(const std::string& session) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return false;
  by_due_.erase({it->second.due_ms, session});
  by_session_.erase(it);
  return true;
}

std::vector<PrefetchPlan::Due> PrefetchPlan::take_due(double now_ms) {
  std::vector<Due> out;
  while (!by_due_.empty() && by_due_.begin()->first <= now_ms) {
    const std::string session = by_due_.begin()->second;
    const Planned& p = by_session_.at(session);
    out.push_back({session, p.worker, p.turn});
    cancel(session);
  }
  return out;
}

std::optional<double> PrefetchPlan::next_due_ms() const {
  if (by_due_.empty()) return std::nullopt;
  return by_due_.begin()->first;
}

}  // namespace dyn::kvpolicy
