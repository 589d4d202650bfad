// Session identity: request headers -> agent_context (SPEC 1), shared by the router, capture and tools.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/session/families.h"

namespace dyn::session {

/// Longest accepted session or parent id, in bytes (SPEC 1.1).
inline constexpr size_t kMaxSessionIdBytes = 256;

/// Request headers as received: (name, value) pairs in order, names in any casing. Duplicates
/// are allowed here; normalize() decides whether they conflict.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

/// SPEC 1.2 `agent_context`. Absent optional fields are omitted from JSON.
struct AgentContext {
  std::string session_id;
  std::string parent_session_id;      ///< "" = none
  std::optional<bool> session_final;  ///< x-dynamo-session-final
  std::optional<Json> compaction;     ///< Codex compaction object (SPEC 1.1)
  /// The request's resolved priority (SPEC 3.4: Dynamo's scale, higher first), written when the
  /// request said one or inherited one from its session; absent otherwise.
  std::optional<int32_t> priority;
  std::optional<uint32_t> strict_priority;

  /// {"session_id", "parent_session_id"?, "session_final"?, "compaction"?, "priority"?,
  /// "strict_priority"?} in that key order.
  Json to_json() const;
  /// Reads an agent_context object (as written by to_json, or Dynamo's), of either era of
  /// Dynamo's schema (docs/records.md): the trajectory era's trajectory_id is the session (it
  /// wins over that era's run-level session_id), parent_trajectory_id the parent and
  /// trajectory_final the final flag, each when the session-era field is absent. Returns nullopt
  /// when `v` is not an object or has no non-empty string session or trajectory id.
  static std::optional<AgentContext> from_json(const Json& v);
  bool operator==(const AgentContext&) const = default;
};

/// Appends an agent_context object: exactly AgentContext{...}.to_json().dump() with the replace
/// error handler (invalid UTF-8 in an id becomes U+FFFD; ids come from request headers). The one
/// writer of agent_context in rows (records::append_request_end, records::append_route_decision).
/// `parent_session_id` "" = omitted; `compaction` nullptr = omitted. Thread-safe.
void append_agent_context(std::string& out, std::string_view session_id, std::string_view parent_session_id,
                          std::optional<bool> session_final = std::nullopt, const Json* compaction = nullptr,
                          std::optional<int32_t> priority = std::nullopt,
                          std::optional<uint32_t> strict_priority = std::nullopt);
/// The same for an AgentContext.
inline void append_agent_context(std::string& out, const AgentContext& c) {
  append_agent_context(out, c.session_id, c.parent_session_id, c.session_final, c.compaction ? &*c.compaction : nullptr,
                       c.priority, c.strict_priority);
}

/// Everything the router reads from request headers (SPEC 1.1).
struct Identity {
  std::optional<AgentContext> context;  ///< absent: the request has no identity
  Source source = Source::kNone;
  std::string x_request_id;                    ///< caller's x-request-id ("" = absent)
  std::optional<uint64_t> worker_instance_id;  ///< x-dynamo-worker-instance-id / x-worker-instance-id
  /// x-dynamo-request-priority and -strict-priority when they parse (Dynamo: a malformed one
  /// falls back to the body's nvext.agent_hints), x-dynamo-meta-policy-class (SPEC 3.4).
  std::optional<int64_t> priority;
  std::optional<uint64_t> strict_priority;
  std::string policy_class;
  std::string affinity_hint;  ///< x-session-affinity (a hint, never an identity)
};

/// How normalize() reads identity headers (SPEC 1.1).
struct NormalizeOptions {
  /// Also read the families' alias spellings (Family::session_aliases: Codex's older thread_id,
  /// and a bare session-id / session_id when no thread id is sent). Off by default, as Dynamo
  /// reads neither (dyn-route serve/decide/normalize and dyn-mocker --session-header-aliases,
  /// env DYN_SESSION_HEADER_ALIASES).
  bool aliases = false;
};

/// Normalizes request headers per SPEC 1.1: the first family of families() (families.h, the one
/// table of spellings) with a session or subagent header present yields the session; its parent
/// is that family's first parent spelling present (Claude Code: see Family::subagent); Dynamo's
/// final flag sets session_final; Codex's turn metadata with request_kind "compaction" sets
/// compaction.
/// Names are case-insensitive; values are trimmed (space, tab); blank = absent. A parent equal to
/// the session is dropped. Never looks at request content.
/// Errors (Error::exit_code = 400, the HTTP status the router answers with): a session or parent
/// id over 256 bytes; conflicting duplicate values of one identity header; a worker instance id
/// that is not an integer; a control character (other than tab) inside the trimmed
/// value of any identity_header_names() header (RFC 9110 5.5).
/// Pure function, thread-safe.
Expected<Identity> normalize(const HeaderList& headers, const NormalizeOptions& options = {});

/// Reads headers from JSON: an object {name: value} or an ordered list [[name, value], ...].
/// Values that are numbers or booleans are converted to their JSON text; an array value (a
/// header sent several times) becomes several entries. Error (exit_code 3) for other shapes.
Expected<HeaderList> headers_from_json(const Json& v);

/// Group binding key for the subagents of `parent_session_id` (SPEC 2.4): "\x1fgroup:" + 16 hex
/// digits of the FNV-1a 64 hash of the parent id. The leading control character cannot occur in
/// a trimmed header value, so no session id collides with a group key.
std::string parent_group_key(std::string_view parent_session_id);
/// True for keys made by parent_group_key().
inline bool is_parent_group_key(std::string_view key) { return !key.empty() && key[0] == '\x1f'; }

}  // namespace dyn::session
