// The router's session-prefix index (issue 49; Dynamo's SessionPrefixIndexer, DEP
// ai-dynamo/dynamo#13279): per session and worker, the block lineage of the session's turns,
// kept after the worker evicts the blocks, so a hint can name exactly what a session had there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dyn/base/json.h"

namespace dyn::kvpolicy {

/// A logical session -> worker -> lineage map that outlives physical eviction (the physical
/// index forgets a block when its worker removes it; this keeps what the session placed there).
/// A lineage is root first: the sequence hashes (SPEC 4.1) of the full blocks of the session's
/// latest turn on that worker. An agent's turn resends the previous turn's context and grows it,
/// so the latest turn's chain is the lineage of all before it; a turn that does not extend it
/// (a compacted context) replaces it. Dynamo keeps a forest of nodes with frontiers; dyn keeps
/// each (session, worker) chain whole, which answers the same query (the root-first chain) with
/// no pruning pass, at 8 bytes a block. Bounded: at most `max_sessions` sessions (Dynamo's
/// 16,384 by default), the one recorded longest ago forgotten first. Not thread-safe.
class SessionPrefixIndex {
 public:
  static constexpr size_t kDefaultMaxSessions = 16384;
  explicit SessionPrefixIndex(size_t max_sessions = kDefaultMaxSessions) : max_sessions_(max_sessions) {}

  /// A turn of `session` placed on `worker` with the full blocks `hashes` (root first): the
  /// session's lineage there becomes `hashes`, and the session the most recently seen. A turn
  /// with no full block records nothing. `session` "" is ignored.
  void record(const std::string& session, uint64_t worker, std::span<const uint64_t> hashes);
  /// The session's lineage on `worker` (root first), or null when none is kept.
  const std::vector<uint64_t>* lineage(const std::string& session, uint64_t worker) const;
  /// The session ended: its lineages go.
  void forget(const std::string& session);
  size_t sessions() const { return sessions_.size(); }
  /// Sessions forgotten to stay under the bound.
  uint64_t dropped() const { return dropped_; }
  /// The admin view: {max_sessions, sessions, dropped, lineages: [{session_id, workers:
  /// [{worker, blocks, root, last}]}]}: root and last are the first and last sequence hashes
  /// (decimal strings, as hints write them), sessions by id, workers ascending.
  Json snapshot_json() const;

 private:
  struct Session {
    std::map<uint64_t, std::vector<uint64_t>> by_worker;
    std::list<std::string>::iterator lru;
  };
  size_t max_sessions_;
  std::unordered_map<std::string, Session> sessions_;
  std::list<std::string> lru_;  ///< session ids, the one recorded longest ago first
  uint64_t dropped_ = 0;
};

}  // namespace dyn::kvpolicy
