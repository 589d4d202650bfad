// Session grouping: turns, roots, parents' latest turns.
#include "dyn/replay/session.h"

#include <map>
#include <set>
#include <unordered_map>

namespace dyn::replay {

SessionPlan plan_sessions(const std::vector<records::WorkloadRow>& rows) {
  const size_t n = rows.size();
  SessionPlan p;
  p.turn.assign(n, 0);
  p.prev_turn.assign(n, -1);
  p.last_turn.assign(n, true);
  p.root.assign(n, "");
  p.parent.assign(n, "");
  p.parent_row.assign(n, -1);
  std::unordered_map<std::string, int64_t> latest;      // session -> latest row so far
  std::unordered_map<std::string, uint32_t> turns;      // session -> turns so far
  std::unordered_map<std::string, std::string> parent;  // session -> parent (first seen)
  for (size_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    if (r.session_id.empty()) continue;
    if (!r.parent_session_id.empty() && r.parent_session_id != r.session_id)
      parent.emplace(r.session_id, r.parent_session_id);
  }
  auto root_of = [&](const std::string& s) {
    std::string cur = s;
    std::set<std::string> seen{cur};
    for (;;) {
      auto it = parent.find(cur);
      if (it == parent.end() || !seen.insert(it->second).second) return cur;
      cur = it->second;
    }
  };
  std::unordered_map<std::string, std::string> root_cache;
  for (size_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    if (r.session_id.empty()) continue;
    auto [rc, fresh] = root_cache.emplace(r.session_id, "");
    if (fresh) rc->second = root_of(r.session_id);
    p.root[i] = rc->second;
    if (auto pt = parent.find(r.session_id); pt != parent.end()) p.parent[i] = pt->second;
    auto lt = latest.find(r.session_id);
    if (lt != latest.end()) {
      p.prev_turn[i] = lt->second;
      p.last_turn[static_cast<size_t>(lt->second)] = false;
      p.turn[i] = ++turns[r.session_id];
      lt->second = static_cast<int64_t>(i);
    } else {
      turns[r.session_id] = 0;
      latest.emplace(r.session_id, static_cast<int64_t>(i));
      if (auto pi = parent.find(r.session_id); pi != parent.end())
        if (auto pl = latest.find(pi->second); pl != latest.end()) p.parent_row[i] = pl->second;
    }
  }
  return p;
}

std::string request_id_for(const records::WorkloadRow& row, uint32_t turn, size_t i) {
  if (!row.request_id.empty()) return row.request_id;
  if (!row.session_id.empty()) return row.session_id + ":" + std::to_string(turn);
  return "row-" + std::to_string(i);
}

}  // namespace dyn::replay
