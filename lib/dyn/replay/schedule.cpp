// Plan construction: offsets, request count, dependencies, arrival processes.
#include "dyn/replay/schedule.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace dyn::replay {

Plan build_plan(const records::Workload& w, const ScheduleOptions& o) {
  Plan plan;
  const auto& rows = w.rows;
  const size_t n = rows.size();
  SessionPlan sp = plan_sessions(rows);
  const bool fixed = o.mode == LoadMode::kFixedSchedule;
  const double speed = o.speedup > 0 ? o.speedup : 1;

  // 1. Which rows are kept (offsets), in order.
  std::vector<bool> keep(n, true);
  if (fixed && (o.start_offset_ms || o.end_offset_ms)) {
    for (size_t i = 0; i < n; ++i) {
      const auto& r = rows[i];
      std::optional<double> ts = r.timestamp_ms;
      // A delay-driven later turn has no timestamp: it goes with its session's first turn.
      if (!ts && sp.prev_turn[i] >= 0) {
        keep[i] = keep[static_cast<size_t>(sp.prev_turn[i])];
        continue;
      }
      if (!ts) continue;
      if ((o.start_offset_ms && *ts < *o.start_offset_ms) || (o.end_offset_ms && *ts > *o.end_offset_ms)) {
        keep[i] = false;
        ++plan.outside_offsets;
      }
    }
  }
  std::vector<int64_t> item_of(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    if (o.request_count && plan.items.size() >= o.request_count) {
      ++plan.over_count;
      continue;
    }
    item_of[i] = static_cast<int64_t>(plan.items.size());
    PlanItem it;
    it.row = i;
    plan.items.push_back(std::move(it));
  }

  // 2. Time zero of the fixed schedule.
  if (fixed) {
    if (o.start_offset_ms) plan.zero_ms = *o.start_offset_ms;
    else if (o.auto_offset)
      for (const auto& it : plan.items)
        if (rows[it.row].timestamp_ms) {
          plan.zero_ms = *rows[it.row].timestamp_ms;
          break;
        }
  }

  // 3. Request ids (for wait_for) and dependencies.
  std::unordered_map<std::string, size_t> by_id;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& it = plan.items[k];
    const auto& r = rows[it.row];
    it.turn = sp.turn[it.row];
    it.last_turn = sp.last_turn[it.row];
    it.request_id = request_id_for(r, it.turn, r.index);
    it.identity = Identity{r.session_id, sp.parent[it.row], sp.root[it.row], sp.last_turn[it.row]};
    by_id.emplace(it.request_id, k);
  }
  Rng rng(o.seed);
  double arrival = 0;
  bool first_arrival = true;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& it = plan.items[k];
    const auto& r = rows[it.row];
    auto dep_item = [&](int64_t row) -> int64_t { return row < 0 ? -1 : item_of[static_cast<size_t>(row)]; };
    double delay = 0;
    if (int64_t prev = dep_item(sp.prev_turn[it.row]); prev >= 0) {
      it.deps.push_back(static_cast<size_t>(prev));
      const auto& pr = rows[plan.items[static_cast<size_t>(prev)].row];
      if (r.delay_ms) delay = *r.delay_ms;
      else if (r.timestamp_ms && pr.timestamp_ms) delay = std::max(0.0, *r.timestamp_ms - *pr.timestamp_ms);
    } else if (int64_t par = dep_item(sp.parent_row[it.row]); par >= 0 && !(fixed && r.timestamp_ms)) {
      it.deps.push_back(static_cast<size_t>(par));
      delay = r.delay_ms.value_or(0);
    }
    for (const auto& wid : r.wait_for) {
      auto f = by_id.find(wid);
      if (f == by_id.end()) {
        plan.errors.push_back(r.where + ": wait_for names request '" + wid +
                              "', which is not in the replayed workload");
        continue;
      }
      if (f->second >= k) {
        plan.errors.push_back(r.where + ": wait_for names request '" + wid + "', which comes later in the workload");
        continue;
      }
      if (std::find(it.deps.begin(), it.deps.end(), f->second) == it.deps.end()) it.deps.push_back(f->second);
    }
    if (r.tool_wait_ms && !it.deps.empty()) delay += *r.tool_wait_ms;
    it.delay_ms = delay / speed;
    if (!it.deps.empty()) continue;
    // A start of its own.
    switch (o.mode) {
      case LoadMode::kFixedSchedule:
        if (r.timestamp_ms) it.at_ms = std::max(0.0, (*r.timestamp_ms - plan.zero_ms) / speed);
        else it.at_ms = r.delay_ms.value_or(0) / speed;  // only when timestamps are not required
        break;
      case LoadMode::kRequestRate: {
        if (!first_arrival) {
          double mean = 1000.0 / o.request_rate;
          if (o.rate_mode == RateMode::kConstant) arrival += mean;
          else if (o.rate_mode == RateMode::kPoisson) arrival += rng.exponential(mean);
          else arrival += rng.gamma(o.gamma_shape, mean / o.gamma_shape);
        }
        first_arrival = false;
        it.at_ms = arrival;
        break;
      }
      case LoadMode::kConcurrency: it.at_ms = 0; break;
    }
  }
  return plan;
}

double expected_end_ms(const std::vector<PlanItem>& items, const std::vector<double>& sent_ms,
                       const std::vector<double>& ended_ms, double now_ms, double latency_ms) {
  std::vector<double> end(items.size(), 0);
  double last = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const PlanItem& it = items[k];
    double start;
    if (!std::isnan(sent_ms[k])) {
      start = sent_ms[k];
    } else {
      start = it.at_ms.value_or(0);
      double ready = 0;
      for (size_t d : it.deps) ready = std::max(ready, end[d]);
      if (!it.deps.empty()) start = std::max(start, ready + it.delay_ms);
      start = std::max(start, now_ms);  // not sent yet: it cannot start in the past
    }
    if (!std::isnan(ended_ms[k])) end[k] = ended_ms[k];
    else if (!std::isnan(sent_ms[k])) end[k] = std::max(now_ms, start + latency_ms);
    else end[k] = start + latency_ms;
    last = std::max(last, end[k]);
  }
  return last;
}

}  // namespace dyn::replay
