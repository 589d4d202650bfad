// demote-prefetch's planned prefetches in the live router (SPEC 6.4): per session, the one
// kv.prefetch due before its predicted return, cancelled when the session comes back first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace dyn::kvpolicy {

/// The prefetches planned, at most one per session (a later plan replaces an earlier one: a
/// session waits on one tool call at a time), due in time order. Times in ms on the caller's
/// clock. `turn` is the caller's count of the session's turns when planned: a caller that takes a
/// plan after the session's next turn arrived (a race with cancel) can tell it is stale. Bounded
/// by the caller's sessions (each plan is cancelled when its session is forgotten). Not
/// thread-safe.
class PrefetchPlan {
 public:
  struct Due {
    std::string session;
    size_t worker = 0;
    uint64_t turn = 0;
  };
  /// Plans `session`'s prefetch to `worker` at `due_ms`, replacing any earlier plan of it.
  void plan(const std::string& session, size_t worker, uint64_t turn, double due_ms);
  /// The session came back (or ended) before its prefetch: the plan goes. True when one was planned.
  bool cancel(const std::string& session);
  /// The plans due at `now_ms` (due_ms <= now_ms), earliest first (ties by session id), removed.
  std::vector<Due> take_due(double now_ms);
  /// When the earliest plan is due, or nullopt when none is planned.
  std::optional<double> next_due_ms() const;
  size_t size() const { return by_session_.size(); }

 private:
  struct Planned {
    size_t worker;
    uint64_t turn;
    double due_ms;
  };
  std::set<std::pair<double, std::string>> by_due_;  // (due_ms, session): the order they go
  std::unordered_map<std::string, Planned> by_session_;
};

}  // namespace dyn::kvpolicy
