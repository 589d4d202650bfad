// A request's priority on one scale (SPEC 3.4): from its headers, its body's nvext.agent_hints,
// or its session's default (a subagent one tier below its root), with Dynamo's polarity rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "dyn/route/queue.h"

namespace dyn::route {

/// What one place of a request says about its priority (every field optional). Scale: Dynamo's
/// API, where a higher `priority` is more important (nvext.agent_hints.priority, i32) and a
/// higher `strict_priority` is a higher tier (u32).
struct PriorityHints {
  std::optional<int64_t> priority;
  std::optional<uint64_t> strict_priority;
  std::string policy_class;  ///< a class name ("" = none)
};

/// Where a resolved value came from, strongest first.
enum class PrioritySource { kHeader, kBody, kSession, kDefault };
inline constexpr Named<PrioritySource> kPrioritySources[] = {
    {PrioritySource::kHeader, "header", "x-dynamo-request-priority / -strict-priority / x-dynamo-meta-policy-class"},
    {PrioritySource::kBody, "body", "nvext.agent_hints.priority / strict_priority"},
    {PrioritySource::kSession, "session", "the session's earlier requests, or its parent's one tier lower"},
    {PrioritySource::kDefault, "default", "the policy file's root defaults"},
};
const char* priority_source_name(PrioritySource s);

/// A request's priority as the queue and the records use it.
struct ResolvedPriority {
  int32_t priority = 0;
  uint32_t strict_priority = 0;
  size_t class_index = 0;
  /// The strongest source of the three values (kDefault: nothing said or inherited).
  PrioritySource source = PrioritySource::kDefault;
};

/// Resolves requests' priorities and remembers each session's, so later turns and subagents
/// inherit them. Per field, the first of: the header (when it parsed), the body, the session's
/// own last value, the parent's value (a subagent: its parent's tier minus
/// QueueConfig::subagent_tier_drop, floored at 0, and its parent's class's subagent_class),
/// the root defaults of the config. Values are clamped to i32 / u32. Only sessions whose values
/// differ from the root defaults are remembered, at most 65,536 (the oldest first forgotten); a
/// session's last turn forgets it. A request that says nothing while nothing is remembered is
/// resolved without a lock (the relay's path stays as cheap as without priorities). Thread-safe.
class PriorityResolver {
 public:
  explicit PriorityResolver(const QueueConfig& config);

  /// `session` / `parent` "" = none; `final_turn` forgets the session after this request.
  ResolvedPriority resolve(const PriorityHints& header, const PriorityHints& body, const std::string& session,
                           const std::string& parent, bool final_turn = false);

 private:
  struct Remembered {
    int32_t priority;
    uint32_t strict_priority;
    size_t class_index;
  };
  /// The values a subagent of `parent` (or a root) starts from; caller holds mu_.
  Remembered inherited(const std::string& parent, bool* from_session) const;
  void remember(const std::string& session, const Remembered& r);

  const QueueConfig& cfg_;
  bool subagent_differs_ = false;  ///< a subagent of an unknown parent gets other values than a root
  std::atomic<size_t> remembered_{0};
  std::mutex mu_;
  std::unordered_map<std::string, Remembered> sessions_;
  std::deque<std::string> order_;  // insertion order, for the bound
};

}  // namespace dyn::route
