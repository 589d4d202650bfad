// Reads lines from "-"/stdin and files in order; gzip by magic bytes, multi-member, truncated tails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct inflate_state;  // <isa-l/igzip_lib.h>

namespace dyn::io {

/// One line of input. `text` excludes the newline and a trailing '\r' (CRLF files); it stays
/// valid only until the next call to LineReader::next(). `number` is 1-based within `file`.
struct Line {
  std::string_view text;
  const std::string* file = nullptr;
  uint64_t number = 0;
  /// "file:line" for diagnostics.
  std::string where() const;
};

struct LineReaderOptions {
  /// Treat a truncated gzip stream as a fatal error (Fatal, exit 3) instead of a warning.
  bool strict = false;
  /// Longest line accepted, in bytes (0 = no limit). A longer line is skipped in constant memory
  /// with a warning "file:line: line longer than N bytes skipped" and counted (long_lines()); the
  /// lines after it still flow. 64 MiB is far above any real trace row (a 1M-token request's
  /// hash list is ~300 KB).
  uint64_t max_line_bytes = uint64_t{64} << 20;
  /// Print nothing (counts unchanged): a second pass over input whose first pass reported.
  bool quiet = false;
};

/// Streams lines from a list of paths ("-" = stdin; an empty list means stdin), one file after
/// another, in constant memory (SPEC 5.2 readers).
/// - Gzip is detected by the magic bytes 1f 8b, never by the file name.
/// - Multi-member gzip (concatenated segments, one member per flush) is decoded whole: inflate is
///   reset at each member end while input remains; trailing zero padding is ignored.
/// - A truncated gzip stream yields every complete line; the partial last line is dropped and a
///   warning names the file, the complete lines recovered and the bytes lost.
/// - A plain file whose last line lacks a newline still yields that line.
/// - A UTF-8 BOM before a file's first line is skipped (counted in boms(); case 42).
/// - A run configuration written beside a trace (PATH ending in .run-config.json) is skipped with a
///   note; when every path is one, the constructor throws Fatal(kExitBadData): nothing to read.
/// Errors: an unreadable file throws Fatal(kExitIo). Not thread-safe.
class LineReader {
 public:
  explicit LineReader(std::vector<std::string> paths, LineReaderOptions options = {});
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Next line, or false at the end of the last file.
  bool next(Line& line);

  /// Display names of inputs ("<stdin>" for "-").
  const std::vector<std::string>& files() const { return names_; }
  /// Number of files whose gzip stream was truncated.
  uint64_t truncated_files() const { return truncated_; }
  /// Number of lines skipped for exceeding max_line_bytes.
  uint64_t long_lines() const { return long_lines_; }
  /// Number of files whose UTF-8 byte order mark was skipped.
  uint64_t boms() const { return boms_; }

 private:
  bool open_next();
  bool fill();          // appends decoded bytes to buf_; false at end of current file
  void start_member();  // a gzip member begins: fresh inflate state
  void close_current();
  void report_long_line();
  std::string_view strip_bom(std::string_view text);

  std::vector<std::string> paths_;
  std::vector<std::string> names_;
  LineReaderOptions opts_;
  size_t index_ = 0;
  int fd_ = -1;
  bool open_ = false;
  bool gzip_ = false;
  bool eof_raw_ = false;
  bool member_done_ = true;
  // ISA-L's inflate state (about 100 KB, so on the heap), made for the first gzip file.
  std::unique_ptr<inflate_state> z_;
  std::vector<char> raw_;
  size_t raw_pos_ = 0, raw_len_ = 0;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  uint64_t line_no_ = 0;
  uint64_t truncated_ = 0;
  uint64_t long_lines_ = 0;
  uint64_t boms_ = 0;
  const std::string* cur_name_ = nullptr;
};

}  // namespace dyn::io
