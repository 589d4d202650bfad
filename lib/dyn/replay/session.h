// Sessions of a workload for live replay: turn order, subagent roots, and the identity headers
// the identity each request carries (SPEC 1.1, 6.3).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dyn/session/families.h"
#include "dyn/records/workload.h"

namespace dyn::replay {

/// A request's identity for header purposes: its session, parent and root (session::Lineage).
/// The headers each client style sends for it are session::write_headers (SPEC 1.1, 6.3).
using Identity = session::Lineage;

/// Per-row session facts, indexed like Workload::rows.
struct SessionPlan {
  std::vector<uint32_t> turn;      ///< 0-based turn within the session (0 without a session)
  std::vector<int64_t> prev_turn;  ///< row index of the previous turn of the session, or -1
  std::vector<bool> last_turn;     ///< no later turn of the session in the workload
  std::vector<std::string> root;   ///< root session (parent chain followed; cycles cut)
  /// The session's parent as first given on any of its rows ("" for a root): every turn of a
  /// subagent carries it, also turns whose row omits it, so each header style sends the same
  /// lineage (Claude Code's would otherwise name the root as the parent).
  std::vector<std::string> parent;
  /// Row index of the parent session's latest turn that precedes this row in load order, for
  /// a child session's first turn; -1 otherwise or when the parent has no rows.
  std::vector<int64_t> parent_row;
};

/// Groups rows by session_id in their (already timestamp-sorted) order. Pure.
SessionPlan plan_sessions(const std::vector<records::WorkloadRow>& rows);

/// The request id used for row `i` (docs/records.md): the workload's request_id, else
/// "<session>:<turn>", else "row-<i>".
std::string request_id_for(const records::WorkloadRow& row, uint32_t turn, size_t i);

}  // namespace dyn::replay
