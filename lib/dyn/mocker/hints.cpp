// dyn-mocker's KV hints: a request's hint from its header and body, and the hint metrics.
#include "dyn/mocker/hints.h"

#include <charconv>

#include <fmt/format.h>

#include "dyn/http/prometheus.h"

namespace dyn::mocker {

Expected<std::shared_ptr<const engine::KvHint>> request_kv_hint(const std::string& retention_ttl_ms, const Json& body) {
  engine::KvHint h;
  h.message_id = "request";
  if (!retention_ttl_ms.empty()) {
    uint64_t ms = 0;
    const char* end = retention_ttl_ms.data() + retention_ttl_ms.size();
    auto [p, ec] = std::from_chars(retention_ttl_ms.data(), end, ms);
    if (ec != std::errc() || p != end || ms == 0)
      return Error{
          fmt::format("{}: \"{}\" is not a positive integer of milliseconds", kRetentionTtlHeader, retention_ttl_ms),
          kExitBadData};
    h.actions.push_back({"retention-ttl", "kv.retain", "1.0",
                         Json{{"ttl_seconds", static_cast<double>(ms) / 1000},
                              {"include_current_request", true},
                              {"execute_at", "request_completion"}}});
  }
  const Json* nvext = body.is_object() && body.contains("nvext") ? &body["nvext"] : nullptr;
  if (nvext && nvext->is_object()) {
    if (auto k = nvext->find("kv_hint"); k != nvext->end()) {
      auto env = engine::parse_kv_hint(*k, "nvext.kv_hint");
      if (!env) return env.error();
      h.message_id = env->message_id;
      for (auto& a : env->actions) h.actions.push_back(std::move(a));
    }
    const Json* evict = nullptr;
    if (auto ac = nvext->find("agent_context"); ac != nvext->end() && ac->is_object())
      if (auto kh = ac->find("kv_hints"); kh != ac->end() && kh->is_object())
        if (auto e = kh->find("evict_session"); e != kh->end()) evict = &*e;
    if (evict && !evict->is_boolean())
      return Error{"nvext.agent_context.kv_hints.evict_session: not a boolean", kExitBadData};
    if (evict && evict->get<bool>())
      h.actions.push_back({"evict-session", "kv.evict", "1.0",
                           Json{{"include_current_request", true}, {"execute_at", "request_completion"}}});
  }
  if (h.actions.empty()) return std::shared_ptr<const engine::KvHint>();
  return std::make_shared<const engine::KvHint>(std::move(h));
}

void kv_hint_metrics(std::string& out, const std::string& lbl, const engine::EngineStats& s, uint64_t malformed) {
  const std::string actions = "dyn_mocker_kv_hint_actions_total";
  http::prom_family(out, actions, "counter", "KV hint actions by type and outcome (SPEC 8.6)");
  for (size_t k = 0; k < engine::kHintActionKinds; ++k)
    for (size_t o = 0; o < engine::kHintOutcomeKinds; ++o)
      http::prom_sample(out, actions,
                        fmt::format("{},action_type=\"{}\",outcome=\"{}\"", lbl, engine::kHintActionTypes[k],
                                    engine::kHintOutcomes[o].name),
                        static_cast<double>(s.hint_actions[k][o]));
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t v) {
    const std::string full = std::string("dyn_mocker_") + name;
    http::prom_family(out, full, type, help);
    http::prom_sample(out, full, lbl, static_cast<double>(v));
  };
  metric("kv_hint_leases", "gauge", "KV hint leases in force", s.hint_leases);
  metric("kv_pinned_blocks", "gauge", "KV blocks held by a lease (cached or not)", s.pinned_blocks);
  metric("kv_pinned_blocks_cap", "gauge", "Most KV blocks leases may pin (--kv-hint-max-pinned-fraction of G1)",
         s.pinned_cap);
  metric("kv_pinned_evictions_total", "counter", "Pinned KV blocks evicted because no unpinned one was left",
         s.pinned_evictions);
  metric("kv_hint_malformed_total", "counter", "KV hint messages refused as malformed (400)", malformed);
}

}  // namespace dyn::mocker
