// The router queue (SPEC 3.4): policy classes served by deficit round robin, strict priority tiers
// and an ordering policy inside each class, and per-worker lanes, on an injected time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"

namespace dyn::route {

/// How a policy class orders its requests (SPEC 3.4; Dynamo's `queue_policy`).
enum class QueuePolicy { kFcfs, kWspt, kEdf, kSessionLas };
inline constexpr Named<QueuePolicy> kQueuePolicies[] = {
    {QueuePolicy::kFcfs, "fcfs", "arrival order, a priority moving a request that many seconds earlier"},
    {QueuePolicy::kWspt, "wspt", "(1 + priority) / uncached tokens: short and important first"},
    {QueuePolicy::kEdf, "edf", "earliest deadline (arrival + the class's deadline_ms) first; priorities ignored"},
    {QueuePolicy::kSessionLas, "session_las", "the session with the least service attained so far first"},
};
const char* queue_policy_name(QueuePolicy p);

/// One policy class: its own queue, its ordering policy and its weight in deficit round robin.
struct PolicyClass {
  std::string name = "default";
  QueuePolicy policy = QueuePolicy::kFcfs;
  /// DRR credit per round, in uncached prompt tokens (Dynamo's `quantum`): a class with twice the
  /// quantum gets twice the prefill work when every class is backlogged. >= 1.
  uint64_t quantum = 4096;
  /// edf: a request's deadline is its arrival plus this (ms); 0 = the queue-time limit.
  double deadline_ms = 0;
  /// The class a subagent of a session in this class falls to unless it names one ("" = this).
  std::string subagent_class;
};

/// What a request gets when it says nothing about its priority (SPEC 3.4 defaults).
struct PriorityDefaults {
  int32_t priority = 0;
  uint32_t strict_priority = 0;
};

/// The queue's settings: classes (the first is the default unless `default_class` names
/// another), per-session defaults, size and time limits. Defaults: one fcfs class, SGLang's
/// router limits (--queue-size 100, --queue-timeout-secs 60).
struct QueueConfig {
  std::vector<PolicyClass> classes{PolicyClass{}};
  size_t default_class = 0;
  /// A root session's requests (no parent) with no priority of their own.
  PriorityDefaults root;
  /// A subagent's default tier is its parent's minus this (at least 0): a fan-out of subagents
  /// waits behind the turn its root's user waits on.
  uint32_t subagent_tier_drop = 1;
  /// Requests waiting at most (--queue-size); one more that must wait gets 429. 0 = none wait.
  size_t max_requests = 100;
  /// A request waiting longer gets 503 with Retry-After (--queue-timeout-secs), in ms.
  double timeout_ms = 60'000;

