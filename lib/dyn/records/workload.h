// Workloads (SPEC 6.1, 6.2): Mooncake JSONL rows with the session extensions, and Dynamo trace
// records converted on the fly, loaded and validated before anything is sent or simulated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/json.h"

namespace simdjson::dom {
class object;
}  // namespace simdjson::dom

namespace dyn::records {

/// Largest timestamp (and Dynamo request start) accepted, in ms (SPEC 6.1, 6.2): about 285,000
/// years, far past any Unix-epoch or relative time; a row outside 0..kMaxTimestampMs is rejected
/// naming its line.
inline constexpr double kMaxTimestampMs = 9e15;

/// The error for a Dynamo request_end's start (request.request_received_ms, or event_time_unix_ms -
/// request.total_time_ms) outside 0..kMaxTimestampMs (SPEC 6.2: the row's timestamp is measured
/// from it), without the line; nullopt when it is in range. dyn-route decide and the workload
/// loader both reject such a record with it.
std::optional<std::string> dynamo_start_error(double start_ms);

/// Tokens per hash id in Mooncake traces (SPEC 6.1: B = 512), the block size a workload has when
/// neither the input (Dynamo records carry their own) nor the user says otherwise.
inline constexpr uint32_t kMooncakeBlockSize = 512;

/// The format of a workload's rows: AIPerf's --custom-dataset-type (aiperf_dataset.h has the table
/// of names and the conversions), or kAuto: recognised by the rows themselves.
enum class DatasetType { kAuto, kMooncakeTrace, kSingleTurn, kMultiTurn, kRandomPool };

/// One request of a workload. Times in ms. Absent optional fields stay nullopt / empty.
struct WorkloadRow {
  std::string where;                      ///< "file:line" of the source row
  uint64_t index = 0;                     ///< 0-based position in load order (before sorting)
  std::optional<double> timestamp_ms;     ///< arrival, ms since trace start
  std::optional<double> delay_ms;         ///< wait after the previous turn of the session ends
  uint64_t input_length = 0;              ///< ISL in tokens (from text_input under SPEC 4.2 if absent)
  std::optional<uint64_t> output_length;  ///< OSL in tokens
  std::vector<uint64_t> hash_ids;         ///< one per block of block_size tokens (u64 exact)
  std::string session_id, parent_session_id, request_id;
  std::optional<std::string> text_input;  ///< literal prompt instead of hash ids
  std::vector<std::string> wait_for;      ///< request ids that must complete first (agentic form)
  std::optional<double> tool_wait_ms;     ///< tool time before this request (agentic form)
  std::optional<int64_t> priority;
  bool hash_ids_consistent = true;  ///< (n-1)*B < input_length <= n*B (SPEC 4.3)

