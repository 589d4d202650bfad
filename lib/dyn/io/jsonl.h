// JSONL rows from LineReader: parse, skip and count malformed lines (records::RowReader adds the
// trace envelope on top: what a row means is the record layer's, not the file layer's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/io/line_reader.h"

namespace simdjson::dom {
class element;
class object;
class parser;
}  // namespace simdjson::dom

namespace dyn::io {

/// Converts a simdjson DOM value into Json with the types nlohmann's own parser would give it:
/// non-negative integers become number_unsigned, negative ones number_integer, keys keep their
/// order. Lets a fast-path reader hand rare rows (trace records, header rows) to Json-based code
/// without parsing the text twice. Thread-safe (no shared state).
Json to_json(const simdjson::dom::element& value);
Json to_json(const simdjson::dom::object& value);

/// "'request.input_tokens' is out of range (integers must be within 64 bits)": names the first
/// integer of a JSON line that does not fit 64 bits (simdjson's number errors), for the report;
/// "" when the line has no such integer (then the number error is plain malformed JSON).
std::string out_of_range_message(std::string_view line);

/// The one end-of-input summary every reader prints when rows were skipped: "N malformed rows
/// skipped, M rows read[, K NUL bytes in skipped rows]" (a warning; nothing when none skipped).
void summarize_rows(uint64_t read, uint64_t skipped, uint64_t nul_bytes);

struct JsonlOptions {
  LineReaderOptions lines;
  uint64_t max_reports = 20;  ///< per-line error messages printed before only counting
};

/// Streams JSON objects from JSONL inputs. Blank lines are skipped silently. A line that is not
/// a JSON object (malformed, truncated, NUL padding) is reported as "file:line: malformed JSON
/// row: <reason>" on stderr (first `max_reports`, then counted only) and skipped, so good rows
/// still flow. Numbers keep their type: integers up to 2^64-1 stay exact (number_unsigned).
class JsonlReader {
 public:
  explicit JsonlReader(std::vector<std::string> paths, JsonlOptions options = {});
  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  /// Next object. `where` gets "file:line".
  bool next(Json& row, std::string* where = nullptr);
  /// The fast path: the next object parsed by simdjson (validated, UTF-8 checked), with the same
  /// skipping, reporting and counting as next(Json&).
  /// `row` stays valid until the next call. `where` gets "file:line" when given.
  bool next_dom(simdjson::dom::object& row, std::string* where = nullptr);
  /// The two halves of next_dom for a caller with its own fast parser: next_line() gives the next
  /// non-blank line unparsed (valid until the next call; false at the end). Then either
  /// accept_line() when the caller parsed it itself (counted as a row), or parse_line_dom() to
  /// parse it exactly as next_dom would (same checks, reports and counting; false when the line
  /// was rejected and skipped).
  bool next_line(std::string_view& text);
  void accept_line() { ++rows_; }
  bool parse_line_dom(simdjson::dom::object& row);
  /// The line of the last row returned (valid until the next call).
  const Line& line() const { return line_; }

  /// Report a bad row found by a caller's own validation: counted with the malformed rows and
  /// printed like them ("file:line: <what>").
  void reject(const std::string& where, const std::string& what);

  uint64_t rows() const { return rows_; }
  /// Rows skipped: malformed, rejected by the caller, nested too deep, or over the line limit.
  uint64_t malformed() const { return malformed_ + reader_.long_lines(); }
  /// NUL bytes in the skipped rows (zero-filled blocks of a crashed writer).
  uint64_t nul_bytes() const { return nul_bytes_; }
  /// Rows skipped because an integer in them does not fit 64 bits (reported naming the field;
  /// counted in malformed() too). next_dom only: next(Json&) keeps such numbers as doubles.
  uint64_t out_of_range() const { return out_of_range_; }
  /// Prints "N malformed rows skipped, M rows read[, K NUL bytes in skipped rows]" when any row
  /// was skipped (call once at the end).
  void summarize() const;
  LineReader& reader() { return reader_; }

 private:
  bool skip_blank() const;
  void reject_malformed(bool parsed_but_not_object);

  LineReader reader_;
  JsonlOptions opts_;
  std::unique_ptr<simdjson::dom::parser> dom_;  // created on first fast-path call
  Line line_;
  uint64_t rows_ = 0;
  uint64_t malformed_ = 0;
  uint64_t nul_bytes_ = 0;
  uint64_t out_of_range_ = 0;
};

}  // namespace dyn::io