  /// Reads a policy file (--router-policy-config; JSON, docs/cli.md "Router queue"):
  /// {"default_policy_class"?, "policy_classes": [{"name", "queue_policy"?, "quantum"?,
  /// "deadline_ms"?, "subagent_class"?}], "session_defaults"?: {"priority"?, "strict_priority"?,
  /// "subagent_tier_drop"?}}; unknown keys are errors (as Dynamo's deny_unknown_fields). Size
  /// and time limits stay as set by flags. Errors (exit 3) name `where` and the key.
  static Expected<QueueConfig> from_json(const Json& j, const std::string& where);
  /// from_json of the file at `path` (exit 4 when unreadable, 3 when malformed).
  static Expected<QueueConfig> load(const std::string& path);
  /// Unique non-empty names, quanta >= 1, deadlines >= 0, subagent classes that exist, finite
  /// timeout > 0. Error (exit 2) naming the setting.
  std::optional<Error> validate() const;
  /// Index of the class named `name`; nullopt for an unknown name.
  std::optional<size_t> class_index(std::string_view name) const;
  /// {"default_policy_class", "policy_classes": [...], "session_defaults", "queue_size",
  /// "queue_timeout_secs"} for the run record.
  Json to_json() const;
};

/// One request entering the queue: its snapshot is fixed here (Dynamo: "not recomputed while
/// the request waits").
struct QueueItem {
  uint64_t id = 0;  ///< the caller's handle, unique among queued items
  size_t class_index = 0;
  uint32_t strict_priority = 0;
  int32_t priority = 0;  ///< Dynamo scale (higher first); negative counts as 0 here
  /// max(1, prompt tokens - predicted cached tokens): DRR's and wspt's cost.
  uint64_t cost = 1;
  double arrival_ms = 0;
  /// session_las's key ("" = none: no service attained).
  std::string session;
  /// The one worker it may go to (a pin, the admission controller's worker, a hard binding that
  /// was busy), or any.
  std::optional<uint64_t> worker;
  /// Its place in its class, set by push() and kept by requeue().
  struct Place {
    uint32_t tier = 0;
    double score = 0;
    uint64_t seq = 0;
  };
  std::optional<Place> place;
};

/// Counters of one class.
struct QueueClassStats {
  uint64_t waiting = 0;     ///< items queued now
  uint64_t dispatched = 0;  ///< items popped so far
  uint64_t cost_waiting = 0;
  uint64_t deficit = 0;
};

/// The queue's order, without threads or clocks (the live frontend and the simulator drive it).
/// Among classes, deficit round robin: each round a backlogged class earns its quantum and sends
/// requests while their cost fits its credit; a class whose head costs more than its quantum
/// earns the rounds it needs at once (no loop per round), and an empty class loses its credit.
/// Inside a class: strict tier (higher first; ignored by edf), then the policy's score, then
/// arrival order (the enqueue sequence). Items with a worker wait in that worker's lane: pop()
/// skips a lane whose worker cannot take a request and the shared lane when no worker can, so a
/// busy pinned worker never blocks the others. Not thread-safe.
class PolicyQueue {
 public:
  /// `default_deadline_ms`: an edf class's deadline when its own is 0.
  explicit PolicyQueue(std::vector<PolicyClass> classes, double default_deadline_ms = 60'000);

  /// Queues `item` (its id must not be queued). Its score comes from its class's policy now.
  void push(const QueueItem& item);
  /// The next item to dispatch, removed from the queue; nullopt when none can go. `can_go(w)`:
  /// whether worker w (or, for nullopt, some worker) can take a request now; called at most
  /// once per lane and class.
  std::optional<QueueItem> pop(const std::function<bool(std::optional<uint64_t>)>& can_go);
  /// Removes a queued item (timeout, shutdown, client gone). False when not queued.
  bool remove(uint64_t id);
  /// Puts a popped item back with its old place (its dispatch found its worker busy after all),
  /// in the lane of `worker`.
  void requeue(const QueueItem& item, std::optional<uint64_t> worker);
  bool contains(uint64_t id) const { return where_.count(id) > 0; }
  size_t size() const { return where_.size(); }
  bool empty() const { return where_.empty(); }
  size_t class_count() const { return classes_.size(); }
  const PolicyClass& policy_class(size_t c) const { return classes_[c].cfg; }
  QueueClassStats stats(size_t c) const;

  /// session_las: `service` (uncached tokens) dispatched for `session`.
  void record_service(const std::string& session, uint64_t service);
  uint64_t attained_service(const std::string& session) const;
  /// The session ended: its attained service is dropped.
  void forget_session(const std::string& session);

 private:
  struct Key : QueueItem::Place {
    bool operator<(const Key& o) const {  // best first
      if (tier != o.tier) return tier > o.tier;
      if (score != o.score) return score > o.score;
      return seq < o.seq;
    }
  };
  struct Entry {
    QueueItem item;
    Key key;
  };
  using Lane = std::map<Key, uint64_t>;  // key -> id
  struct Class {
    PolicyClass cfg;
    Lane shared;
    std::map<uint64_t, Lane> lanes;  // worker -> its lane
    uint64_t deficit = 0;
    QueueClassStats stats;
    bool empty() const { return shared.empty() && lanes.empty(); }
  };
  struct Candidate {
    const Lane* lane = nullptr;
    std::optional<uint64_t> worker;
    Key key{};
    uint64_t cost = 0;
  };

  Key key_of(const QueueItem& item, uint64_t seq) const;
  void insert(Entry e);
  std::optional<Candidate> candidate(Class& c, const std::function<bool(std::optional<uint64_t>)>& can_go) const;
  QueueItem take(size_t c, const Candidate& cand);

  std::vector<Class> classes_;
  double default_deadline_ms_;
  std::unordered_map<uint64_t, Entry> where_;
  uint64_t next_seq_ = 0;
  size_t cursor_ = 0;                         // the class a DRR pass starts from
  std::optional<size_t> carry_;               // a class with credit left after its last send
  std::map<std::string, uint64_t> attained_;  // session_las
};

}  // namespace dyn::route
