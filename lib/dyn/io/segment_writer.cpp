// SegmentWriter implementation.
#include "dyn/io/segment_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <isa-l/igzip_lib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"

namespace dyn::io {

std::string gzip_member(const std::string& data) {
  // ISA-L's level 1 (the library line_reader already inflates with): about a tenth of zlib
  // level 6's instructions for a few percent larger files. Issue 16: at level 6 the request
  // trace's compression was 12 % of dyn-route serve's instructions.
  std::vector<uint8_t> level_buf(ISAL_DEF_LVL1_DEFAULT);
  isal_zstream z;
  isal_deflate_init(&z);
  z.level = 1;
  z.level_buf = level_buf.data();
  z.level_buf_size = static_cast<uint32_t>(level_buf.size());
  z.gzip_flag = IGZIP_GZIP;
  z.end_of_stream = 1;
  z.flush = NO_FLUSH;
  z.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uint32_t>(data.size());
  std::string out;
  out.resize(data.size() + data.size() / 16 + 1024);  // stored blocks' worst case, with room
  size_t used = 0;
  for (;;) {
    z.next_out = reinterpret_cast<uint8_t*>(out.data() + used);
    z.avail_out = static_cast<uint32_t>(out.size() - used);
    if (isal_deflate(&z) != COMP_OK) throw Fatal(kExitIo, "gzip compression (ISA-L) failed");
    used = out.size() - z.avail_out;
    if (z.internal_state.state == ZSTATE_END) break;
    out.resize(out.size() * 2);
  }
  out.resize(used);
  return out;
}

SegmentWriter::SegmentWriter(SegmentWriterOptions options) : opts_(std::move(options)) {
  if (opts_.gzip) {
    // Continue after the highest existing segment of this prefix.
    std::string dir = ".", base = opts_.prefix;
    if (auto slash = opts_.prefix.rfind('/'); slash != std::string::npos) {
      dir = slash == 0 ? "/" : opts_.prefix.substr(0, slash);
      base = opts_.prefix.substr(slash + 1);
    }
    uint64_t next = 0;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        const std::string suffix = ".jsonl.gz";
        if (n.size() == base.size() + 1 + 6 + suffix.size() && n.compare(0, base.size(), base) == 0 &&
            n[base.size()] == '.' && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
          std::string digits = n.substr(base.size() + 1, 6);
          if (digits.find_first_not_of("0123456789") == std::string::npos)
            next = std::max<uint64_t>(next, std::stoull(digits) + 1);
        }
      }
      closedir(d);
    }
    seg_index_ = next;
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_segment_locked();
  if (opts_.flush_interval_ms > 0) {
    // The flusher sleeps while nothing waits in the buffer (write_line wakes it when a row
    // stays there) and otherwise until the last flush is an interval old. It used to wake
    // every interval, idle or not: at one agent request a second on this VM about 0.46 ms of CPU
    // a request, a fourteenth of the router's (issue 54).
    flusher_ = std::thread([this] {
      std::unique_lock<std::mutex> lk(mu_);
      while (!stop_) {
        if (buf_.empty()) {
          cv_.wait(lk, [&] { return stop_ || !buf_.empty(); });
          continue;
        }
        if (cv_.wait_until(lk, flushed_at_ + interval(), [&] { return stop_ || buf_.empty(); })) continue;
        try {
          flush_locked(lk);
        } catch (const std::exception& e) {
          diag::warning("trace writer", e.what());
        }
      }
    });
  }
}

SegmentWriter::~SegmentWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    diag::error("trace writer", e.what());
  }
}

std::string SegmentWriter::segment_path(uint64_t index) const {
  if (!opts_.gzip) return opts_.prefix;
  char digits[16];
  std::snprintf(digits, sizeof digits, "%06llu", static_cast<unsigned long long>(index));
  return opts_.prefix + "." + digits + ".jsonl.gz";
}

std::string SegmentWriter::current_path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_path(seg_index_);
}

