// Priority resolution: headers, body hints, session defaults (SPEC 3.4).
#include "dyn/route/priority.h"

#include <algorithm>

namespace dyn::route {

namespace {

constexpr size_t kMaxSessions = 65'536;

int32_t clamp_i32(int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)); }
uint32_t clamp_u32(uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX)); }

}  // namespace

const char* priority_source_name(PrioritySource s) { return name_in(kPrioritySources, s); }

PriorityResolver::PriorityResolver(const QueueConfig& config) : cfg_(config) {
  bool from = false;
  Remembered sub = inherited("?", &from);
  subagent_differs_ = sub.strict_priority != cfg_.root.strict_priority || sub.class_index != cfg_.default_class;
}

PriorityResolver::Remembered PriorityResolver::inherited(const std::string& parent, bool* from_session) const {
  Remembered root{cfg_.root.priority, cfg_.root.strict_priority, cfg_.default_class};
  *from_session = false;
  if (parent.empty()) return root;
  Remembered p = root;
  if (auto it = sessions_.find(parent); it != sessions_.end()) {
    p = it->second;
    *from_session = true;
  }
  // One tier below the parent, in the class its parent's class names for subagents.
  Remembered r = p;
  r.strict_priority = p.strict_priority > cfg_.subagent_tier_drop ? p.strict_priority - cfg_.subagent_tier_drop : 0;
  const std::string& sub = cfg_.classes[p.class_index].subagent_class;
  if (!sub.empty()) r.class_index = cfg_.class_index(sub).value_or(p.class_index);
  // A subagent's defaults differ from the root's whenever the drop or the class did anything.
  if (r.strict_priority != root.strict_priority || r.class_index != root.class_index || r.priority != root.priority)
    *from_session = true;
  return r;
}

void PriorityResolver::remember(const std::string& session, const Remembered& r) {
  if (r.priority == cfg_.root.priority && r.strict_priority == cfg_.root.strict_priority &&
      r.class_index == cfg_.default_class) {
    sessions_.erase(session);  // what it would get anyway (its place in order_ goes when reached)
    remembered_ = sessions_.size();
    return;
  }
  auto [it, fresh] = sessions_.insert_or_assign(session, r);
  remembered_ = sessions_.size();
  if (!fresh) return;
  order_.push_back(session);
  if (order_.size() > 2 * kMaxSessions) {  // names of forgotten sessions pile up otherwise
    std::deque<std::string> live;
    std::unordered_map<std::string_view, bool> seen;
    for (const std::string& k : order_)
      if (sessions_.count(k) && seen.emplace(k, true).second) live.push_back(k);
    order_.swap(live);
  }
  while (sessions_.size() > kMaxSessions && !order_.empty()) {
    sessions_.erase(order_.front());
    order_.pop_front();
  }
  remembered_ = sessions_.size();
}

ResolvedPriority PriorityResolver::resolve(const PriorityHints& header, const PriorityHints& body,
                                           const std::string& session, const std::string& parent, bool final_turn) {
  const bool silent = !header.priority && !header.strict_priority && header.policy_class.empty() && !body.priority &&
                      !body.strict_priority && body.policy_class.empty();
  if (silent && remembered_.load(std::memory_order_relaxed) == 0 && (parent.empty() || !subagent_differs_)) {
    ResolvedPriority r;
    r.priority = cfg_.root.priority;
    r.strict_priority = cfg_.root.strict_priority;
    r.class_index = cfg_.default_class;
    return r;
  }
  std::lock_guard lk(mu_);
  // The session's own earlier values, else what it inherits.
  bool inherited_any = false;
  Remembered base{cfg_.root.priority, cfg_.root.strict_priority, cfg_.default_class};
  auto own = session.empty() ? sessions_.end() : sessions_.find(session);
  if (own != sessions_.end()) {
    base = own->second;
    inherited_any = true;
  } else {
    base = inherited(parent, &inherited_any);
  }
  ResolvedPriority r;
  r.source = inherited_any ? PrioritySource::kSession : PrioritySource::kDefault;
  auto stronger = [&](PrioritySource s) { r.source = std::min(r.source, s); };
  r.priority = base.priority;
  if (header.priority) {
    r.priority = clamp_i32(*header.priority);
    stronger(PrioritySource::kHeader);
  } else if (body.priority) {
    r.priority = clamp_i32(*body.priority);
    stronger(PrioritySource::kBody);
  }
  r.strict_priority = base.strict_priority;
  if (header.strict_priority) {
    r.strict_priority = clamp_u32(*header.strict_priority);
    stronger(PrioritySource::kHeader);
  } else if (body.strict_priority) {
    r.strict_priority = clamp_u32(*body.strict_priority);
    stronger(PrioritySource::kBody);
  }
  r.class_index = base.class_index;
  // A class name the config does not know is ignored, as Dynamo's classifier falls back for it.
  for (const auto& [hint, src] :
       {std::pair{&header, PrioritySource::kHeader}, std::pair{&body, PrioritySource::kBody}}) {
    auto c = hint->policy_class.empty() ? std::nullopt : cfg_.class_index(hint->policy_class);
    if (!c) continue;
    r.class_index = *c;
    stronger(src);
    break;
  }
  if (!session.empty()) {
    if (final_turn) {
      sessions_.erase(session);
      remembered_ = sessions_.size();
    } else {
      remember(session, Remembered{r.priority, r.strict_priority, r.class_index});
    }
  }
  return r;
}

}  // namespace dyn::route
