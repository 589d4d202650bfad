// KV hints: the KvHint v0.1 codec, and the leases through which an engine honours retain and evict.
#include "dyn/engine/hints.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dyn/engine/kv_pool.h"

namespace dyn::engine {
namespace {

Error hint_error(const std::string& msg) { return Error{msg, kExitBadData}; }

// A string field of `j`; an error naming `where`.`key` otherwise.
Expected<std::string> string_field(const Json& j, const char* key, const std::string& where, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return hint_error(fmt::format("{}{}: missing", where, key));
    return std::string();
  }
  if (!it->is_string()) return hint_error(fmt::format("{}{}: not a string", where, key));
  return it->get<std::string>();
}

// Block hashes as Dynamo writes them: unsigned integers (kv.fetch) or their decimal strings
// (the continuum policy's kv.retain / kv.evict, since JSON numbers lose u64 precision).
Expected<std::vector<uint64_t>> hash_list(const Json& payload, const char* key) {
  std::vector<uint64_t> out;
  auto it = payload.find(key);
  if (it == payload.end()) return out;
  if (!it->is_array()) return hint_error(fmt::format("{}: not an array", key));
  for (const Json& v : *it) {
    if (v.is_number_unsigned()) {
      out.push_back(v.get<uint64_t>());
      continue;
    }
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    uint64_t h = 0;
    bool ok = !s.empty() && s.size() <= 20;
    for (char c : s)
      ok = ok && c >= '0' && c <= '9' && !__builtin_mul_overflow(h, 10, &h) &&
           !__builtin_add_overflow(h, static_cast<uint64_t>(c - '0'), &h);
    if (!ok) return hint_error(fmt::format("{}: {} is not an unsigned 64-bit hash", key, v.dump()));
    out.push_back(h);
  }
  return out;
}

size_t action_kind(const std::string& type) {
  for (size_t k = 0; k + 1 < kHintActionKinds; ++k)
    if (type == kHintActionTypes[k]) return k;
  return kHintActionKinds - 1;
}

HintResult hint_result(const KvHintAction& a, HintOutcome o, std::string reason = {}) {
  return HintResult{a.action_id, a.action_type, o, std::move(reason)};
}

}  // namespace

namespace {

Expected<KvHint> parse_envelope(const Json& j) {
  if (!j.is_object()) return hint_error("not a JSON object");
  KvHint h;
  auto pv = string_field(j, "protocol_version", "", true);
  if (!pv) return pv.error();
  if (pv->rfind("0.", 0) != 0) return hint_error(fmt::format("protocol_version \"{}\" is not supported (0.1)", *pv));
  h.protocol_version = *pv;
  auto id = string_field(j, "message_id", "", true);
  if (!id) return id.error();
  h.message_id = *id;
  auto acts = j.find("actions");
  if (acts == j.end() || !acts->is_array()) return hint_error("actions: missing or not an array");
  for (size_t i = 0; i < acts->size(); ++i) {
    const Json& a = (*acts)[i];
    const std::string where = fmt::format("actions[{}].", i);
    if (!a.is_object()) return hint_error(fmt::format("actions[{}]: not an object", i));
    KvHintAction act;
    auto aid = string_field(a, "action_id", where, false);
    auto type = string_field(a, "action_type", where, true);
    auto ver = string_field(a, "action_version", where, true);
    for (auto* f : {&aid, &type, &ver})
      if (!*f) return f->error();
    act.action_id = *aid;
    act.action_type = *type;
    act.action_version = *ver;
    if (auto p = a.find("payload"); p != a.end()) {
      if (!p->is_object()) return hint_error(where + "payload: not an object");
      act.payload = *p;
    }
    h.actions.push_back(std::move(act));
  }
  return h;
}

}  // namespace

Expected<KvHint> parse_kv_hint(const Json& j, std::string_view where) {
  auto h = parse_envelope(j);
  if (!h) return Error{fmt::format("{}: {}", where, h.error().message), kExitBadData};
  return h;
}

Json to_json(const KvHint& h) {
  Json acts = Json::array();
  for (const KvHintAction& a : h.actions)
    acts.push_back({{"action_id", a.action_id},
                    {"action_type", a.action_type},
                    {"action_version", a.action_version},
                    {"payload", a.payload}});
  return {{"protocol_version", h.protocol_version}, {"message_id", h.message_id}, {"actions", std::move(acts)}};
}

