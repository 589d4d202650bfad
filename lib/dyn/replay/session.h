// Sessions of a workload for live replay: turn order, subagent roots, and the identity headers
// each agent CLI would send (SPEC 1.1, 6.3).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dyn/trace/workload.h"

namespace dyn::replay {

/// How session identity is sent (`--session-headers`, SPEC 6.3).
enum class HeaderStyle { kDynamo, kClaude, kCodex, kOpenCode, kNone };

/// "dynamo" | "claude" | "codex" | "opencode" | "none".
std::optional<HeaderStyle> parse_header_style(std::string_view name);
const char* header_style_name(HeaderStyle style);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

/// Identity of one request for header purposes.
struct Identity {
  std::string session;  ///< the agent's own session (workload session_id); empty = no identity
  std::string parent;   ///< immediate parent session ("" for a root)
  std::string root;     ///< the top of the parent chain (== session for a root)
  bool final_turn = false;  ///< last turn of the session in this replay
};

/// Headers carrying `id` the way the chosen client does, spelled as captured from the real
/// CLIs (data/agent-headers/captured/README.md), so dyn-route's normalization (SPEC 1.1)
/// gives back exactly (session, parent):
/// - dynamo: X-Dynamo-Session-ID, X-Dynamo-Parent-Session-ID, X-Dynamo-Session-Final on the
///   last turn.
/// - claude: X-Claude-Code-Session-Id = root on every request; subagents add
///   x-claude-code-agent-id = session, and x-claude-code-parent-agent-id = parent only when the
///   parent is itself a subagent (a top-level child's parent is the root, implied).
/// - codex: session-id = root, thread-id = session, x-client-request-id = thread-id (as Codex
///   does); children add x-codex-parent-thread-id = parent and x-openai-subagent: collab_spawn.
/// - opencode (third-party provider form): x-session-id and x-session-affinity = session,
///   children x-parent-session-id = parent.
/// - none: nothing.
/// No headers when id.session is empty. Pure; thread-safe.
HeaderList identity_headers(HeaderStyle style, const Identity& id);

/// Per-row session facts, indexed like Workload::rows.
struct SessionPlan {
  std::vector<uint32_t> turn;        ///< 0-based turn within the session (0 without a session)
  std::vector<int64_t> prev_turn;    ///< row index of the previous turn of the session, or -1
  std::vector<bool> last_turn;       ///< no later turn of the session in the workload
  std::vector<std::string> root;     ///< root session (parent chain followed; cycles cut)
  /// Row index of the parent session's latest turn that precedes this row in load order, for
  /// a child session's first turn; -1 otherwise or when the parent has no rows.
  std::vector<int64_t> parent_row;
};

/// Groups rows by session_id in their (already timestamp-sorted) order. Pure.
SessionPlan plan_sessions(const std::vector<trace::WorkloadRow>& rows);

/// The request id used for row `i` (docs/records.md): the workload's request_id, else
/// "<session>:<turn>", else "row-<i>".
std::string request_id_for(const trace::WorkloadRow& row, uint32_t turn, size_t i);

}  // namespace dyn::replay
