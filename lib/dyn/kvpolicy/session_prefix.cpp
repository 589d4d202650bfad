// The router's session-prefix index: per session and worker, the latest turn's block chain.
#include "dyn/kvpolicy/session_prefix.h"

#include <algorithm>

namespace dyn::kvpolicy {

void SessionPrefixIndex::record(const std::string& session, uint64_t worker, std::span<const uint64_t> hashes) {
  if (session.empty() || hashes.empty() || max_sessions_ == 0) return;
  auto [it, made] = sessions_.try_emplace(session);
  if (made) {
    lru_.push_back(session);
    it->second.lru = std::prev(lru_.end());
  } else {
    lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  it->second.by_worker[worker].assign(hashes.begin(), hashes.end());
  if (sessions_.size() > max_sessions_) {
    sessions_.erase(lru_.front());
    lru_.pop_front();
    ++dropped_;
  }
}

const std::vector<uint64_t>* SessionPrefixIndex::lineage(const std::string& session, uint64_t worker) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return nullptr;
  auto w = it->second.by_worker.find(worker);
  return w == it->second.by_worker.end() ? nullptr : &w->second;
}

void SessionPrefixIndex::forget(const std::string& session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  lru_.erase(it->second.lru);
  sessions_.erase(it);
}

Json SessionPrefixIndex::snapshot_json() const {
  std::vector<const std::string*> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, s] : sessions_) ids.push_back(&id);
  std::sort(ids.begin(), ids.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  Json rows = Json::array();
  for (const std::string* id : ids) {
    Json workers = Json::array();
    for (const auto& [w, chain] : sessions_.at(*id).by_worker)
      workers.push_back({{"worker", w},
                         {"blocks", chain.size()},
                         {"root", std::to_string(chain.front())},
                         {"last", std::to_string(chain.back())}});
    rows.push_back({{"session_id", *id}, {"workers", std::move(workers)}});
  }
  return {{"max_sessions", max_sessions_}, {"sessions", sessions_.size()}, {"dropped", dropped_}, {"lineages", rows}};
}

}  // namespace dyn::kvpolicy
