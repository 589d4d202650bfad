// Helpers shared by the fuzz targets: an in-memory file for readers that take paths, and checks
// that abort (a libFuzzer crash) when a property of the code under test does not hold.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dyn::fuzz {

/// A copy of stderr taken before main(): runs use -close_fd_mask=2 to silence the readers'
/// per-row warnings, and a failed check must still say what failed.
inline const int kReportFd = ::dup(2);

/// Aborts with the failed condition: the fuzzer saves the input as a crash.
#define FUZZ_CHECK(cond)                                                                               \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      ::dprintf(::dyn::fuzz::kReportFd, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)

/// An anonymous in-memory file (memfd) holding `bytes`, opened by path "/proc/self/fd/N" so the
/// readers under test go through their real open/read code. Closed on destruction.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes) {
    fd_ = memfd_create("dyn-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (n <= 0) std::abort();
      off += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dyn::fuzz
