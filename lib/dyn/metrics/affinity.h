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
  std::string rebind_reason;               ///< dyn.rebind_reason: why the router moved the binding ("" = not said)
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

/// A move between consecutive served turns of one key on different workers with gap <= TTL. gap =
/// next start - previous end when both are known (negative when they overlap), else the difference
/// of start (event) times. `reason` is empty for a violation; for a move that is not one it says
/// why the session had to (or was allowed to) move: the row's dyn.rebind_reason, "soft" (a soft
/// rebind without a reason), or "previous_turn_failed" (the old worker failed a turn of the key).
struct Violation {
  std::string key;
  const Turn* previous = nullptr;
  const Turn* next = nullptr;
  double gap_ms = 0;
  std::string reason;
};

/// How the router that wrote the rows was set up (dyn-bind check's --ttl-secs and --mode, or its
/// run-config), and which dyn.rebind_reason values count as moves the binding could not prevent.
struct CheckOptions {
  double ttl_secs = 0;
  bool soft = false;  ///< soft affinity: a rebind is the policy's choice, allowed
  /// Reasons of forced moves (dyn-bind: route::kRebindReasons but busy); a move whose row names
  /// one is not a violation.
  std::vector<std::string> forced_reasons;
  /// Reasons soft affinity moves for (busy): allowed in soft mode, violations in hard mode.
  std::vector<std::string> soft_reasons;
};

struct CheckResult {
  std::vector<Violation> violations;
  std::vector<Violation> moves;  ///< moves that are not violations, each with its reason
  uint64_t keys = 0, turns_checked = 0;
};

/// Checks every affinity key (SPEC 2.4 keys: parent group for subagents, session otherwise).
/// Turns are ordered by start time (input order on ties). Error turns are not served turns. A
/// move within the TTL is a violation unless the next turn's row says it was forced
/// (dyn.rebind_reason in forced_reasons), soft affinity allowed it (a soft_reasons reason, or a
/// "rebound" binding without a reason, in soft mode), or the previous worker failed a turn of the
/// key since (SPEC 2.3: client rows carry no reason); those go to `moves`. Thread-safe over const
/// input.
CheckResult check_affinity(const std::vector<Turn>& turns, const CheckOptions& options);
/// The affinity settings a router was started with, as its run-config records them (dyn-route
/// serve writes PREFIX.run-config.json beside its trace, SPEC 5.2): the TTL (none when affinity
/// was off) and the mode.
struct RouterAffinity {
  std::string path;  ///< the run-config read
  std::optional<double> ttl_secs;
  bool soft = false;
};

/// The run-config beside a trace file: PREFIX.run-config.json for a segment
/// PREFIX.NNNNNN.jsonl[.gz] or a plain PREFIX; "" when there is none (stdin, another file).
std::string run_config_beside(const std::string& trace_path);

/// Reads --router-session-affinity-ttl-secs and --router-session-affinity-mode from a run-config.
/// Errors: unreadable (exit 4) or not a run-config (exit 3), naming the file.
Expected<RouterAffinity> read_router_affinity(const std::string& run_config_path);

/// {key, previous, next, gap_ms, ttl_secs} (+ reason for a move that is not a violation).
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
