// Buffered stdout / -o FILE output: line or block buffering, quiet exit on a closed pipe,
// write-to-temporary-then-rename for files.
#pragma once

#include <string>
#include <string_view>

namespace dyn::io {

/// Thrown when the reader of stdout has gone away (EPIPE); run_tool turns it into a quiet exit 0.
struct BrokenPipe {};

/// Where a tool writes its data. Path "-" (or empty) = stdout. A path naming something that is not
/// a regular file (a device such as /dev/null, a FIFO, a process substitution /dev/fd/N) is
/// written in place. Otherwise the data goes to a temporary file beside the real target (a
/// symlink is followed and stays a symlink), renamed over it by close(), so a failed run never
/// leaves half a file; SIGINT/SIGTERM/SIGHUP (when not ignored or handled by the tool) remove the
/// temporary file before the process dies of the signal (issue 21.1).
/// Line-buffered when `line_buffered` or stdout is a terminal; otherwise 256 KiB blocks.
/// Errors: EPIPE throws BrokenPipe; other write errors throw Fatal(kExitIo). Not thread-safe.
class Output {
 public:
  explicit Output(const std::string& path = "-", bool line_buffered = false);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void write(std::string_view s);
  /// Writes s and '\n'; flushes in line-buffered mode.
  void line(std::string_view s);
  void flush();
  /// Flushes, closes, and renames the temporary file into place (idempotent).
  void close();
  bool is_terminal() const { return tty_; }

 private:
  void raw_write(const char* p, size_t n);
  std::string path_, target_, tmp_;
  int fd_ = 1;
  int slot_ = -1;        ///< the temporary file's slot in the signal handler's list
  bool direct_ = false;  ///< written in place (not a regular file)
  bool line_mode_ = false;
  bool tty_ = false;
  bool closed_ = false;
  std::string buf_;
};

/// The process's stdout Output, created on first use with the global line-buffering setting.
/// run_tool flushes and closes it at exit.
Output& stdout_output();
/// Sets --line-buffered for stdout_output() (call before first use).
void set_stdout_line_buffered(bool on);

}  // namespace dyn::io
