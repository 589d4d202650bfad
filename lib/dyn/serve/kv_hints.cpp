// The KV retention policies in the live frontend (SPEC 6.4): turns, tool waits and spawns seen
// from the traffic, hints spliced into bodies or posted to the workers' control endpoints.
#include "dyn/serve/kv_hints.h"

#include <chrono>
#include <span>

#include <fmt/format.h>
#include <httplib.h>

#include "dyn/http/prometheus.h"

namespace dyn::serve {

namespace {

/// What each policy sends, and how (the rows and /metrics name each kind).
struct HintKind {
  kvpolicy::KvPolicy policy;
  const char* action_type;
  const char* via;
};
enum KvHintKindId : size_t { kToolRetain, kFinalEvict, kParentRetain, kToolDemote, kPrefetch };
constexpr HintKind kKinds[] = {{kvpolicy::KvPolicy::kToolTtl, "kv.retain", "endpoint"},
                               {kvpolicy::KvPolicy::kEvictOnFinal, "kv.evict", "request"},
                               {kvpolicy::KvPolicy::kParentRetain, "kv.retain", "endpoint"},
                               {kvpolicy::KvPolicy::kDemotePrefetch, "kv.demote", "endpoint"},
                               {kvpolicy::KvPolicy::kDemotePrefetch, "kv.prefetch", "endpoint"}};
static_assert(std::size(kKinds) == KvPolicyRunner::kHintKinds);

records::RequestEnd::KvHint row_entry(size_t kind, size_t worker) {
  const HintKind& k = kKinds[kind];
  return {kvpolicy::kKvPolicies[static_cast<size_t>(k.policy)].name, k.action_type, k.via,
          static_cast<int64_t>(worker)};
}

/// `hashes` as a hint's block_hashes: decimal strings, as Dynamo's experiment policy writes them.
Json hash_strings(std::span<const uint64_t> hashes) {
  Json out = Json::array();
  for (uint64_t x : hashes) out.push_back(std::to_string(x));
  return out;
}

/// `p` with `hint` (a KvHint's wire form) in its body's nvext.kv_hint (see request_for).
void attach_hint(const std::string& hint, http::ProxyRequest& p) {
  const std::string& in = *p.body;
  if (in.find(R"("nvext")") == std::string::npos) {
    // No nvext anywhere: the member goes in beside the router's others (the body is not copied).
    std::string member = R"("nvext":{"kv_hint":)" + hint + "}";
    if (!p.insert.empty()) {
      p.insert = member + "," + p.insert;
      return;
    }
    p.insert_at = in.find('{') + 1;
    const size_t next = in.find_first_not_of(" \t\r\n", p.insert_at);
    p.insert = next != std::string::npos && in[next] == '}' ? member : member + ",";
    return;
  }
  Json body = Json::parse(p.bytes(), nullptr, false);
  if (!body.is_object()) return;  // read_body let only objects through
  Json& nvext = body["nvext"];
  if (!nvext.is_object()) return;  // not the router's to repair: the worker answers it as it is
  Json h = Json::parse(hint);
  auto own = nvext.find("kv_hint");
  if (own != nvext.end() && own->is_object() && own->contains("actions") && (*own)["actions"].is_array()) {
    for (Json& a : h["actions"]) (*own)["actions"].push_back(std::move(a));
  } else {
    nvext["kv_hint"] = std::move(h);
  }
  p.body = std::make_shared<const std::string>(body.dump(-1, ' ', false, Json::error_handler_t::replace));
  p.insert.clear();
  p.insert_at = 0;
}

bool ends_in_tool(const ResponseFacts& f) {
  return !f.tool_calls.empty() ||
         (f.finish_reason && (*f.finish_reason == "tool_calls" || *f.finish_reason == "tool_use"));
}

}  // namespace

KvPolicyRunner::KvPolicyRunner(const kvpolicy::KvPolicyConfig& cfg, Fleet& fleet, const Clock& clock,
                               uint32_t block_size, double timeout_ms)
    : fleet_(fleet), clock_(clock), block_size_(block_size), timeout_ms_(timeout_ms), policies_(cfg) {
  thread_ = std::thread([this] { sender(); });
}

KvPolicyRunner::~KvPolicyRunner() {
  {
    std::lock_guard lk(send_mu_);
    stopping_ = true;
  }
  send_cv_.notify_all();
  thread_.join();
}

http::ProxyRequest KvPolicyRunner::request_for(Exchange& ex, size_t worker, uint64_t predicted_cached,
                                               const http::ProxyRequest& d) {
  if (!ex.kv_turn_seen) {
    ex.kv_turn_seen = true;
    see_turn(ex, worker, predicted_cached);
  }
  http::ProxyRequest p = d;
  if (!ex.kv_hint.empty()) attach_hint(ex.kv_hint, p);
  return p;
}

void KvPolicyRunner::see_turn(Exchange& ex, size_t worker, uint64_t predicted_cached) {
  if (!ex.ctx || ex.ctx->session_id.empty()) return;
  const std::string& id = ex.ctx->session_id;
  const bool last = ex.ctx->session_final.value_or(false);
  std::lock_guard lk(mu_);
  bool fresh = false;
  Session& s = session_locked(id, &fresh);
  if (fresh) {
    s.shared_blocks = predicted_cached / block_size_;
    const std::string& parent = ex.ctx->parent_session_id;
    if (auto p = sessions_.find(parent); !parent.empty() && p != sessions_.end())
      if (auto h = policies_.spawn_hint(parent))
        send_locked(&ex, p->second.worker, kParentRetain, with_lineage(*h, parent, p->second.worker));
  } else {
    if (s.tool_since_ms) {
      policies_.observe_tool_wait(id, (clock_.now_ms() - *s.tool_since_ms) / 1000.0, s.tool);
      s.tool_since_ms.reset();
      s.tool.clear();
    }
    if (s.prefetched) ex.kv_hints.push_back(row_entry(kPrefetch, *s.prefetched));
    s.prefetched.reset();
    std::lock_guard sl(send_mu_);
    if (plan_.cancel(id)) prefetches_cancelled_.fetch_add(1, std::memory_order_relaxed);  // back first
  }
  ++s.turns;
  s.input_tokens = ex.input_length;
  s.worker = worker;
  const size_t full = std::min<size_t>(ex.sequence_hashes.size(), ex.input_length / block_size_);
  lineage_.record(id, worker, std::span<const uint64_t>(ex.sequence_hashes.data(), full));
  if (auto h = policies_.request_hint(id, last, /*ends_in_tool=*/false, s.shared_blocks)) {
    ex.kv_hint = h->dump();
    ex.kv_hints.push_back(row_entry(kFinalEvict, worker));
    count(kFinalEvict, 0);
  }
  if (last) forget_locked(id);
}

void KvPolicyRunner::on_end(Exchange& ex, const ResponseFacts* f, bool ok) {
  if (!ok || !f || !ex.ctx || ex.ctx->session_id.empty() || ex.ctx->session_final.value_or(false) || ex.worker < 0 ||
      !ends_in_tool(*f))
    return;
  std::lock_guard lk(mu_);
  auto it = sessions_.find(ex.ctx->session_id);
  if (it == sessions_.end()) return;  // forgotten (kMaxSessions) since its turn began
  it->second.tool_since_ms = clock_.now_ms();
  it->second.tool = f->tool_calls.empty() ? std::string() : f->tool_calls.front().name;
  tool_wait_began_locked(&ex, ex.ctx->session_id, it->second, static_cast<size_t>(ex.worker));
}

void KvPolicyRunner::tool_wait_began_locked(Exchange* ex, const std::string& id, Session& s, size_t worker) {
  if (auto h = policies_.tool_wait_hint(id, s.tool)) send_locked(ex, worker, kToolRetain, with_lineage(*h, id, worker));
  // demote-prefetch: the blocks past the session's shared prefix (evict-on-final's, SPEC 6.4).
  const std::vector<uint64_t>* l = lineage_.lineage(id, worker);
  if (!policies_.config().demote_prefetch || !l || l->size() <= s.shared_blocks) return;
  const double copy_ms = policies_.copy_ms(s.input_tokens, block_size_);
  auto h = policies_.demote_hint(id, s.tool, copy_ms / 1000.0);
  if (!h) return;
  (*h)["actions"][0]["payload"]["block_hashes"] =
      hash_strings(std::span<const uint64_t>(*l).subspan(static_cast<size_t>(s.shared_blocks)));
  send_locked(ex, worker, kToolDemote, *h);
  s.prefetched.reset();
  const double wait_ms = policies_.expected_tool_wait_s(id, s.tool) * 1000.0;
  {
    std::lock_guard sl(send_mu_);
    plan_.plan(id, worker, s.turns, clock_.now_ms() + kvpolicy::KvPolicies::prefetch_delay_ms(wait_ms, copy_ms));
  }
  send_cv_.notify_one();
}

void KvPolicyRunner::prefetch_due(const std::vector<kvpolicy::PrefetchPlan::Due>& due) {
  std::lock_guard lk(mu_);
  for (const auto& d : due) {
    auto it = sessions_.find(d.session);
    if (it == sessions_.end() || it->second.turns != d.turn) {  // came back while this was taken
      prefetches_cancelled_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (auto h = policies_.prefetch_hint(d.session)) {
      send_locked(nullptr, d.worker, kPrefetch, with_lineage(*h, d.session, d.worker));
      it->second.prefetched = d.worker;
    }
  }
}

void KvPolicyRunner::on_tool_event(const std::string& session_id, const std::string& tool, bool start, bool last_done) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (start) {
    // "unknown" is what a harness that cannot name the tool sends (dyn-replay's replayed waits):
    // averaged as one tool it would mix every session's waits, so it counts as unnamed.
    const std::string& name = tool == "unknown" ? std::string() : tool;
    if (s.tool_since_ms) {  // the response began this wait, and its hint has gone
      if (s.tool.empty()) s.tool = name;
      return;
    }
    s.tool_since_ms = clock_.now_ms();
    s.tool = name;
    tool_wait_began_locked(nullptr, session_id, s, s.worker);
  } else if (last_done && s.tool_since_ms) {
    policies_.observe_tool_wait(session_id, (clock_.now_ms() - *s.tool_since_ms) / 1000.0, s.tool);
    s.tool_since_ms.reset();
    s.tool.clear();
  }
}

KvPolicyRunner::Session& KvPolicyRunner::session_locked(const std::string& id, bool* fresh) {
  auto [it, made] = sessions_.try_emplace(id);
  *fresh = made;
  if (made) {
    lru_.push_back(id);
    it->second.lru = std::prev(lru_.end());
    if (sessions_.size() > kMaxSessions) forget_locked(lru_.front());
  } else {
    lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  return it->second;
}

void KvPolicyRunner::forget_locked(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  policies_.end_session(id);
  lineage_.forget(id);
  {
    std::lock_guard sl(send_mu_);
    if (plan_.cancel(id)) prefetches_cancelled_.fetch_add(1, std::memory_order_relaxed);
  }
  lru_.erase(it->second.lru);
  sessions_.erase(it);
}

Json KvPolicyRunner::with_lineage(Json hint, const std::string& session, size_t worker) const {
  const std::vector<uint64_t>* l = lineage_.lineage(session, worker);
  if (!l) return hint;
  const Json hashes = hash_strings(*l);
  for (Json& a : hint["actions"])
    if (a["action_type"] == "kv.retain" || a["action_type"] == "kv.prefetch") a["payload"]["block_hashes"] = hashes;
  return hint;
}

Json KvPolicyRunner::session_prefix_json() const {
  std::lock_guard lk(mu_);
  return lineage_.snapshot_json();
}

void KvPolicyRunner::send_locked(Exchange* ex, size_t worker, size_t kind, const Json& hint) {
  if (ex) ex->kv_hints.push_back(row_entry(kind, worker));
  {
    std::lock_guard lk(send_mu_);
    pending_.push_back({worker, kind, hint.dump()});
  }
  send_cv_.notify_one();
}

void KvPolicyRunner::sender() {
  std::unique_lock lk(send_mu_);
  while (!stopping_) {  // hints still queued at the stop are for workers this frontend no longer serves
    if (!pending_.empty()) {
      Control c = std::move(pending_.front());
      pending_.pop_front();
      lk.unlock();
      post(c);
      lk.lock();
      continue;
    }
    const std::optional<double> next = plan_.next_due_ms();
    const double now = clock_.now_ms();
    if (!next) {
      send_cv_.wait(lk);
    } else if (*next > now) {
      send_cv_.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>((*next - now) * 1000) + 1));
    } else {
      // prefetch_due takes mu_, which is held before send_mu_ elsewhere.
      const auto due = plan_.take_due(now);
      lk.unlock();
      prefetch_due(due);
      lk.lock();
    }
  }
}

