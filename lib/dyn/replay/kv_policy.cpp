// KV retention policies of the simulated router (SPEC 6.4): the hints each sends.
#include "dyn/replay/kv_policy.h"

#include <fmt/format.h>

namespace dyn::replay {

namespace {

engine::KvHintAction action(const char* type, uint64_t id, Json payload) {
  return {fmt::format("p{}", id), type, "1.0", std::move(payload)};
}

}  // namespace

double KvPolicies::expected_tool_wait_s(const std::string& session) const {
  auto it = tool_wait_s_.find(session);
  return it == tool_wait_s_.end() ? cfg_.tool_default_wait_s : it->second;
}

void KvPolicies::observe_tool_wait(const std::string& session, double wait_s) {
  auto [it, fresh] = tool_wait_s_.try_emplace(session, wait_s);
  if (!fresh) it->second = 0.5 * it->second + 0.5 * wait_s;
}

std::shared_ptr<const engine::KvHint> KvPolicies::request_hint(const std::string& session, bool last_turn,
                                                               bool ends_in_tool, uint64_t shared_blocks) {
  if (session.empty()) return nullptr;
  auto h = std::make_shared<engine::KvHint>();
  h->message_id = fmt::format("kv-policy-{}", next_id_);
  if (cfg_.tool_ttl && ends_in_tool) {
    const double wait = expected_tool_wait_s(session);
    if (wait <= cfg_.tool_max_wait_s) {
      h->actions.push_back(
          action("kv.retain", next_id_++,
                 {{"ttl_seconds", std::max(cfg_.tool_ttl_factor * wait, 0.001)}, {"include_current_request", true}}));
      ++counts_.tool_retains;
    } else {
      ++counts_.tool_too_long;
    }
  }
  if (cfg_.evict_on_final && last_turn) {
    h->actions.push_back(action("kv.evict", next_id_++,
                                {{"include_current_request", true},
                                 {"current_request_block_start", shared_blocks},
                                 {"current_request_block_count", UINT32_MAX}}));
    ++counts_.final_evicts;
  }
  if (last_turn) tool_wait_s_.erase(session);
  return h->actions.empty() ? nullptr : h;
}

std::optional<engine::KvHint> KvPolicies::spawn_hint(const std::string& parent) {
  if (!cfg_.parent_retain || parent.empty()) return std::nullopt;
  engine::KvHint h;
  h.message_id = fmt::format("kv-policy-{}", next_id_);
  h.actions.push_back(action("kv.retain", next_id_++, {{"ttl_seconds", cfg_.parent_ttl_s}, {"session_id", parent}}));
  ++counts_.parent_retains;
  return h;
}

}  // namespace dyn::replay
