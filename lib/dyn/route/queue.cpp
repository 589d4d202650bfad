// The router queue: policy files, scores, lanes and deficit round robin (SPEC 3.4).
#include "dyn/route/queue.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace dyn::route {

namespace {

/// session_las keeps at most this many sessions (Dynamo's table is unbounded for now); beyond it
/// the first by name is forgotten, which only lets that session start again from zero.
constexpr size_t kMaxLasSessions = 65'536;

Error bad(const std::string& where, const std::string& what) { return Error{where + ": " + what, kExitBadData}; }

/// Reads `j[key]` into `out` when present: an unsigned integer no larger than `max`.
std::optional<Error> read_uint(const Json& j, const char* key, uint64_t max, uint64_t& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > max)
    return bad(where, fmt::format("\"{}\" must be an integer in 0..{}", key, max));
  out = it->get<uint64_t>();
  return std::nullopt;
}

std::optional<Error> check_keys(const Json& j, std::initializer_list<const char*> keys, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
      return bad(where, fmt::format("unknown key \"{}\"", it.key()));
  }
  return std::nullopt;
}

Expected<PolicyClass> read_class(const Json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a policy class must be an object");
  if (auto e = check_keys(j, {"name", "queue_policy", "quantum", "deadline_ms", "subagent_class"}, where)) return *e;
  PolicyClass c;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return bad(where, "a policy class needs a non-empty \"name\"");
  c.name = name->get<std::string>();
  if (auto p = j.find("queue_policy"); p != j.end()) {
    auto v = p->is_string() ? parse_in(kQueuePolicies, p->get<std::string>()) : std::nullopt;
    if (!v) return bad(where, fmt::format("class {}: \"queue_policy\" must be fcfs, wspt, edf or session_las", c.name));
    c.policy = *v;
  }
  if (auto e = read_uint(j, "quantum", uint64_t{1} << 40, c.quantum, where)) return *e;
  if (auto d = j.find("deadline_ms"); d != j.end()) {
    if (!d->is_number() || !std::isfinite(d->get<double>()) || d->get<double>() < 0)
      return bad(where, fmt::format("class {}: \"deadline_ms\" must be a number >= 0", c.name));
    c.deadline_ms = d->get<double>();
  }
  if (auto s = j.find("subagent_class"); s != j.end()) {
    if (!s->is_string()) return bad(where, fmt::format("class {}: \"subagent_class\" must be a string", c.name));
    c.subagent_class = s->get<std::string>();
  }
  return c;
}

}  // namespace

const char* queue_policy_name(QueuePolicy p) { return name_in(kQueuePolicies, p); }

Expected<QueueConfig> QueueConfig::from_json(const Json& j, const std::string& where) {
  if (!j.is_object()) return bad(where, "a router policy file holds one JSON object");
  if (auto e = check_keys(j, {"default_policy_class", "policy_classes", "session_defaults"}, where)) return *e;
  QueueConfig q;
  auto cls = j.find("policy_classes");
  if (cls == j.end() || !cls->is_array() || cls->empty())
    return bad(where, "\"policy_classes\" must be a non-empty array");
  q.classes.clear();
  for (const Json& c : *cls) {
    auto pc = read_class(c, where);
    if (!pc) return pc.error();
    q.classes.push_back(std::move(*pc));
  }
  if (auto d = j.find("default_policy_class"); d != j.end()) {
    auto i = d->is_string() ? q.class_index(d->get<std::string>()) : std::nullopt;
    if (!i) return bad(where, "\"default_policy_class\" must name one of the policy classes");
    q.default_class = *i;
  }
  if (auto r = j.find("session_defaults"); r != j.end()) {
    if (!r->is_object()) return bad(where, "\"session_defaults\" must be an object");
    if (auto e = check_keys(*r, {"priority", "strict_priority", "subagent_tier_drop"}, where)) return *e;
    if (auto p = r->find("priority"); p != r->end()) {
      if (!p->is_number_integer() || p->get<int64_t>() < INT32_MIN || p->get<int64_t>() > INT32_MAX)
        return bad(where, "\"session_defaults.priority\" must be a 32-bit integer");
      q.root.priority = static_cast<int32_t>(p->get<int64_t>());
    }
    uint64_t s = 0, drop = q.subagent_tier_drop;
    if (auto e = read_uint(*r, "strict_priority", UINT32_MAX, s, where)) return *e;
    if (auto e = read_uint(*r, "subagent_tier_drop", UINT32_MAX, drop, where)) return *e;
    q.root.strict_priority = static_cast<uint32_t>(s);
    q.subagent_tier_drop = static_cast<uint32_t>(drop);
  }
  if (auto e = q.validate()) return bad(where, e->message);
  return q;
}

Expected<QueueConfig> QueueConfig::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Error{path + ": cannot read the router policy file", kExitIo};
  std::stringstream ss;
  ss << f.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Error{path + ": not valid JSON", kExitBadData};
  return from_json(j, path);
}

