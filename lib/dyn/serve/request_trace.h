// The request trace (SPEC 5.2): a request_end row per finished exchange, into gzip segments or
// one JSONL file, with the run configuration beside them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/io/segment_writer.h"
#include "dyn/records/rows.h"
#include "dyn/serve/exchange.h"

namespace dyn::serve {

/// Writes the rows of one frontend. Off until open(); write_end() may then be called from any
/// thread until close().
class RequestTrace {
 public:
  /// `block_size`: the replay block's (SPEC 4.1); `routed`: rows carry dyn.worker (serve mode);
  /// `policy_classes`: the router queue's classes, named in the rows of requests it held (null
  /// in capture mode).
  RequestTrace(const Clock& clock, uint32_t block_size, bool routed,
               const std::vector<route::PolicyClass>* policy_classes = nullptr)
      : clock_(clock), block_size_(block_size), routed_(routed), policy_classes_(policy_classes) {}

  /// An error (exit 4) when the folder of `prefix` cannot be written: checked before the server
  /// says it is listening, not at the first row.
  static std::optional<Error> check_folder(const std::string& prefix);
  /// Starts tracing: rows are written from now on (a full disk drops and counts them instead of
  /// stopping the proxy). A non-null `run_config` is written to `<prefix>.run-config.json`
  /// (replacing the previous run's; a warning when it cannot be).
  void open(const io::SegmentWriterOptions& file, const Json& run_config);
  bool on() const { return writer_ != nullptr; }
  /// The request_end row of a finished exchange (records::append_request_end). `out` is null
  /// for a request the frontend answered itself; `err_type` "" = success. Invalid UTF-8 in a
  /// header or message becomes U+FFFD: a stray byte must never cost the row.
  void write_end(const Exchange& ex, const http::ProxyOutcome* out, int status, const std::string& err_type,
                 const std::string& err_msg);
  /// Another row (a route_decision of the decision log) through the same writer.
  void write_line(const std::string& line) { writer_->write_line(line); }
  /// A harness tool event's row (records::append_tool_event with the router's join), from any
  /// thread while on().
  void write_tool_event(const records::ToolEvent& e, const records::ToolEventJoin& join);
  /// Flushes and closes the trace.
  void close();
  /// Rows lost to failed writes; nullopt while tracing is off.
  std::optional<uint64_t> dropped_rows() const;

 private:
  std::string request_end_row(const Exchange& ex, const http::ProxyOutcome* out, int status,
                              const std::string& err_type, const std::string& err_msg) const;

  const Clock& clock_;
  uint32_t block_size_;
  bool routed_;
  const std::vector<route::PolicyClass>* policy_classes_;
  std::unique_ptr<io::SegmentWriter> writer_;
};

}  // namespace dyn::serve
