// Session-affinity inspection (SPEC 2, dyn-bind): which worker served each turn of each session
// or subagent group, and whether a session moved while its binding should have held.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"

namespace dyn::metrics {

/// One routed turn: from a request_end row (router trace or client row) or a route_decision row.
struct Turn {
  std::string where;  ///< "file:line"
  std::string request_id, session_id, parent_session_id, worker, binding, event_type;
  std::optional<double> start_ms, end_ms;  ///< unix ms; route_decision rows: both = event time
  std::optional<double> input_tokens, cached_tokens;
  bool error = false;  ///< dyn.status error/cancelled: the turn was not served
  uint64_t order = 0;  ///< input position, breaks ties
};

/// Turns read from files (records::RowReader: gzip, envelopes, stdin). Rows of other event types and
/// dyn.warmup rows are skipped; rows without a session id are kept (show ignores them).
struct TurnSet {
  std::vector<Turn> turns;
  uint64_t skipped_rows = 0, warmup_rows = 0, no_session = 0;
};
TurnSet load_turns(const std::vector<std::string>& paths);
/// Parses one row; nullopt for rows that are not request_end / route_decision or are warmup.
std::optional<Turn> parse_turn(const Json& row, std::string where, uint64_t order);

/// The affinity key a turn binds under (SPEC 2.4): the parent group "parent:<id>" when the row has
/// a parent_session_id, else "session:<id>"; "" without a session.
std::string affinity_key(const Turn& t);

/// Per-key summary (dyn-bind show). Keys: every session id, plus every parent group.
struct BindingSummary {
  std::string key;   ///< "session:<id>" or "parent:<id>"
  std::string kind;  ///< "session" or "group"
  std::string id;    ///< the session or parent id
  uint64_t turns = 0, errors = 0;
  std::vector<std::string> workers;  ///< distinct, in order of first use
  uint64_t rebinds = 0;              ///< consecutive served turns on different workers
  std::optional<double> first_ms, last_ms;
  std::optional<double> cached_ratio;  ///< sum cached / sum input over served turns
};
std::vector<BindingSummary> summarize_bindings(const std::vector<Turn>& turns);
Json binding_summary_json(const BindingSummary& s);

/// A move that broke affinity: consecutive served turns of one key on different workers with
/// gap <= TTL. gap = next start - previous end when both are known (negative when they overlap),
/// else the difference of start (event) times.
struct Violation {
  std::string key;
  const Turn* previous = nullptr;
  const Turn* next = nullptr;
  double gap_ms = 0;
};

struct CheckResult {
  std::vector<Violation> violations;
  uint64_t keys = 0, turns_checked = 0;
  uint64_t excused = 0;  ///< moves right after a failed turn on the old worker (SPEC 2.3 rebind)
};

/// Checks every affinity key (SPEC 2.4 keys: parent group for subagents, session otherwise).
/// Turns are ordered by start time (input order on ties). Error turns are not served turns; a move
/// that follows an error of the same key on the previous worker is a legitimate rebind (SPEC 2.3)
/// and counted in `excused`, not reported. Thread-safe over const input.
CheckResult check_affinity(const std::vector<Turn>& turns, double ttl_secs);
Json violation_json(const Violation& v, double ttl_secs);

/// The live binding table of a router: accepts a JSON array of objects or {"bindings": [...]}.
/// Returns the entries, or an Error (exit 3) for any other shape.
Expected<std::vector<Json>> parse_bindings(const Json& body);
/// Aligned text table of binding entries: columns are the union of their keys in first-seen order;
/// nested values are printed as compact JSON, null as "-".
std::string bindings_table(const std::vector<Json>& entries);

/// Plain aligned table (the first `left` columns left-aligned, others right) with a rule under the
/// header row, used by dyn-bind show and dyn-bench compare.
std::string text_table(const std::vector<std::vector<std::string>>& rows, std::size_t left = 1);

}  // namespace dyn::metrics
