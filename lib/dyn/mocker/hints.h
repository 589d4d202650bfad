// dyn-mocker's KV hints (SPEC 8.6): the request-level forms Dynamo sends today, and their metrics.
#pragma once

#include <memory>
#include <string>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/engine/engine.h"

namespace dyn::mocker {

/// The header carrying a request's retention TTL in ms (Dynamo's continuum experiment:
/// AIPerf sets it, the frontend turns it into kv.retain's ttl_seconds).
inline constexpr const char* kRetentionTtlHeader = "X-Dynamo-Retention-TTL-Ms";

/// The KV hint a request carries, applied when it completes (null when none): from
/// `retention_ttl_ms` (the X-Dynamo-Retention-TTL-Ms header's value, "" when absent) a kv.retain
/// of the request's own blocks; from the body's `nvext.kv_hint` (the KvHint envelope Dynamo's
/// router attaches to the backend request) its actions; from `nvext.agent_context.kv_hints
/// .evict_session: true` (what Dynamo derives from x-dynamo-session-final) a kv.evict of the
/// request's blocks and its session's leases. Errors (a 400 naming the field): a TTL that is
/// not a positive integer, a malformed envelope, an evict_session that is not a boolean.
Expected<std::shared_ptr<const engine::KvHint>> request_kv_hint(const std::string& retention_ttl_ms, const Json& body);

/// /metrics lines of the KV hints: dyn_mocker_kv_hint_actions_total{action_type, outcome} for
/// every pair, the leases, the pinned blocks and their cap (gauges), pinned blocks evicted
/// because nothing else was left, and hint messages refused as malformed (counters). `lbl`:
/// the worker's labels.
void kv_hint_metrics(std::string& out, const std::string& lbl, const engine::EngineStats& s, uint64_t malformed);

}  // namespace dyn::mocker