  /// Every field but `where` back to its default, keeping the buffers of hash_ids and the
  /// strings: a row reused for each line allocates nothing once they are large enough (issue 17).
  /// A field added above is reset here too.
  void reset() {
    index = 0;
    timestamp_ms.reset();
    delay_ms.reset();
    input_length = 0;
    output_length.reset();
    hash_ids.clear();
    session_id.clear();
    parent_session_id.clear();
    request_id.clear();
    text_input.reset();
    wait_for.clear();
    tool_wait_ms.reset();
    priority.reset();
    hash_ids_consistent = true;
  }
};

struct WorkloadOptions {
  /// Block size B of hash_ids. Dynamo traces carry their own; 0 = take it from the trace (Dynamo)
  /// or kMooncakeBlockSize (Mooncake). A Dynamo trace whose size differs from an explicit
  /// non-zero value is an error.
  uint32_t block_size = 0;
  /// Reject the workload when a row's hash_ids do not fit its input_length (strict), or only
  /// warn and keep the row (lenient: prompts still get exactly input_length tokens).
  bool strict_hash_ids = true;
  /// Timestamps are required (fixed-schedule mode): a row that starts an arrival (no session, or
  /// a session's first turn) without one is an error naming the line.
  bool require_timestamps = false;
  /// Timestamps are required when the first row has one (a replayer's default mode is a fixed
  /// schedule exactly then, SPEC 6.3), so a later arrival without one is an error naming its line.
  bool require_timestamps_if_first_has = false;
  /// Sort stably by timestamp when rows are out of order (a note says so).
  bool sort_by_timestamp = true;
  /// Print nothing while reading (errors are still collected): a second reading of input whose
  /// problems were already printed.
  bool quiet = false;
  /// The rows' format (--custom-dataset-type): kAuto takes each input's from its first row (AIPerf's
  /// single_turn and multi_turn lines are recognised; random_pool must be named). A row of another
  /// format is an error naming both.
  DatasetType dataset_type = DatasetType::kAuto;
  /// random_pool: requests drawn from the pool (AIPerf --conversation-num, default 100) and the
  /// seed of the draws.
  uint64_t pool_samples = 100;
  uint64_t pool_seed = 0;
};

/// A loaded workload. `errors` holds "file:line: what" messages for rejected rows; the loader
/// has already printed them. `ok()` is false when any error makes the workload unusable.
struct Workload {
  std::vector<WorkloadRow> rows;
  uint32_t block_size = kMooncakeBlockSize;
  bool from_dynamo = false;  ///< converted from dynamo.request.trace.v1 records (SPEC 6.2)
  /// The format the rows were read in (kMooncakeTrace for Mooncake and Dynamo rows; kMultiTurn:
  /// each row is a turn's new input, to be sent after the conversation so far, replies included).
  DatasetType dataset_type = DatasetType::kAuto;
  bool has_timestamps = false;  ///< the first row carries a timestamp
  bool reordered = false;       ///< rows were sorted by timestamp
  std::vector<std::string> errors;
  uint64_t warnings = 0;
  uint64_t skipped_rows = 0;  ///< lines the reader skipped (malformed, too long, out of range)
  /// request_end records without request.replay (no sequence hashes to replay, SPEC 6.2): warned
  /// and counted; an error when no record has it.
  uint64_t no_replay_rows = 0;
  bool ok() const { return errors.empty(); }
};

/// Parses one Mooncake/agentic JSON row (SPEC 6.1); the one place that validates such rows, shared
/// by load_workload, dyn-route decide and dyn-replay. Fields are read in a fixed order (timestamp,
/// delay, tool_wait_ms, input_length, output_length, hash_ids, text_input, ids, priority,
/// wait_for) into `out` (which is reset first; `out.where` is kept); on the first invalid field it
/// stops and returns false with `*error` set, leaving the fields read so far (so a caller that
/// still writes a row for the rejected input can keep e.g. its timestamp). Errors: timestamp, delay
/// or tool_wait_ms not a number, negative delay, lengths not non-negative integers (integral
/// floats are accepted), hash_ids not an array of unsigned 64-bit integers, neither input_length
/// nor text_input. Hash-id/length consistency is recorded (hash_ids_consistent), not rejected.
/// Thread-safe (no shared state).
bool parse_workload_object(const simdjson::dom::object& row, uint32_t block_size, WorkloadRow& out, std::string* error);

/// The fast path of parse_workload_object for the common row shape, reading the JSONL line itself
/// (no DOM tree): returns true with `out` filled exactly as simdjson + parse_workload_object would
/// fill it (`out.where` kept), or false when the line is outside the subset it handles. The subset:
/// one flat object; keys without escapes, no duplicate workload keys, none of "event_type",
/// "schema", "headers", "event" (trace records, header rows, envelopes) or "wait_for"; values are
/// non-negative JSON numbers (integers of at most 19 digits; floats parsed with correct rounding as
/// simdjson does), arrays of such integers under "hash_ids" only, ASCII strings without escapes or
/// control characters, null, true and false; and every field valid under SPEC 6.1. On false the
/// caller parses the line with simdjson and calls parse_workload_object, which gives the same row
/// or the precise error; `out` is then unspecified. It never accepts a line simdjson would reject.
/// Why: on Mooncake traces the DOM tree and its walk cost several times the routing itself.
/// Thread-safe (no shared state).
bool parse_workload_line_fast(std::string_view line, uint32_t block_size, WorkloadRow& out);

/// parse_workload_object for a row already parsed as Json (a convenience for tests and Json
/// holders: it re-parses row.dump() with simdjson, so both accept exactly the same rows; slower).
/// Non-objects are errors.
std::optional<WorkloadRow> parse_workload_row(const Json& row, uint32_t block_size, std::string where,
                                              std::string* error);

/// Loads a workload from JSONL files ("-" = stdin): Mooncake rows, or Dynamo request_end
/// records (detected per file by "event_type"/"schema"; converted per SPEC 6.2: compact hash
/// ids in first-seen order, start = request_received_ms or event time - total time, timestamp
/// = start - earliest start, delay = gap after the previous turn of the session ended).
/// Validates sessions (SPEC 6.1): a session mixing delay and timestamp on later turns is
/// ambiguous; missing timestamps when required. Errors are printed with file:line and the
/// numbers involved, and collected in Workload::errors. Malformed JSON lines are skipped and
/// counted (JsonlReader, simdjson fast path). Fatal only for unreadable files.
Workload load_workload(const std::vector<std::string>& paths, const WorkloadOptions& options);

/// Workload rows one at a time, in load order, with load_workload's parsing, checks and reports
/// (SPEC 6.1; it is load_workload's reader): what lets dyn-replay --sim stream a trace instead of
/// holding it (issue 17). Dynamo trace records are not converted here (SPEC 6.2 needs the whole
/// input): they are collected in dynamo() for load_workload; a streaming caller cannot stream
/// them. Session checks (mixed delay/timestamp, missing timestamps) run as rows are read.
/// Fatal only for unreadable files. Not thread-safe.
class WorkloadReader {
 public:
  /// `second_pass`: print nothing and skip the session checks (input that a first, reporting
  /// pass accepted); options.quiet prints nothing but checks.
  WorkloadReader(const std::vector<std::string>& paths, const WorkloadOptions& options, bool second_pass = false);
  ~WorkloadReader();
  /// The next valid row into `row` (`index` = its position among the valid rows); false at the
  /// end, after which meta() is complete. Rejected rows are reported, added to meta().errors
  /// and skipped; malformed lines are skipped and counted (JsonlReader).
  bool next(WorkloadRow& row);
  /// Errors, warnings, skipped rows, block_size and has_timestamps so far (`rows` stays empty).
  Workload& meta();
  /// No row's timestamp so far is below an earlier row's (rows without one not compared).
  bool in_time_order() const;
  /// Dynamo trace records met so far, with their "file:line".
  std::vector<std::pair<Json, std::string>>& dynamo();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Converts Dynamo trace records (already parsed) into workload rows (SPEC 6.2). Rows that are
/// not request_end or lack request.replay are skipped. Block size mismatch between rows, or
/// against a non-zero `block_size`, adds an error.
Workload workload_from_dynamo(const std::vector<std::pair<Json, std::string>>& records, uint32_t block_size);

/// Serializes a row back to Mooncake JSONL (keys: timestamp, session_id, parent_session_id,
/// request_id, delay, input_length, output_length, hash_ids, text_input, wait_for, tool_wait_ms,
/// priority; absent ones omitted). Timestamps and delays print as integers when integral.
Json workload_row_to_json(const WorkloadRow& row);

/// The error for a workload input that gave zero usable rows (issue 21.8, exit 3): what was
/// expected (Mooncake JSONL or Dynamo trace records), what the first file looks like when that
/// explains it (CSV, a JSON document) and the command that converts it.
std::string no_workload_rows_message(const std::vector<std::string>& paths);

}  // namespace dyn::records
