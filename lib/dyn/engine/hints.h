// KV hints (SPEC 8.6): Dynamo's KvHint v0.1 envelope and the engine's leases that honour it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/engine/config.h"

namespace dyn::engine {

class KvPool;

/// One versioned action of a KvHint. `payload` is kept as sent, so an action this engine does
/// not know travels on unchanged (Dynamo kv_hints.rs: unknown actions are opaque transport data).
struct KvHintAction {
  std::string action_id;
  std::string action_type;     ///< "kv.retain", "kv.evict", "kv.fetch", "kv.prefetch", "kv.demote", or any other
  std::string action_version;  ///< "1.0" for the actions this engine knows
  Json payload = Json::object();
};

/// Dynamo's KvHint message, wire format v0.1 (ai-dynamo/dynamo lib/kv-router/src/kv_hints.rs):
/// `{"protocol_version": "0.1", "message_id": str, "actions": [{"action_id", "action_type",
/// "action_version", "payload": {...}}]}`.
struct KvHint {
  std::string protocol_version = "0.1";
  std::string message_id;
  std::vector<KvHintAction> actions;
};

/// Reads a KvHint. Errors (kExitBadData, naming the field after `where`: "KV hint:
/// actions[1].payload: not an object"):
/// not an object, a missing or non-string protocol_version / message_id / action_type /
/// action_version, a protocol_version other than 0.x, actions not an array, a payload not an
/// object. action_id may be absent (""): Dynamo always sends one, a hand-written hint may not.
/// Fields of the envelope this version does not define are ignored, as Dynamo's serde does.
Expected<KvHint> parse_kv_hint(const Json& j, std::string_view where = "KV hint");
/// The wire form of `h` (parse_kv_hint(to_json(h)) == h; unknown actions byte-identical payloads).
Json to_json(const KvHint& h);

/// What the engine did with one action (vllm-project/vllm#51428's outcomes; `passed_through` is
/// an action type this engine does not know, left untouched for whoever does).
enum class HintOutcome : uint8_t { kAccepted, kClipped, kRejected, kPassedThrough };
inline constexpr Named<HintOutcome> kHintOutcomes[] = {
    {HintOutcome::kAccepted, "accepted", "done as asked"},
    {HintOutcome::kClipped, "clipped", "done within the engine's bounds (cap, TTL, blocks cached)"},
    {HintOutcome::kRejected, "rejected", "not done; the reason says why"},
    {HintOutcome::kPassedThrough, "passed_through", "an action type this engine does not know, untouched"},
};
/// The action types counted apart in /metrics (any other is "other").
inline constexpr const char* kHintActionTypes[] = {"kv.retain",   "kv.evict",  "kv.fetch",
                                                   "kv.prefetch", "kv.demote", "other"};
inline constexpr size_t kHintActionKinds = std::size(kHintActionTypes);
inline constexpr size_t kHintOutcomeKinds = std::size(kHintOutcomes);

/// One action's outcome. `blocks`: blocks pinned (retain) or released first out (evict);
/// `ttl_s`: the lease's TTL as granted (retain).
struct HintResult {
  std::string action_id;
  std::string action_type;
  HintOutcome outcome = HintOutcome::kRejected;
  std::string reason;  ///< why it was clipped or rejected ("" when accepted)
  uint64_t blocks = 0;
  double ttl_s = 0;
};
/// `{"action_id", "action_type", "outcome", "reason"?, "blocks"?, "ttl_seconds"?}`.
Json to_json(const HintResult& r);

/// The request a hint is tied to (executed at its completion), or none.
struct HintTarget {
  double now_ms = 0;                               ///< the engine's clock (virtual in --sim)
  uint64_t session = 0;                            ///< session_tag() of the request's session, 0 = none
  const std::vector<uint64_t>* current = nullptr;  ///< the completing request's block hashes, null = not tied
};

/// The nonzero tag a session id gets in the engine (RequestSpec::session).
uint64_t session_tag(std::string_view session_id);

/// The leases of one engine's KV hints over its pool (SPEC 8.6). kv.retain pins the named
/// blocks that are cached on G1, root first, for min(ttl_seconds, max_ttl_s): a lease. Pinned
/// blocks are evicted only after every unpinned one; at expiry they drop back to the eviction
/// order as its oldest blocks. kv.evict ends the session's leases and puts the named blocks
/// first out; kv.demote (with KV tiers) ends them and offloads the named blocks to G2 now;
/// kv.prefetch (with KV tiers) has the engine's prefetcher bring them back to G1.
/// Not thread-safe (the owning Engine serialises access).
class KvLeases {
 public:
  /// kv.prefetch's mover (the Engine's): starts copying up to G1, at `now_ms`, the blocks of
  /// `hashes` (root first) that continue their G1 prefix on a lower tier. Returns the blocks it
  /// moves, and a reason when it can move none although some are missing from G1.
  using Prefetcher =
      std::function<std::pair<uint64_t, std::string>(const std::vector<uint64_t>& hashes, double now_ms)>;

  /// `tiered`: the engine has KV tiers below G1 (kv.demote offloads to G2).
  KvLeases(KvPool& pool, KvHintLimits limits, bool tiered = false) : pool_(pool), limits_(limits), tiered_(tiered) {}

  /// Applies each action of `h` in order and says what became of it.
  std::vector<HintResult> apply(const KvHint& h, const HintTarget& t);
  /// Ends leases whose TTL ran out by `now_ms`.
  void expire(double now_ms) {
    if (now_ms >= next_expiry_) expire_due(now_ms);
  }
  /// Remembers the blocks of a session's latest request (the lineage kv.evict and a session_id
  /// payload address; the least recently seen session goes past max_sessions).
  void note_session(uint64_t session, const std::vector<uint64_t>& hashes);

  /// Ends every lease of `session` (its last turn completed), blocks dropping back as at expiry.
  void end_session(uint64_t session);

  void set_prefetcher(Prefetcher p) { prefetch_ = std::move(p); }

  uint64_t leases() const { return leases_.size(); }
  uint64_t cap_blocks() const;
  /// counts[action kind][outcome] (kHintActionTypes x kHintOutcomes).
  const uint64_t (&counts() const)[kHintActionKinds][kHintOutcomeKinds] { return counts_; }

 private:
  struct Lease {
    uint64_t session = 0;
    int64_t priority = 0;
    double expires_ms = 0;
    std::vector<uint64_t> hashes;  // distinct, each pinned once by this lease
  };
  HintResult retain(const KvHintAction& a, const HintTarget& t);
  HintResult evict(const KvHintAction& a, const HintTarget& t, bool demote);
  HintResult prefetch(const KvHintAction& a, const HintTarget& t);
  const std::vector<uint64_t>* lineage(uint64_t session) const;
  void end(uint64_t id, bool first_out);
  void expire_due(double now_ms);
  // Ends leases of lower priority than `priority` (lowest, then soonest to expire, first) until
  // `want` more hashes fit the cap.
  void displace(int64_t priority, uint64_t want);

  KvPool& pool_;
  KvHintLimits limits_;
  bool tiered_;
  Prefetcher prefetch_;
  std::map<uint64_t, Lease> leases_;  // by id, in creation order
  uint64_t next_id_ = 1;
  double next_expiry_ = 1e300;
  struct Lineage {
    std::vector<uint64_t> hashes;
    std::list<uint64_t>::iterator lru;
  };
  std::unordered_map<uint64_t, Lineage> sessions_;
  std::list<uint64_t> session_lru_;  // least recently seen first
  uint64_t counts_[kHintActionKinds][kHintOutcomeKinds] = {};
};

}  // namespace dyn::engine