// One POST /v1/kv_hints: each action's outcome from the worker's results, or one "failed".
void KvPolicyRunner::post(const Control& c) {
  const Fleet::Worker& w = fleet_.at(c.worker);
  httplib::Client cli(w.pool.url().scheme_host_port);
  const auto us = std::chrono::microseconds(static_cast<int64_t>(timeout_ms_ * 1000));
  cli.set_connection_timeout(us);
  cli.set_read_timeout(us);
  auto r = cli.Post(w.pool.url().path_prefix + "/v1/kv_hints", c.body, "application/json");
  const Json res = r && r->status == 200 ? Json::parse(r->body, nullptr, false) : Json();
  const size_t failed = std::size(kOutcomes) - 1;
  if (!res.is_object() || !res.contains("results") || !res["results"].is_array() || res["results"].empty()) {
    count(c.kind, failed);
    return;
  }
  for (const Json& row : res["results"]) {
    size_t o = failed;
    if (row.is_object() && row.contains("outcome") && row["outcome"].is_string())
      for (size_t k = 1; k < failed; ++k)
        if (row["outcome"].get_ref<const std::string&>() == kOutcomes[k]) o = k;
    count(c.kind, o);
  }
}

void KvPolicyRunner::append_metrics(std::string& out) const {
  const std::string hints = "dyn_kv_policy_hints_total";
  http::prom_family(out, hints, "counter",
                    "KV hints the router's --kv-policy sent, by policy, action, route (request body or the "
                    "worker's POST /v1/kv_hints) and outcome (forwarded in a body, or the worker's answer per action)");
  for (size_t k = 0; k < kHintKinds; ++k)
    for (size_t o = 0; o < std::size(kOutcomes); ++o)
      if (const uint64_t v = counts_[k][o].load(std::memory_order_relaxed)) {
        const records::RequestEnd::KvHint e = row_entry(k, 0);
        http::prom_sample(out, hints,
                          fmt::format(R"(policy="{}",action_type="{}",via="{}",outcome="{}")", e.policy, e.action_type,
                                      e.via, kOutcomes[o]),
                          static_cast<double>(v));
      }
  kvpolicy::KvPolicyCounts c;
  {
    std::lock_guard lk(mu_);
    c = policies_.counts();
  }
  http::prom_family(
      out, "dyn_kv_policy_tool_waits_not_pinned_total", "counter",
      "tool-ttl: turns that ended in a tool call not pinned (expected wait over --kv-policy-tool-max-wait-s)");
  http::prom_sample(out, "dyn_kv_policy_tool_waits_not_pinned_total", "", static_cast<double>(c.tool_too_long));
  if (!policies_.config().demote_prefetch) return;
  http::prom_family(out, "dyn_kv_policy_tool_waits_not_demoted_total", "counter",
                    "demote-prefetch: tool waits whose blocks stayed on G1 (expected wait under 4 one-way G2 -> "
                    "G1 copies of them)");
  http::prom_sample(out, "dyn_kv_policy_tool_waits_not_demoted_total", "", static_cast<double>(c.tool_not_demoted));
  http::prom_family(out, "dyn_kv_policy_prefetches_cancelled_total", "counter",
                    "demote-prefetch: planned prefetches not sent (the session came back first, or ended)");
  http::prom_sample(out, "dyn_kv_policy_prefetches_cancelled_total", "",
                    static_cast<double>(prefetches_cancelled_.load(std::memory_order_relaxed)));
}

}  // namespace dyn::serve