void SegmentWriter::open_segment_locked() {
  if (fd_ >= 0) ::close(fd_);
  std::string path = segment_path(seg_index_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Fatal(kExitIo, path + ": cannot open trace file: " + std::strerror(errno));
  seg_bytes_ = seg_lines_ = 0;
}

void SegmentWriter::write_line(const std::string& line) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  const bool was_empty = buf_.empty();
  buf_.append(line);
  buf_.push_back('\n');
  ++buf_lines_;
  bool roll = (opts_.roll_bytes && seg_bytes_ + buf_.size() >= opts_.roll_bytes) ||
              (opts_.roll_lines && seg_lines_ + buf_lines_ >= opts_.roll_lines);
  // A row that comes an interval or more after the row before it is written now, by the thread
  // that wrote it (awake anyway): at low rates every row reaches the file at once and the
  // flusher never wakes. Rows closer together wait for the flusher (which compresses them off
  // the writers' threads), an interval after the last flush at most, or for a full buffer.
  const auto now = std::chrono::steady_clock::now();
  const bool due = opts_.flush_interval_ms > 0 && now - last_row_at_ >= interval();
  last_row_at_ = now;
  if (buf_.size() >= opts_.buffer_bytes || roll || due) return flush_locked(lock);
  if (was_empty && opts_.flush_interval_ms > 0) cv_.notify_one();
}

void SegmentWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  flush_locked(lock);
}

void SegmentWriter::flush_locked(std::unique_lock<std::mutex>& lk) {
  if (buf_.empty()) return;
  // The batch is taken now and compressed without the lock: write_line callers (a server's
  // event loop, serving every connection) must never wait for a compression (issue 16: a 1 s
  // batch at gzip level 6 stalled every stream for tens of ms). Batches reach the file in the
  // order they were taken.
  flushed_at_ = std::chrono::steady_clock::now();
  std::string batch = std::move(buf_);
  const size_t batch_size = batch.size();
  const uint64_t lines = buf_lines_;
  buf_.clear();
  buf_lines_ = 0;
  const uint64_t seq = taken_++;
  std::string payload;
  std::exception_ptr failed;
  if (opts_.gzip) {
    lk.unlock();
    try {
      payload = gzip_member(batch);
    } catch (...) {
      failed = std::current_exception();
    }
    lk.lock();
  } else {
    payload = std::move(batch);
  }
  turn_.wait(lk, [&] { return written_ == seq; });
  struct Next {  // the next batch's turn comes however this one ends
    SegmentWriter& w;
    ~Next() {
      ++w.written_;
      w.turn_.notify_all();
    }
  } next{*this};
  if (failed) std::rethrow_exception(failed);
  if (fd_ < 0 && roll_pending_) {
    // The next segment is created only when it gets data, so a roll never leaves an empty file.
    try {
      open_segment_locked();
      roll_pending_ = false;
    } catch (const Fatal& e) {
      if (!opts_.drop_on_error) throw;
      diag::error("trace writer", e.what());
      // Keep appending to the previous segment rather than losing rows.
      --seg_index_;
      roll_pending_ = false;
      fd_ = ::open(segment_path(seg_index_).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    }
  }
  if (fd_ < 0) return;
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  const char* p = payload.data();
  size_t n = payload.size();
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Cut the file back to its last complete member (or line): a partial gzip member in the
      // middle of a segment would make everything after it unreadable.
      if (start >= 0 && ::ftruncate(fd_, start) != 0) {
        // Nothing better to do: the reader's truncated-tail handling recovers the earlier rows.
      }
      std::string what = segment_path(seg_index_) + ": write failed: " + std::strerror(err);
      if (!opts_.drop_on_error) throw Fatal(kExitIo, what);
      dropped_ += lines;
      dropped_in_outage_ += lines;
      if (!failing_) {
        failing_ = true;
        diag::error("trace writer", what + "; dropping trace rows until writes succeed again");
      }
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (failing_) {
    failing_ = false;
    diag::note("trace writer: " + segment_path(seg_index_) + ": writes succeed again; " +
               std::to_string(dropped_in_outage_) + " trace rows were dropped");
    dropped_in_outage_ = 0;
  }
  seg_bytes_ += batch_size;
  seg_lines_ += lines;
  if (opts_.gzip &&
      ((opts_.roll_bytes && seg_bytes_ >= opts_.roll_bytes) || (opts_.roll_lines && seg_lines_ >= opts_.roll_lines))) {
    ++seg_index_;
    ::close(fd_);
    fd_ = -1;
    roll_pending_ = true;
  }
}

uint64_t SegmentWriter::dropped_rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void SegmentWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;  // first: lines written while the last batch is compressed would be lost
  flush_locked(lock);
  // A segment that never got a row (no traffic) would not pass gzip -t: remove it.
  if (fd_ >= 0 && opts_.gzip && seg_bytes_ == 0 && ::lseek(fd_, 0, SEEK_END) == 0)
    ::unlink(segment_path(seg_index_).c_str());
  if (dropped_ > 0) diag::error("trace writer", std::to_string(dropped_) + " trace rows were dropped by failed writes");
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace dyn::io
