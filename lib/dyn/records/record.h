// The trace record schema dynamo.request.trace.v1 (SPEC 5.1): names and small accessors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dyn/base/json.h"

namespace dyn::records {

inline constexpr const char* kSchema = "dynamo.request.trace.v1";

/// Event types of SPEC 5.1.
namespace event {
inline constexpr const char* kRequestEnd = "request_end";
inline constexpr const char* kToolStart = "tool_start";
inline constexpr const char* kToolEnd = "tool_end";
inline constexpr const char* kToolError = "tool_error";
inline constexpr const char* kRouteDecision = "route_decision";
}  // namespace event

/// A new record {"schema", "event_type", "event_time_unix_ms", "event_source"?} in the fixed
/// key order every writer uses; callers append agent_context, request, tool in that order.
Json make_record(std::string_view event_type, uint64_t event_time_unix_ms, std::string_view event_source = {});

/// Value at a dotted path ("request.worker.decode_worker_id"), or nullptr when absent.
const Json* find_path(const Json& row, std::string_view dotted);

/// True for trace records (rows carrying "event_type" or the schema string), as opposed to
/// workload rows.
bool is_trace_record(const Json& row);

/// Session key for affinity grouping: agent_context.session_id, or in a row of Dynamo's
/// trajectory era agent_context.trajectory_id (which wins: that era's session_id named the run);
/// "" when absent (docs/records.md).
std::string session_of(const Json& row);
/// agent_context.parent_session_id, or parent_trajectory_id in a trajectory-era row; "" when absent.
std::string parent_of(const Json& row);
/// Decode worker id as a string (request.worker.decode_worker_id, number or string), or "".
std::string worker_of(const Json& row);

/// Reads a JSON number as an exact unsigned 64-bit value: accepts non-negative integers only.
/// Returns nullopt for negative, fractional, too-large (parsed as float) or non-numeric values.
std::optional<uint64_t> as_u64(const Json& v);
/// Number (int, unsigned or float) as double, or nullopt.
std::optional<double> as_number(const Json& v);

}  // namespace dyn::records
