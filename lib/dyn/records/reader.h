// The one reader of record rows: JSONL lines through io::JsonlReader (gzip, "file:line", one
// malformed-row policy) with SPEC 5's file envelope unwrapped, for every tool that reads rows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/io/jsonl.h"

namespace simdjson::dom {
class object;
}  // namespace simdjson::dom

namespace dyn::records {

/// SPEC 5's envelope rule, the only copy: a row is the file envelope {"timestamp": ms, "event":
/// {record}} when it has a "timestamp" member, an object "event" member, and no "event_type" (a
/// record's own field, so a record that happens to carry an "event" member stays a record). Other
/// members of an envelope are ignored like any unknown field (SPEC 5). Returns the event of an
/// envelope, `row` itself otherwise.
const Json& unwrap_envelope(const Json& row);
/// The same rule on a simdjson row: replaces `row` by its event and returns true for an envelope.
bool unwrap_envelope(simdjson::dom::object& row);

/// Record rows from JSONL inputs ("-" or none = stdin; gzip by magic), each bare or in its
/// envelope (unwrapped), through io::JsonlReader: blank lines skipped; a line that is not a JSON
/// object (malformed, invalid UTF-8, nested too deep, NUL padding, an integer past 64 bits, over
/// the line limit) is reported as "file:line: <reason>, skipped" (the first max_reports), counted,
/// and the good rows around it still flow. Not thread-safe.
class RowReader {
 public:
  explicit RowReader(std::vector<std::string> paths, io::JsonlOptions options = {});

  /// Next row as Json (numbers keep their type, u64 exact). `where` gets "file:line".
  bool next(Json& row, std::string* where = nullptr);
  /// The fast path: the next row parsed by simdjson; valid until the next call.
  bool next_dom(simdjson::dom::object& row, std::string* where = nullptr);
  /// For a caller with its own scanner for its common row shape (the workload scanner): the next
  /// non-blank line unparsed; then accept_line() when the caller's scanner took it, or
  /// parse_line_dom() to parse it as next_dom would (false: rejected, reported and counted).
  bool next_line(std::string_view& text) { return in_.next_line(text); }
  void accept_line() { in_.accept_line(); }
  bool parse_line_dom(simdjson::dom::object& row);

  /// Whether the last row returned came in an envelope (its line's bytes are the envelope's).
  bool enveloped() const { return enveloped_; }
  /// The line of the last row (its text, file and number), valid until the next call.
  const io::Line& line() const { return in_.line(); }
  /// A bad row found by the caller's own checks, reported and counted like a malformed one.
  void reject(const std::string& where, const std::string& what) { in_.reject(where, what); }

  uint64_t rows() const { return in_.rows(); }
  /// Lines skipped: malformed, rejected, too deep, over the line limit.
  uint64_t malformed() const { return in_.malformed(); }
  /// Of malformed(): rows skipped for an integer past 64 bits (named; callers needing every row
  /// fail on them).
  uint64_t out_of_range() const { return in_.out_of_range(); }
  /// Gzip inputs cut short (strict mode fails on them instead).
  uint64_t truncated_files() { return in_.reader().truncated_files(); }
  /// The end-of-input line "N malformed rows skipped, M rows read[, K NUL bytes ...]" when any was.
  void summarize() const { in_.summarize(); }

 private:
  io::JsonlReader in_;
  bool enveloped_ = false;
};

}  // namespace dyn::records
