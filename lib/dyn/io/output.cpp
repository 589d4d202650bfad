// Output implementation over write(2), so EPIPE is seen directly (SIGPIPE is ignored).
#include "dyn/io/output.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "dyn/base/error.h"

namespace dyn::io {

namespace {
constexpr size_t kBlock = 1 << 18;
bool g_line_buffered = false;
std::unique_ptr<Output> g_stdout;

// Temporary files being written, for the signal handler to remove (issue 21.1: Ctrl-C must leave
// no F.tmp.PID). Fixed slots of fixed-size paths: a handler may not allocate or lock.
constexpr int kSlots = 8;
char g_tmp_paths[kSlots][PATH_MAX];
std::atomic<bool> g_tmp_used[kSlots];

extern "C" void remove_temps_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_tmp_used[i].load()) ::unlink(g_tmp_paths[i]);
  // Die of the same signal (the shell reports 128 + sig, e.g. 130 for SIGINT).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Installs remove_temps_and_die for the terminating signals whose disposition is still the
/// default: an ignored signal (nohup, a background job) stays ignored, and a tool that handles
/// or sigwait()s signals itself (dyn-replay's live run, the servers) keeps its own handling.
void install_temp_cleanup() {
  static bool done = false;
  if (done) return;
  done = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction cur {};
    if (::sigaction(sig, nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_die;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

int register_temp(const std::string& tmp) {
  if (tmp.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    if (g_tmp_used[i].load()) continue;
    std::memcpy(g_tmp_paths[i], tmp.c_str(), tmp.size() + 1);
    g_tmp_used[i].store(true);
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_tmp_used[slot].store(false);
}

/// Where the data of `path` really lives: a symlink is followed (a dangling one to the file it
/// names), so the temporary file is made beside the target and renamed onto it, keeping the link.
std::string resolve_target(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) return p;
    std::string target(buf, static_cast<size_t>(n));
    if (!target.empty() && target[0] != '/') {
      size_t slash = p.rfind('/');
      if (slash != std::string::npos) target = p.substr(0, slash + 1) + target;
    }
    p = target;
  }
  return p;
}
}  // namespace

Output::Output(const std::string& path, bool line_buffered) {
  if (path.empty() || path == "-") {
    fd_ = 1;
    tty_ = isatty(1);
  } else {
    path_ = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      // A device (/dev/null, /dev/stdout), FIFO or process substitution (/dev/fd/63): written in
      // place. Replacing it with a regular file would break it (for root, /dev/null itself).
      if (S_ISDIR(st.st_mode)) throw Fatal(kExitIo, path + ": is a directory");
      fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) throw Fatal(kExitIo, path + ": cannot open for writing: " + std::strerror(errno));
      direct_ = true;
    } else {
      // A regular file (or none yet): a temporary beside the real target, renamed over it by
      // close(), so a failed or interrupted run never leaves half a file.
      target_ = resolve_target(path);
      tmp_ = target_ + ".tmp." + std::to_string(getpid());
      install_temp_cleanup();
      slot_ = register_temp(tmp_);
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        unregister_temp(slot_);
        // Named by the file the user asked for: the temporary is an implementation detail.
        throw Fatal(kExitIo, path + ": cannot create: " + std::strerror(errno));
      }
    }
  }
  line_mode_ = line_buffered || tty_;
  buf_.reserve(kBlock);
}

Output::~Output() {
  if (!closed_ && !path_.empty()) {
    // Destroyed without close(): an error path. Leave no partial file behind.
    ::close(fd_);
    if (!direct_) ::unlink(tmp_.c_str());
    unregister_temp(slot_);
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
      throw Fatal(kExitIo,
                  (path_.empty() ? std::string("<stdout>") : path_) + ": write error: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The buffer is written before a piece that would overflow it, and written from in place: one
// kBlock allocation for the whole run. (Appending first and swapping in a fresh buffer per flush
// grew it to twice kBlock, copied a block and faulted in new pages at every flush: a fifth of
// dyn-route decide's page faults, issue 17.)
void Output::write(std::string_view s) {
  if (buf_.size() + s.size() > kBlock) flush();
  buf_.append(s);
  if (buf_.size() >= kBlock) flush();
}

void Output::line(std::string_view s) {
  if (buf_.size() + s.size() + 1 > kBlock) flush();
  buf_.append(s);
  buf_.push_back('\n');
  if (line_mode_ || buf_.size() >= kBlock) flush();
}

void Output::flush() {
  if (buf_.empty()) return;
  // Emptied however the write ends, so an error never writes the same bytes twice at close().
  struct Clear {
    std::string& b;
    ~Clear() { b.clear(); }
  } clear{buf_};
  raw_write(buf_.data(), buf_.size());
}

void Output::close() {
  if (closed_) return;
  flush();
  closed_ = true;
  if (!path_.empty()) {
    if (direct_) {
      if (::close(fd_) != 0) throw Fatal(kExitIo, path_ + ": close failed: " + std::strerror(errno));
      return;
    }
    int rc = ::close(fd_);
    if (rc == 0) rc = ::rename(tmp_.c_str(), target_.c_str());
    int err = errno;
    if (rc != 0) ::unlink(tmp_.c_str());
    unregister_temp(slot_);
    if (rc != 0) throw Fatal(kExitIo, path_ + ": cannot write into place: " + std::strerror(err));
  }
}

Output& stdout_output() {
  if (!g_stdout) g_stdout = std::make_unique<Output>("-", g_line_buffered);
  return *g_stdout;
}

void set_stdout_line_buffered(bool on) { g_line_buffered = on; }

}  // namespace dyn::io