Json to_json(const HintResult& r) {
  Json j{{"action_id", r.action_id}, {"action_type", r.action_type}, {"outcome", name_in(kHintOutcomes, r.outcome)}};
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.outcome == HintOutcome::kAccepted || r.outcome == HintOutcome::kClipped) {
    j["blocks"] = r.blocks;
    if (r.action_type == "kv.retain") j["ttl_seconds"] = r.ttl_s;
  }
  return j;
}

uint64_t session_tag(std::string_view session_id) { return std::hash<std::string_view>{}(session_id) | 1; }

uint64_t KvLeases::cap_blocks() const {
  return static_cast<uint64_t>(std::floor(limits_.max_pinned_fraction * static_cast<double>(pool_.capacity())));
}

void KvLeases::note_session(uint64_t session, const std::vector<uint64_t>& hashes) {
  if (!limits_.enabled || session == 0) return;
  auto it = sessions_.find(session);
  if (it != sessions_.end()) {
    session_lru_.erase(it->second.lru);
  } else {
    if (sessions_.size() >= limits_.max_sessions) {
      sessions_.erase(session_lru_.front());
      session_lru_.pop_front();
    }
    it = sessions_.emplace(session, Lineage{}).first;
  }
  it->second.hashes = hashes;
  it->second.lru = session_lru_.insert(session_lru_.end(), session);
}

namespace {

// The blocks an action names, root first and distinct: its block_hashes, then the completing
// request's (include_current_request, within current_request_block_start/count), then the
// latest blocks of payload session_id on this engine. A reason when the payload cannot say.
struct NamedBlocks {
  std::vector<uint64_t> hashes;
  uint64_t session = 0;  // payload session_id's tag, else the request's
  std::string error;
};

}  // namespace