std::optional<Error> QueueConfig::validate() const {
  auto usage = [](std::string m) { return Error{std::move(m), kExitUsage}; };
  if (classes.empty()) return usage("the router queue needs at least one policy class");
  std::set<std::string> names;
  for (const PolicyClass& c : classes) {
    if (c.name.empty()) return usage("a policy class needs a name");
    if (!names.insert(c.name).second) return usage("policy class " + c.name + " is defined twice");
    if (c.quantum == 0) return usage("policy class " + c.name + ": quantum must be at least 1");
    if (!(c.deadline_ms >= 0) || !std::isfinite(c.deadline_ms))
      return usage("policy class " + c.name + ": deadline_ms must be >= 0");
  }
  for (const PolicyClass& c : classes)
    if (!c.subagent_class.empty() && !names.count(c.subagent_class))
      return usage("policy class " + c.name + ": subagent_class " + c.subagent_class + " is not a class");
  if (default_class >= classes.size()) return usage("the default policy class does not exist");
  if (!(timeout_ms > 0) || !std::isfinite(timeout_ms)) return usage("--queue-timeout-secs must be > 0");
  return std::nullopt;
}

std::optional<size_t> QueueConfig::class_index(std::string_view name) const {
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i].name == name) return i;
  return std::nullopt;
}

Json QueueConfig::to_json() const {
  Json cls = Json::array();
  for (const PolicyClass& c : classes)
    cls.push_back({{"name", c.name},
                   {"queue_policy", queue_policy_name(c.policy)},
                   {"quantum", c.quantum},
                   {"deadline_ms", c.deadline_ms},
                   {"subagent_class", c.subagent_class}});
  return {{"default_policy_class", classes[default_class].name},
          {"policy_classes", std::move(cls)},
          {"session_defaults",
           {{"priority", root.priority},
            {"strict_priority", root.strict_priority},
            {"subagent_tier_drop", subagent_tier_drop}}},
          {"queue_size", max_requests},
          {"queue_timeout_secs", timeout_ms / 1000.0}};
}

PolicyQueue::PolicyQueue(std::vector<PolicyClass> classes, double default_deadline_ms)
    : default_deadline_ms_(default_deadline_ms) {
  for (PolicyClass& c : classes) classes_.push_back(Class{std::move(c), {}, {}, 0, {}});
  if (classes_.empty()) classes_.push_back(Class{});
}

PolicyQueue::Key PolicyQueue::key_of(const QueueItem& it, uint64_t seq) const {
  const PolicyClass& c = classes_[it.class_index].cfg;
  // Negative priorities count as 0 in the queue (Dynamo): a client cannot push a request behind
  // arrival order by sending one.
  const double jump = std::max(0, it.priority);
  auto key = [seq](uint32_t tier, double score) {
    Key k;
    k.tier = tier;
    k.score = score;
    k.seq = seq;
    return k;
  };
  switch (c.policy) {
    case QueuePolicy::kFcfs: return key(it.strict_priority, jump - it.arrival_ms / 1000.0);
    case QueuePolicy::kWspt:
      return key(it.strict_priority, (1.0 + jump) / static_cast<double>(std::max<uint64_t>(1, it.cost)));
    case QueuePolicy::kEdf: {
      // Dynamo's edf ignores priority and strict_priority.
      const double deadline = c.deadline_ms > 0 ? c.deadline_ms : default_deadline_ms_;
      return key(0, -(it.arrival_ms + deadline));
    }
    case QueuePolicy::kSessionLas:
      return key(it.strict_priority, -static_cast<double>(it.session.empty() ? 0 : attained_service(it.session)));
  }
  return key(it.strict_priority, 0);
}

void PolicyQueue::insert(Entry e) {
  Class& c = classes_[e.item.class_index];
  Lane& lane = e.item.worker ? c.lanes[*e.item.worker] : c.shared;
  lane.emplace(e.key, e.item.id);
  ++c.stats.waiting;
  c.stats.cost_waiting += e.item.cost;
  where_.emplace(e.item.id, std::move(e));
}

void PolicyQueue::push(const QueueItem& item) {
  QueueItem it = item;
  if (it.class_index >= classes_.size()) it.class_index = 0;
  it.cost = std::max<uint64_t>(1, it.cost);
  Key k = key_of(it, next_seq_++);
  it.place = k;
  insert(Entry{std::move(it), k});
}

void PolicyQueue::requeue(const QueueItem& item, std::optional<uint64_t> worker) {
  QueueItem it = item;
  it.worker = worker;
  // Its old place: the same score and sequence, so it is not sent behind later arrivals.
  Key k;
  if (it.place) static_cast<QueueItem::Place&>(k) = *it.place;
  else k = key_of(it, next_seq_++);
  it.place = k;
  insert(Entry{std::move(it), k});
}

std::optional<PolicyQueue::Candidate> PolicyQueue::candidate(
    Class& c, const std::function<bool(std::optional<uint64_t>)>& can_go) const {
  std::optional<Candidate> best;
  auto consider = [&](const Lane& lane, std::optional<uint64_t> worker) {
    if (lane.empty()) return;
    const Key& k = lane.begin()->first;
    if (best && !(k < best->key)) return;
    if (!can_go(worker)) return;
    best = Candidate{&lane, worker, k, where_.at(lane.begin()->second).item.cost};
  };
  consider(c.shared, std::nullopt);
  for (const auto& [w, lane] : c.lanes) consider(lane, w);
  return best;
}

