// Server-sent events (WHATWG EventSource framing) as a pure byte-stream parser: no I/O, no JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dyn::http {

/// One dispatched SSE event. `data` joins the event's `data:` lines with '\n' (no trailing
/// newline). `first_byte_ms` is the arrival time (as passed to SseParser::feed) of the read that
/// held the first byte of the event's first field line — the stamp SPEC 6.3 asks for, taken
/// before any JSON parsing. Comment lines (`:`) never start an event, so keep-alive pings do not
/// move the stamp.
struct SseEvent {
  std::string event;  ///< `event:` field; empty = "message"
  std::string data;
  std::string id;
  double first_byte_ms = 0;
};

/// Incremental SSE parser (SPEC 6.3; WHATWG HTML "event stream interpretation").
/// Feed the bytes exactly as they arrive; events may be split anywhere, including inside a
/// UTF-8 character or between CR and LF (bytes are kept as bytes until an event is complete).
/// Line ends: CRLF, LF or CR. `field:value` drops one leading space of the value (`data:x` and
/// `data: x` are the same); a line without a colon is a field with an empty value; `:` lines are
/// comments; unknown fields are ignored; an event is dispatched on a blank line when it has data.
/// Not thread-safe (one parser per stream).
class SseParser {
 public:
  /// Appends every event completed by `bytes` to `out`. `now_ms`: when these bytes arrived.
  void feed(std::string_view bytes, double now_ms, std::vector<SseEvent>& out);
  /// End of stream. An event whose lines all ended but whose closing blank line never came is
  /// dispatched to `out` (servers that close right after `data: [DONE]\n` are common; WHATWG
  /// would drop it, which loses the final chunk). Returns false when the stream stopped inside a
  /// line (bytes without a line end: a cut stream, whose partial line is discarded), else true.
  bool finish(std::vector<SseEvent>& out);
  /// Bytes fed so far.
  uint64_t bytes() const { return bytes_; }
  /// Comment lines seen so far.
  uint64_t comments() const { return comments_; }

 private:
  void line_done(std::vector<SseEvent>& out);

  std::string line_;          // the unfinished line
  double line_start_ms_ = 0;  // arrival of its first byte
  bool in_line_ = false;      // a line has started (possibly empty so far)
  bool after_cr_ = false;     // last byte was CR: a following LF belongs to the same line end
  SseEvent cur_;
  bool cur_has_data_ = false;
  bool cur_started_ = false;  // a field line of the current event has been seen
  uint64_t bytes_ = 0, comments_ = 0;
};

}  // namespace dyn::http
