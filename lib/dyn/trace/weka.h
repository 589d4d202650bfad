// The WEKA kv-cache-tester agent traces (Claude Code conversations, callanjfox/kv-cache-tester
// traces/) as a dyn workload: sessions, turns, tool gaps and subagents with their parent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/engine/profile.h"
#include "dyn/records/workload.h"

namespace dyn::trace {

/// Tokens per hash id in the WEKA traces (their `block_size`; TRACE_FORMAT.md: 64-token blocks).
inline constexpr uint32_t kWekaBlockSize = 64;

/// Converts one parsed WEKA trace (`{id, block_size, hash_id_scope, requests: [...]}`) into workload
/// rows appended to `out`. Rules (docs/spec.md 6.4):
/// - the trace is session `id` (root, first turn at timestamp 0); a subagent marker
///   `{type: "subagent", agent_id, t (its end), duration_ms, requests}` is session `id/agent_id`
///   with parent_session_id the enclosing session; its requests' `t` count from its start
///   (t − duration_ms/1000 in the parent's time); nesting follows the same rule;
/// - rows come in order of their start over the whole conversation (`starts_ms`, when given, gets
///   each appended row's start in ms on the conversation's clock); request_id = "<session>:<turn>";
/// - a request's end = start + api_time, else start + estimate_service_ms(in, 0, out, `profile`)
///   (4,312 requests carry no api_time);
/// - a later turn's gap = its start − the latest end among the session's previous turn and the
///   subagents it joins (those of this session that ended by then and were not joined yet, listed
///   in `wait_for` by their last request_id), rounded to whole ms, floored at 0: `tool_wait_ms`
///   when the previous turn stopped with `tool_use` (the tool's run, approval included), else
///   `delay` (the user's think time); a subagent's first turn: `timestamp` = its start (a fixed
///   schedule) and `delay` = its start − the end of the parent's latest earlier request (the
///   other load modes, where it follows that request);
/// - hash ids are local to a trace (hash_id_scope "local"): each trace's ids map to fresh global
///   ids through `ids` (first-seen order, counter `next_id`); a request's partial last block
///   (in % 64 tokens, which WEKA leaves unhashed) gets a fresh id of its own.
/// Errors (kExitBadData, nothing appended): not an object, no `id` or `requests`, a block size
/// other than 64, a request without numeric `t`, `in`, `out` or an array `hash_ids`; the message
/// names the request path (e.g. "requests[3].requests[0]: no 'in'").
Expected<size_t> weka_to_workload(const Json& trace, uint64_t& next_id, const engine::PerfProfile* profile,
                                  std::vector<records::WorkloadRow>& out, std::vector<double>* starts_ms = nullptr);

/// Reads WEKA trace files (one JSON document each, gzip by magic; "-" = stdin) into a workload at
/// block size 64 through weka_to_workload, the files' rows merged by start (every conversation
/// starts at 0: they run side by side). Every file that fails is reported with its name and
/// counted in Workload::errors (the caller converts nothing then, as for Dynamo input).
records::Workload read_weka(const std::vector<std::string>& inputs, const engine::PerfProfile* profile);

}  // namespace dyn::trace
