// dyn-trace filter: select trace rows by event, session, parent, worker, time and --where
// comparisons, and project fields to JSONL, TSV or CSV — streaming, at the speed of gzip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/io/output.h"

namespace dyn::trace {

/// One `--where 'FIELD OP VALUE'` comparison (docs/cli.md, SPEC 5.1 field paths).
struct Where {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kContains };
  std::vector<std::string> path;  ///< dotted path split at '.'; an all-digit segment also indexes arrays
  std::string field;              ///< the path as written
  Op op = Op::kEq;
  std::string text;     ///< VALUE as text (quotes removed)
  bool quoted = false;  ///< VALUE was "quoted": always compared as a string
  /// VALUE read as a number (when it is one and not quoted). Integers keep exact 64-bit values.
  enum class Num { kNone, kInt, kUint, kDouble } num = Num::kNone;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
};

/// Parses "FIELD OP VALUE" (spaces around OP allowed; OP one of = != < <= > >= ~; `==` is
/// accepted as `=`). FIELD is a dotted path of [A-Za-z0-9_-] segments. VALUE may be "quoted".
/// Errors: empty field, missing operator, bad path characters (kExitUsage).
Expected<Where> parse_where(std::string_view expr);

/// One `--fields` entry: `path` or `name=path`.
struct FieldSpec {
  std::string name;               ///< output key / column header (the path as written by default)
  std::vector<std::string> path;  ///< dotted path split at '.'
};

/// Parses "a,b,name=c.d" into FieldSpecs. Errors: empty entries, bad path characters (kExitUsage).
Expected<std::vector<FieldSpec>> parse_fields(std::string_view list);

enum class FilterFormat { kJsonl, kTsv, kCsv };

struct FilterOptions {
  std::vector<std::string> inputs;     ///< files in order; empty or "-" = stdin (gzip by magic)
  std::vector<std::string> events;     ///< event_type must equal one of these (empty = any)
  std::optional<std::string> session;  ///< session id (see filter_traces)
  bool with_subagents = false;         ///< also rows of sessions whose parent chain leads to `session`
  std::optional<std::string> parent;   ///< agent_context.parent_session_id (or parent_trajectory_id)
  std::optional<std::string> worker;   ///< request.worker.decode_worker_id (number or string)
  std::optional<uint64_t> since_ms;    ///< event_time_unix_ms >= since (inclusive)
  std::optional<uint64_t> until_ms;    ///< event_time_unix_ms <  until (exclusive)
  std::vector<Where> where;            ///< all must hold
  std::vector<FieldSpec> fields;       ///< projection; empty = whole rows
  FilterFormat format = FilterFormat::kJsonl;
  bool header = true;   ///< TSV/CSV header line
  bool strict = false;  ///< exit 3 on a truncated gzip stream or malformed row
};

/// Streams the rows of `inputs` that pass every selector to `out`, in input order, in constant
/// memory (one line at a time; --with-subagents also keeps the set of descendant session ids).
///
/// Selection rules (each absent selector passes every row):
/// - Rows are bare records or `{"timestamp","event"}` envelopes (SPEC 5; the event is used).
/// - `events`: `event_type` equals one of them.
/// - `session`: `agent_context.session_id`, or the older schema's `agent_context.trajectory_id`,
///   or a top-level `session_id` (as in Dynamo's documented tool_end example) equals it.
///   With `with_subagents`, a row also passes when its parent (`agent_context.parent_session_id`
///   or `parent_trajectory_id`) is the session or an already-seen descendant; the descendant set is
///   learned in one pass, so a grandchild row that precedes every row of its own parent is missed
///   (use `dyn-trace cat --sort` first on out-of-order input).
/// - `parent`, `worker`: exact string equality (numbers compared by their decimal text).
/// - `since_ms`/`until_ms`: half-open window on `event_time_unix_ms`; rows without it fail.
/// - `where`: compare_where() below.
///
/// Output: JSONL writes each selected row's original bytes (u64 values untouched; an envelope
/// is replaced by its minified event); with `fields`, one object per row with the named values
/// (absent = null). TSV and CSV need `fields`: a header line, then one line per row; absent and
/// null values are empty; TSV escapes \t \n \r \\ like jq's @tsv; CSV quotes strings like jq's
/// @csv (RFC 4180, "" for a quote). Objects and arrays are written as compact JSON.
///
/// Malformed lines are reported with file:line (the first 20), counted and skipped. Returns the
/// exit code: 0, or 3 in strict mode after a truncated gzip stream or a malformed row.
/// Errors: unreadable file -> Fatal(kExitIo); TSV/CSV without fields -> Fatal(kExitUsage).
int filter_traces(const FilterOptions& options, io::Output& out);

/// Evaluates one comparison against a field value given as JSON text (e.g. `42`, `"abc"`), or
/// std::nullopt when the field is absent. Rules: a string field compares as a string with the
/// VALUE text (= != and byte order < <= > >=, ~ substring); a number field compares numerically
/// when VALUE is a number — integers exactly (unsigned 64-bit values are never rounded through
/// double), otherwise as long double; a number against a non-number VALUE, and an ordering on a
/// missing, null, bool, object or array value, is false (!= is true); bool/null/object/array
/// fields compare their compact JSON text with VALUE for = != ~. Exposed for tests.
bool compare_where(const Where& w, std::optional<std::string_view> json_value);

}  // namespace dyn::trace
