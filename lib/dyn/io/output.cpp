// Output implementation over write(2), so EPIPE is seen directly (SIGPIPE is ignored).
#include "dyn/io/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "dyn/base/error.h"

namespace dyn::io {

namespace {
constexpr size_t kBlock = 1 << 18;
bool g_line_buffered = false;
std::unique_ptr<Output> g_stdout;
}  // namespace

Output::Output(const std::string& path, bool line_buffered) {
  if (path.empty() || path == "-") {
    fd_ = 1;
    tty_ = isatty(1);
  } else {
    path_ = path;
    tmp_ = path + ".tmp." + std::to_string(getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Fatal(kExitIo, tmp_ + ": cannot create: " + std::strerror(errno));
  }
  line_mode_ = line_buffered || tty_;
  buf_.reserve(kBlock);
}

Output::~Output() {
  if (!closed_ && !path_.empty()) {
    // Destroyed without close(): an error path. Leave no partial file behind.
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void Output::raw_write(const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) {
        buf_.clear();
        throw BrokenPipe{};
      }
      throw Fatal(kExitIo, (path_.empty() ? std::string("<stdout>") : path_) +
                               ": write error: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void Output::write(std::string_view s) {
  buf_.append(s);
  if (buf_.size() >= kBlock) flush();
}

void Output::line(std::string_view s) {
  buf_.append(s);
  buf_.push_back('\n');
  if (line_mode_ || buf_.size() >= kBlock) flush();
}

void Output::flush() {
  if (buf_.empty()) return;
  std::string pending;
  pending.swap(buf_);
  buf_.reserve(kBlock);
  raw_write(pending.data(), pending.size());
}

void Output::close() {
  if (closed_) return;
  flush();
  closed_ = true;
  if (!path_.empty()) {
    if (::close(fd_) != 0) throw Fatal(kExitIo, tmp_ + ": close failed: " + std::strerror(errno));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Fatal(kExitIo, path_ + ": cannot rename into place: " + std::strerror(errno));
  }
}

Output& stdout_output() {
  if (!g_stdout) g_stdout = std::make_unique<Output>("-", g_line_buffered);
  return *g_stdout;
}

void set_stdout_line_buffered(bool on) { g_line_buffered = on; }

}  // namespace dyn::io
