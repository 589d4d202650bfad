// The router's KV retention policies (SPEC 6.4): the hints each sends.
#include "dyn/kvpolicy/kv_policy.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dyn::kvpolicy {

namespace {

void ema(std::unordered_map<std::string, double>& avg, const std::string& key, double v) {
  auto [it, fresh] = avg.try_emplace(key, v);
  if (!fresh) it->second = 0.5 * it->second + 0.5 * v;
}

}  // namespace

double KvPolicies::expected_tool_wait_s(const std::string& session, const std::string& tool) const {
  if (!tool.empty())
    if (auto t = tool_name_wait_s_.find(tool); t != tool_name_wait_s_.end()) return t->second;
  auto it = tool_wait_s_.find(session);
  return it == tool_wait_s_.end() ? cfg_.tool_default_wait_s : it->second;
}

void KvPolicies::observe_tool_wait(const std::string& session, double wait_s, const std::string& tool) {
  ema(tool_wait_s_, session, wait_s);
  if (!tool.empty() && (tool_name_wait_s_.size() < kMaxToolNames || tool_name_wait_s_.count(tool)))
    ema(tool_name_wait_s_, tool, wait_s);
}

// The message id is its first action's number: ids stay those of the first hints ever sent.
Json KvPolicies::envelope() {
  return Json{
      {"protocol_version", "0.1"}, {"message_id", fmt::format("kv-policy-{}", next_id_)}, {"actions", Json::array()}};
}

void KvPolicies::add_action(Json& envelope, const char* type, Json payload) {
  envelope["actions"].push_back(Json{{"action_id", fmt::format("p{}", next_id_++)},
                                     {"action_type", type},
                                     {"action_version", "1.0"},
                                     {"payload", std::move(payload)}});
}

std::optional<double> KvPolicies::tool_ttl_s(const std::string& session, const std::string& tool) {
  const double wait = expected_tool_wait_s(session, tool);
  if (wait > cfg_.tool_max_wait_s) {
    ++counts_.tool_too_long;
    return std::nullopt;
  }
  ++counts_.tool_retains;
  return std::max(cfg_.tool_ttl_factor * wait, 0.001);
}

std::optional<Json> KvPolicies::request_hint(const std::string& session, bool last_turn, bool ends_in_tool,
                                             uint64_t shared_blocks, double copy_s) {
  if (session.empty()) return std::nullopt;
  Json h = envelope();
  if (cfg_.tool_ttl && ends_in_tool)
    if (auto ttl = tool_ttl_s(session))
      add_action(h, "kv.retain", {{"ttl_seconds", *ttl}, {"include_current_request", true}});
  if (cfg_.demote_prefetch && ends_in_tool && !last_turn && demotes(session, "", copy_s))
    add_action(h, "kv.demote",
               {{"include_current_request", true},
                {"current_request_block_start", shared_blocks},
                {"current_request_block_count", UINT32_MAX}});
  if (cfg_.evict_on_final && last_turn) {
    add_action(h, "kv.evict",
               {{"include_current_request", true},
                {"current_request_block_start", shared_blocks},
                {"current_request_block_count", UINT32_MAX}});
    ++counts_.final_evicts;
  }
  if (last_turn) end_session(session);
  if (h["actions"].empty()) return std::nullopt;
  return h;
}

std::optional<Json> KvPolicies::tool_wait_hint(const std::string& session, const std::string& tool) {
  if (!cfg_.tool_ttl || session.empty()) return std::nullopt;
  auto ttl = tool_ttl_s(session, tool);
  if (!ttl) return std::nullopt;
  Json h = envelope();
  add_action(h, "kv.retain", {{"ttl_seconds", *ttl}, {"session_id", session}});
  return h;
}

bool KvPolicies::demotes(const std::string& session, const std::string& tool, double copy_s) {
  const bool yes = expected_tool_wait_s(session, tool) >= cfg_.demote_min_copies * copy_s;
  ++(yes ? counts_.tool_demotes : counts_.tool_not_demoted);
  return yes;
}

std::optional<Json> KvPolicies::demote_hint(const std::string& session, const std::string& tool, double copy_s) {
  if (!cfg_.demote_prefetch || session.empty() || !demotes(session, tool, copy_s)) return std::nullopt;
  Json h = envelope();
  add_action(h, "kv.demote", Json::object());
  return h;
}

double KvPolicies::copy_ms(uint64_t prompt_tokens, uint32_t block_size) const {
  if (!(cfg_.g2_to_g1_gbps > 0) || block_size == 0) return 0;
  const double bytes = std::ceil(static_cast<double>(prompt_tokens) / block_size) * block_size *
                       static_cast<double>(cfg_.kv_bytes_per_token);
  return bytes / (cfg_.g2_to_g1_gbps * 1e6) / cfg_.speedup_ratio;
}

std::optional<Json> KvPolicies::prefetch_hint(const std::string& session) {
  if (!cfg_.demote_prefetch || session.empty()) return std::nullopt;
  Json h = envelope();
  add_action(h, "kv.prefetch", {{"session_id", session}});
  ++counts_.prefetches;
  return h;
}

std::optional<Json> KvPolicies::spawn_hint(const std::string& parent) {
  if (!cfg_.parent_retain || parent.empty()) return std::nullopt;
  Json h = envelope();
  add_action(h, "kv.retain", {{"ttl_seconds", cfg_.parent_ttl_s}, {"session_id", parent}});
  ++counts_.parent_retains;
  return h;
}

}  // namespace dyn::kvpolicy