std::vector<HintResult> KvLeases::apply(const KvHint& h, const HintTarget& t) {
  std::vector<HintResult> out;
  for (const KvHintAction& a : h.actions) {
    const size_t kind = action_kind(a.action_type);
    HintResult r;
    if (kind == kHintActionKinds - 1) {
      r = hint_result(a, HintOutcome::kPassedThrough);
    } else if (a.action_version.rfind("1.", 0) != 0) {
      r = hint_result(a, HintOutcome::kRejected,
                      fmt::format("action_version \"{}\" is not supported (1.x)", a.action_version));
    } else if (a.action_type == "kv.retain") {
      r = retain(a, t);
    } else if (a.action_type == "kv.evict") {
      r = evict(a, t, false);
    } else if (a.action_type == "kv.demote") {
      r = tiered_ ? evict(a, t, true)
                  : hint_result(a, HintOutcome::kRejected, "no KV tier below G1 to demote to (--num-g2-blocks)");
    } else if (a.action_type == "kv.fetch") {
      auto src = string_field(a.payload, "source_control_endpoint", "", true);
      auto hs = hash_list(a.payload, "block_hashes");
      r = hint_result(a, HintOutcome::kRejected,
                      !src  ? src.error().message
                      : !hs ? hs.error().message
                            : fmt::format("this engine has no KV transfer from another worker (source {})", *src));
    } else {
      r = prefetch(a, t);
    }
    ++counts_[kind][static_cast<size_t>(r.outcome)];
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

NamedBlocks named_blocks(const Json& p, const HintTarget& t,
                         const std::function<const std::vector<uint64_t>*(uint64_t)>& lineage) {
  NamedBlocks n;
  n.session = t.session;
  if (auto at = p.find("execute_at"); at != p.end()) {
    if (!at->is_string() || at->get<std::string>() != "request_completion")
      return {{}, 0, fmt::format("execute_at {} is not supported (request_completion)", at->dump())};
    if (!t.current) return {{}, 0, "execute_at request_completion: the hint is not tied to a request"};
  }
  auto listed = hash_list(p, "block_hashes");
  if (!listed) return {{}, 0, listed.error().message};
  n.hashes = std::move(*listed);
  if (auto inc = p.find("include_current_request"); inc != p.end()) {
    if (!inc->is_boolean()) return {{}, 0, "include_current_request: not a boolean"};
    if (inc->get<bool>()) {
      if (!t.current) return {{}, 0, "include_current_request: the hint is not tied to a request"};
      size_t start = 0, count = t.current->size();
      auto s = p.find("current_request_block_start"), c = p.find("current_request_block_count");
      if (s != p.end() || c != p.end()) {
        if (s == p.end() || c == p.end() || !s->is_number_unsigned() || !c->is_number_unsigned())
          return {{}, 0, "current_request_block_start/count: both, as unsigned integers"};
        start = std::min<size_t>(s->get<uint64_t>(), t.current->size());
        count = std::min<size_t>(c->get<uint64_t>(), t.current->size() - start);
      }
      n.hashes.insert(n.hashes.end(), t.current->begin() + static_cast<ptrdiff_t>(start),
                      t.current->begin() + static_cast<ptrdiff_t>(start + count));
    }
  }
  if (auto sid = p.find("session_id"); sid != p.end()) {
    if (!sid->is_string() || sid->get<std::string>().empty()) return {{}, 0, "session_id: not a non-empty string"};
    n.session = session_tag(sid->get<std::string>());
    if (const auto* l = lineage(n.session)) n.hashes.insert(n.hashes.end(), l->begin(), l->end());
  }
  std::unordered_set<uint64_t> seen;
  n.hashes.erase(std::remove_if(n.hashes.begin(), n.hashes.end(), [&](uint64_t h) { return !seen.insert(h).second; }),
                 n.hashes.end());
  return n;
}

}  // namespace

HintResult KvLeases::retain(const KvHintAction& a, const HintTarget& t) {
  const Json& p = a.payload;
  auto ttl = p.find("ttl_seconds");
  if (ttl == p.end() || !ttl->is_number() || !std::isfinite(ttl->get<double>()) || ttl->get<double>() <= 0)
    return hint_result(a, HintOutcome::kRejected, "ttl_seconds: a lease needs a positive TTL");
  int64_t priority = 0;
  if (auto pr = p.find("priority"); pr != p.end()) {
    if (!pr->is_number_integer()) return hint_result(a, HintOutcome::kRejected, "priority: not an integer");
    priority = pr->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(pr->get<uint64_t>(), INT64_MAX))
                                        : pr->get<int64_t>();
  }
  const uint64_t cap = cap_blocks();
  if (cap == 0) return hint_result(a, HintOutcome::kRejected, "retention is off (--kv-hint-max-pinned-fraction 0)");
  NamedBlocks n = named_blocks(p, t, [this](uint64_t s) { return lineage(s); });
  if (!n.error.empty()) return hint_result(a, HintOutcome::kRejected, n.error);
  const size_t asked = n.hashes.size();
  if (asked == 0) return hint_result(a, HintOutcome::kRejected, "names no blocks");
  std::vector<uint64_t> cached;
  for (uint64_t h : n.hashes)
    if (pool_.contains(h)) cached.push_back(h);
  if (cached.empty())
    return hint_result(a, HintOutcome::kRejected, fmt::format("none of its {} blocks is cached", asked));
  uint64_t fresh = 0;
  for (uint64_t h : cached) fresh += pool_.is_pinned(h) ? 0 : 1;
  if (pool_.pinned() + fresh > cap) displace(priority, pool_.pinned() + fresh - cap);
  // Root first: the leading blocks are what a returning request can reuse.
  const uint64_t room = cap > pool_.pinned() ? cap - pool_.pinned() : 0;
  std::vector<uint64_t> kept;
  uint64_t taken = 0;
  for (uint64_t h : cached) {
    const bool pinned = pool_.is_pinned(h);
    if (!pinned && taken == room) break;
    taken += pinned ? 0 : 1;
    kept.push_back(h);
  }
  if (kept.empty())
    return hint_result(a, HintOutcome::kRejected,
                       fmt::format("the pinned cap is full ({} blocks, {} of G1)", cap, limits_.max_pinned_fraction));
  std::vector<std::string> clipped;
  if (cached.size() < asked) clipped.push_back(fmt::format("{} of {} blocks cached", cached.size(), asked));
  if (kept.size() < cached.size())
    clipped.push_back(fmt::format("{} of {} blocks fit the pinned cap ({} blocks)", kept.size(), cached.size(), cap));
  double ttl_s = ttl->get<double>();
  if (ttl_s > limits_.max_ttl_s) {
    clipped.push_back(fmt::format("ttl_seconds {} clipped to {}", ttl_s, limits_.max_ttl_s));
    ttl_s = limits_.max_ttl_s;
  }
  for (uint64_t h : kept) pool_.pin(h);
  const double expires = t.now_ms + ttl_s * 1000;
  next_expiry_ = std::min(next_expiry_, expires);
  const uint64_t blocks = kept.size();
  leases_.emplace(next_id_++, Lease{n.session, priority, expires, std::move(kept)});
  HintResult r = hint_result(a, clipped.empty() ? HintOutcome::kAccepted : HintOutcome::kClipped,
                             fmt::format("{}", fmt::join(clipped, "; ")));
  r.blocks = blocks;
  r.ttl_s = ttl_s;
  return r;
}