QueueItem PolicyQueue::take(size_t ci, const Candidate& cand) {
  Class& c = classes_[ci];
  cursor_ = (ci + 1) % classes_.size();
  const uint64_t id = cand.lane->begin()->second;
  auto it = where_.find(id);
  QueueItem item = std::move(it->second.item);
  where_.erase(it);
  if (cand.worker) {
    auto l = c.lanes.find(*cand.worker);
    l->second.erase(l->second.begin());
    if (l->second.empty()) c.lanes.erase(l);
  } else {
    c.shared.erase(c.shared.begin());
  }
  --c.stats.waiting;
  c.stats.cost_waiting -= item.cost;
  ++c.stats.dispatched;
  c.deficit -= std::min(c.deficit, item.cost);
  if (c.empty()) {
    c.deficit = 0;
    carry_.reset();
  } else {
    carry_ = c.deficit > 0 ? std::optional<size_t>(ci) : std::nullopt;
  }
  return item;
}

std::optional<QueueItem> PolicyQueue::pop(const std::function<bool(std::optional<uint64_t>)>& can_go) {
  if (where_.empty()) {
    carry_.reset();
    return std::nullopt;
  }
  const size_t n = classes_.size();
  std::vector<std::optional<Candidate>> cand(n);
  std::vector<bool> seen(n, false);
  auto cand_of = [&](size_t ci) -> std::optional<Candidate>& {
    if (!seen[ci]) {
      seen[ci] = true;
      cand[ci] = candidate(classes_[ci], can_go);
      if (!cand[ci] && classes_[ci].empty()) classes_[ci].deficit = 0;
    }
    return cand[ci];
  };
  // A class that sent last and still has credit goes on spending it before others earn more.
  if (carry_) {
    const size_t ci = *carry_;
    carry_.reset();
    if (auto& k = cand_of(ci); k && k->cost <= classes_[ci].deficit) return take(ci, *k);
  }
  // One round from the cursor: each backlogged class earns its quantum once.
  for (size_t off = 0; off < n; ++off) {
    const size_t ci = (cursor_ + off) % n;
    auto& k = cand_of(ci);
    if (!k) continue;
    Class& c = classes_[ci];
    if (k->cost <= c.deficit) return take(ci, *k);
    c.deficit += c.cfg.quantum;
    if (k->cost <= c.deficit) return take(ci, *k);
  }
  // No head fits its credit: grant the fewest whole rounds after which one does, to every class
  // with a head at once (each scaled by its own quantum, which keeps the weighting).
  uint64_t rounds = UINT64_MAX;
  for (size_t ci = 0; ci < n; ++ci) {
    if (!cand[ci]) continue;
    const Class& c = classes_[ci];
    const uint64_t missing = cand[ci]->cost - std::min(cand[ci]->cost, c.deficit);
    rounds = std::min(rounds, (missing + c.cfg.quantum - 1) / c.cfg.quantum);
  }
  if (rounds == UINT64_MAX) return std::nullopt;  // nothing can go
  for (size_t ci = 0; ci < n; ++ci)
    if (cand[ci]) classes_[ci].deficit += classes_[ci].cfg.quantum * rounds;
  for (size_t off = 0; off < n; ++off) {
    const size_t ci = (cursor_ + off) % n;
    if (cand[ci] && cand[ci]->cost <= classes_[ci].deficit) return take(ci, *cand[ci]);
  }
  return std::nullopt;
}

bool PolicyQueue::remove(uint64_t id) {
  auto it = where_.find(id);
  if (it == where_.end()) return false;
  const Entry& e = it->second;
  Class& c = classes_[e.item.class_index];
  if (e.item.worker) {
    auto l = c.lanes.find(*e.item.worker);
    l->second.erase(e.key);
    if (l->second.empty()) c.lanes.erase(l);
  } else {
    c.shared.erase(e.key);
  }
  --c.stats.waiting;
  c.stats.cost_waiting -= e.item.cost;
  where_.erase(it);
  if (c.empty()) c.deficit = 0;
  return true;
}

QueueClassStats PolicyQueue::stats(size_t c) const {
  QueueClassStats s = classes_[c].stats;
  s.deficit = classes_[c].deficit;
  return s;
}

void PolicyQueue::record_service(const std::string& session, uint64_t service) {
  if (session.empty()) return;
  auto [it, fresh] = attained_.try_emplace(session, 0);
  it->second += service;
  if (fresh && attained_.size() > kMaxLasSessions)
    attained_.erase(attained_.begin() == it ? std::next(it) : attained_.begin());
}

uint64_t PolicyQueue::attained_service(const std::string& session) const {
  auto it = attained_.find(session);
  return it == attained_.end() ? 0 : it->second;
}

void PolicyQueue::forget_session(const std::string& session) { attained_.erase(session); }

}  // namespace dyn::route
