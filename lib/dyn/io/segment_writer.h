// Trace file writer (SPEC 5.2): gzip segments <prefix>.NNNNNN.jsonl.gz, one complete gzip member
// per flush, rolled by uncompressed bytes or lines; or a single plain JSONL file.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace dyn::io {

/// Defaults of SPEC 5.2; the tools set them from flags and the DYN_REQUEST_TRACE_FILE_* variables
/// named beside each field (cmd/common/frontend_flags.h).
struct SegmentWriterOptions {
  std::string prefix = "/tmp/dynamo-request-trace";  ///< DYN_REQUEST_TRACE_FILE_PATH
  bool gzip = true;                                  ///< DYN_REQUEST_TRACE_FILE_FORMAT: gzip (default) | jsonl
  uint64_t flush_interval_ms = 1000;                 ///< DYN_REQUEST_TRACE_FILE_FLUSH_INTERVAL_MS
  uint64_t buffer_bytes = 1 << 20;                   ///< DYN_REQUEST_TRACE_FILE_BUFFER_BYTES
  uint64_t roll_bytes = 268435456;                   ///< DYN_REQUEST_TRACE_FILE_ROLL_BYTES (uncompressed)
  uint64_t roll_lines = 0;                           ///< DYN_REQUEST_TRACE_FILE_ROLL_LINES (0 = no limit)
  /// Live servers: a failed write (disk full, I/O error) drops the buffered rows instead of
  /// throwing, so the server keeps serving; the outage and the rows lost are reported on stderr.
  bool drop_on_error = false;
};

/// Appends lines to trace files. Each flush writes the buffered lines as one complete gzip
/// member appended to the current segment, so a crash loses at most the unflushed interval and
/// every earlier member stays readable. New segments continue after existing ones (the first
/// index is one past the highest existing <prefix>.NNNNNN.jsonl.gz). With a flush_interval_ms, a
/// row written an interval or more after the row before it is flushed at once, and rows written
/// closer together wait, an interval after the last flush at most, for a background thread that
/// sleeps while none wait (SPEC 5.2). Thread-safe: write_line may be called from any thread.
/// A failed write never leaves a partial gzip member behind: the file is cut back to its last
/// complete member, so every segment stays readable (`gzip -t`) after a disk-full episode.
/// Errors: failure to open or write a segment throws Fatal(kExitIo) from the calling thread
/// (background flush errors are reported on stderr and retried at the next flush); with
/// drop_on_error the rows of a failed write are dropped and counted instead (dropped_rows()),
/// one error line per outage and a note when writes succeed again.
class SegmentWriter {
 public:
  explicit SegmentWriter(SegmentWriterOptions options);
  ~SegmentWriter();  ///< flushes and stops the flusher (close()).
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  /// Buffers one line (no newline inside `line`); flushes when the buffer passes buffer_bytes, or
  /// when the line before it came flush_interval_ms ago or more.
  void write_line(const std::string& line);
  void flush();
  /// Flushes and stops the background thread. Idempotent.
  void close();
  /// Path of the segment currently written (or the plain file).
  std::string current_path() const;
  /// Rows dropped by failed writes (drop_on_error only).
  uint64_t dropped_rows() const;

 private:
  /// Writes the buffered lines; `lk` holds mu_ and is released while they are compressed.
  void flush_locked(std::unique_lock<std::mutex>& lk);
  void open_segment_locked();
  std::string segment_path(uint64_t index) const;
  std::chrono::milliseconds interval() const { return std::chrono::milliseconds(opts_.flush_interval_ms); }

  SegmentWriterOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable turn_;      ///< a taken batch waits for the earlier ones to be written
  uint64_t taken_ = 0, written_ = 0;  ///< batches taken from buf_ / written (or dropped)
  std::string buf_;
  uint64_t buf_lines_ = 0;
  std::chrono::steady_clock::time_point flushed_at_{};   ///< last batch taken
  std::chrono::steady_clock::time_point last_row_at_{};  ///< last write_line (the epoch: none yet)
  uint64_t seg_index_ = 0;
  uint64_t seg_bytes_ = 0, seg_lines_ = 0;
  int fd_ = -1;
  bool stop_ = false;
  bool closed_ = false;
  bool roll_pending_ = false;  ///< the next segment is opened at its first write
  bool failing_ = false;       ///< inside a write outage (drop_on_error)
  uint64_t dropped_ = 0;
  uint64_t dropped_in_outage_ = 0;
  std::thread flusher_;
};

/// Compresses `data` (up to 4 GiB) into one complete gzip member (header, deflate data, trailer),
/// at ISA-L's level 1. Errors: the compressor fails -> Fatal (kExitIo).
std::string gzip_member(const std::string& data);

}  // namespace dyn::io