// kv.evict, and kv.demote (`demote`): the named blocks leave G1 now, offloaded to G2 by the
// pool's evict hook, instead of going first out.
HintResult KvLeases::evict(const KvHintAction& a, const HintTarget& t, bool demote) {
  NamedBlocks n = named_blocks(a.payload, t, [this](uint64_t s) { return lineage(s); });
  if (!n.error.empty()) return hint_result(a, HintOutcome::kRejected, n.error);
  // The session's own leases end (with a session); without one, the session-less leases that
  // hold a named block. Another session's lease on a shared block keeps it.
  const std::unordered_set<uint64_t> named(n.hashes.begin(), n.hashes.end());
  std::vector<uint64_t> ending;
  for (const auto& [id, l] : leases_)
    if (l.session == n.session &&
        (n.session != 0 || std::any_of(l.hashes.begin(), l.hashes.end(), [&](uint64_t h) { return named.count(h); })))
      ending.push_back(id);
  if (n.hashes.empty() && ending.empty())
    return hint_result(a, HintOutcome::kRejected, "names no blocks, and its session holds no lease here");
  for (uint64_t id : ending) end(id, /*first_out=*/true);
  uint64_t moved = 0, cached = 0;
  for (auto h = n.hashes.rbegin(); h != n.hashes.rend(); ++h) {  // leaf first
    cached += pool_.contains(*h) ? 1 : 0;
    moved += (demote ? pool_.evict_now(*h) : pool_.evict_first(*h)) ? 1 : 0;
  }
  const bool all = moved == cached;
  HintResult r = hint_result(
      a, all ? HintOutcome::kAccepted : HintOutcome::kClipped,
      all ? "" : fmt::format("{} of {} cached blocks are held by a request or another lease", cached - moved, cached));
  r.blocks = moved;
  return r;
}

const std::vector<uint64_t>* KvLeases::lineage(uint64_t session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? nullptr : &it->second.hashes;
}

// kv.prefetch (the RFC's Prefetch; KVFlow, Tokencake): the named blocks missing from G1 come
// back from the lower tiers before the request that needs them arrives.
HintResult KvLeases::prefetch(const KvHintAction& a, const HintTarget& t) {
  if (!tiered_ || !prefetch_)
    return hint_result(a, HintOutcome::kRejected, "no KV tier below G1 to prefetch from (--num-g2-blocks)");
  NamedBlocks n = named_blocks(a.payload, t, [this](uint64_t s) { return lineage(s); });
  if (!n.error.empty()) return hint_result(a, HintOutcome::kRejected, n.error);
  if (n.hashes.empty()) return hint_result(a, HintOutcome::kRejected, "names no blocks");
  auto [moved, why] = prefetch_(n.hashes, t.now_ms);
  if (!why.empty()) return hint_result(a, HintOutcome::kRejected, why);
  HintResult r = hint_result(a, HintOutcome::kAccepted);
  r.blocks = moved;
  return r;
}

void KvLeases::end(uint64_t id, bool first_out) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  // unpin() puts a block at the front of its list: root first, so the leaf ends up in front and
  // a prefix stays behind its continuation in the eviction order.
  for (uint64_t h : it->second.hashes) pool_.unpin(h, first_out);
  leases_.erase(it);
}

void KvLeases::end_session(uint64_t session) {
  std::vector<uint64_t> ending;
  for (const auto& [id, l] : leases_)
    if (l.session == session) ending.push_back(id);
  for (uint64_t id : ending) end(id, false);
}

void KvLeases::expire_due(double now_ms) {
  std::vector<uint64_t> due;
  next_expiry_ = 1e300;
  for (const auto& [id, l] : leases_) {
    if (l.expires_ms <= now_ms) due.push_back(id);
    else next_expiry_ = std::min(next_expiry_, l.expires_ms);
  }
  for (uint64_t id : due) end(id, false);
}

void KvLeases::displace(int64_t priority, uint64_t want) {
  std::vector<std::pair<std::pair<int64_t, double>, uint64_t>> lower;
  for (const auto& [id, l] : leases_)
    if (l.priority < priority) lower.push_back({{l.priority, l.expires_ms}, id});
  std::sort(lower.begin(), lower.end());
  const uint64_t before = pool_.pinned();
  for (const auto& [key, id] : lower) {
    if (before - pool_.pinned() >= want) break;
    end(id, false);
  }
}

}  // namespace dyn::engine
