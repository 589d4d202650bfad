// LineReader: a hand-rolled buffer over read(2) and ISA-L's inflate, because the readers must
// survive multi-member and truncated gzip (cases 23, 24) and stream at disk speed. ISA-L (Intel's
// storage library, Debian libisal) rather than zlib: on a 200 MB request_end trace zlib's inflate
// and CRC were over half of `dyn-trace filter`'s time (issue 17's profile); ISA-L decodes the same
// gzip about 6x faster (igzip -cd 0.11 s vs gzip -cd 0.72 s) and checks the same CRC-32.
#include "dyn/io/line_reader.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"

namespace dyn::io {

// Read and decode chunk size. The fuzz build (fuzz/CMakeLists.txt) sets a tiny one so that short
// inputs cross refills, buffer compaction and growth, which 256 KiB chunks never reach there.
#ifndef DYN_IO_CHUNK_BYTES
#define DYN_IO_CHUNK_BYTES (1 << 18)
#endif

namespace {
constexpr size_t kRawChunk = DYN_IO_CHUNK_BYTES;
constexpr size_t kOutChunk = DYN_IO_CHUNK_BYTES;

// isal_inflate's error codes in the words zlib used for them (the warnings said these before).
const char* inflate_error(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK: return "invalid block type";
    case ISAL_INVALID_SYMBOL: return "invalid code";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "incorrect data check";
    case ISAL_NEED_DICT: return "need dictionary";
    default: return "inflate error";
  }
}
}  // namespace

void LineReader::start_member() {
  isal_inflate_init(z_.get());
  z_->crc_flag = ISAL_GZIP;  // parse the gzip header, check the trailer's CRC-32 and length
  member_done_ = false;
}

std::string Line::where() const { return (file ? *file : std::string("<input>")) + ":" + std::to_string(number); }

LineReader::LineReader(std::vector<std::string> paths, LineReaderOptions options)
    : paths_(std::move(paths)), opts_(options) {
  if (paths_.empty()) paths_.push_back("-");
  // The run configuration a frontend writes beside its trace (PREFIX.run-config.json) is one
  // indented JSON document, never rows; a glob such as PREFIX* picks it up with the segments, and
  // it would give a malformed-row warning per line. One note instead.
  std::erase_if(paths_, [this](const std::string& p) {
    const std::string_view suffix = ".run-config.json";
    if (p.size() < suffix.size() || p.compare(p.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
    if (!opts_.quiet) diag::note(p + ": the run configuration written beside a trace, not trace rows: skipped");
    return true;
  });
  // Nothing left to read is not an empty run: exit 0 with no rows would hide that the trace
  // segments themselves were not named (a glob that matched only the run configuration).
  if (paths_.empty())
    throw Fatal(kExitBadData,
                "no trace rows to read: every input is a run configuration; name the trace segments "
                "(e.g. PREFIX*.jsonl.gz) or the trace file itself");
  for (auto& p : paths_) names_.push_back(p == "-" ? "<stdin>" : p);
  raw_.resize(kRawChunk);
  buf_.resize(kOutChunk * 2);
}

LineReader::~LineReader() { close_current(); }

void LineReader::close_current() {
  if (fd_ > 0) close(fd_);
  fd_ = -1;
  open_ = false;
}

bool LineReader::open_next() {
  close_current();
  if (index_ >= paths_.size()) return false;
  const std::string& path = paths_[index_];
  cur_name_ = &names_[index_];
  ++index_;
  if (path == "-") {
    fd_ = 0;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Fatal(kExitIo, path + ": cannot open: " + std::strerror(errno));
  }
  open_ = true;
  eof_raw_ = false;
  raw_pos_ = raw_len_ = 0;
  begin_ = end_ = 0;
  line_no_ = 0;
  // Peek the magic bytes.
  while (raw_len_ < 2 && !eof_raw_) {
    ssize_t n = ::read(fd_, raw_.data() + raw_len_, raw_.size() - raw_len_);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Fatal(kExitIo, *cur_name_ + ": read error: " + std::strerror(errno));
    if (n == 0) eof_raw_ = true;
    raw_len_ += static_cast<size_t>(n);
  }
  gzip_ = raw_len_ >= 2 && static_cast<unsigned char>(raw_[0]) == 0x1f && static_cast<unsigned char>(raw_[1]) == 0x8b;
  if (gzip_) {
    if (!z_) z_ = std::make_unique<inflate_state>();
    start_member();
  }
  return true;
}

bool LineReader::fill() {
  // Compact the line buffer and make room.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() - end_ < kOutChunk) buf_.resize(buf_.size() * 2);
  for (;;) {
    if (raw_pos_ >= raw_len_ && !eof_raw_) {
      ssize_t n = ::read(fd_, raw_.data(), raw_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Fatal(kExitIo, *cur_name_ + ": read error: " + std::strerror(errno));
      raw_pos_ = 0;
      raw_len_ = static_cast<size_t>(n);
      if (n == 0) eof_raw_ = true;
    }
    if (!gzip_) {
      if (raw_pos_ >= raw_len_) return false;
      size_t n = std::min(raw_len_ - raw_pos_, buf_.size() - end_);
      std::memcpy(buf_.data() + end_, raw_.data() + raw_pos_, n);
      raw_pos_ += n;
      end_ += n;
      return true;
    }
    if (member_done_) {
      // Between members: skip zero padding; start a new member if more data follows.
      while (raw_pos_ < raw_len_ && raw_[raw_pos_] == 0) ++raw_pos_;
      if (raw_pos_ >= raw_len_) {
        if (eof_raw_) return false;
        continue;
      }
      start_member();
    }
    inflate_state& z = *z_;
    z.next_in = reinterpret_cast<uint8_t*>(raw_.data() + raw_pos_);
    z.avail_in = static_cast<uint32_t>(raw_len_ - raw_pos_);
    z.next_out = reinterpret_cast<uint8_t*>(buf_.data() + end_);
    z.avail_out = static_cast<uint32_t>(buf_.size() - end_);
    const int rc = isal_inflate(&z);
    size_t consumed = (raw_len_ - raw_pos_) - z.avail_in;
    size_t produced = (buf_.size() - end_) - z.avail_out;
    raw_pos_ += consumed;
    end_ += produced;
    const bool member_end = rc == ISAL_DECOMP_OK && z.block_state == ISAL_BLOCK_FINISH;
    if (member_end) {
      // The trailer is read and its CRC-32 and length checked; input after it (the next member,
      // or padding) is left unread in next_in.
      member_done_ = true;
    } else if (rc != ISAL_DECOMP_OK && rc != ISAL_END_INPUT && rc != ISAL_OUT_OVERFLOW) {  // the rest are errors
      ++truncated_;
      std::string msg = std::string("corrupt gzip data (") + inflate_error(rc) + "): recovered " +
                        std::to_string(line_no_) + " complete lines";
      if (opts_.strict) throw Fatal(kExitBadData, *cur_name_ + ": " + msg);
      if (!opts_.quiet) diag::warning(*cur_name_, msg);
      end_ = begin_;
      eof_raw_ = true;
      raw_pos_ = raw_len_;
      member_done_ = true;
      return false;
    }
    if (produced == 0 && !member_end && raw_pos_ >= raw_len_ && eof_raw_) {
      // Input ended inside a member: truncated stream (case 23).
      ++truncated_;
      size_t lost = end_ - begin_;
      std::string msg = "truncated gzip stream (unexpected end of file, no trailer): recovered " +
                        std::to_string(line_no_) + " complete lines, lost " + std::to_string(lost) +
                        " bytes of a partial line";
      if (opts_.strict) throw Fatal(kExitBadData, *cur_name_ + ": " + msg);
      if (!opts_.quiet) diag::warning(*cur_name_, msg);
      end_ = begin_;  // drop the partial line
      member_done_ = true;
      return false;
    }
    if (produced > 0) return true;
  }
}

bool LineReader::next(Line& line) {
  size_t scanned = 0;  // bytes after begin_ already searched for '\n' (fill() keeps them)
  bool skipping = false;
  for (;;) {
    if (!open_) {
      if (!open_next()) return false;
      scanned = 0;
    }
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start + scanned, '\n', end_ - begin_ - scanned);
    if (nl) {
      size_t len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
      ++line_no_;
      if (skipping || (opts_.max_line_bytes && len > opts_.max_line_bytes)) {
        skipping = false;
        scanned = 0;
        report_long_line();
        continue;
      }
      if (len > 0 && start[len - 1] == '\r') --len;
      line.text = strip_bom(std::string_view(start, len));
      line.file = cur_name_;
      line.number = line_no_;
      return true;
    }
    scanned = end_ - begin_;
    if (opts_.max_line_bytes && scanned > opts_.max_line_bytes) {
      // Over the limit: drop what we have and discard up to the next newline in constant memory.
      skipping = true;
      begin_ = end_;
      scanned = 0;
    }
    if (fill()) continue;
    // End of file: a final line without newline still counts (plain files only reach here
    // with data; truncated gzip tails were dropped in fill()).
    if (skipping) {
      skipping = false;
      ++line_no_;
      report_long_line();
    } else if (end_ > begin_) {
      size_t len = end_ - begin_;
      const char* s = buf_.data() + begin_;
      begin_ = end_;
      if (len > 0 && s[len - 1] == '\r') --len;
      ++line_no_;
      line.text = strip_bom(std::string_view(s, len));
      line.file = cur_name_;
      line.number = line_no_;
      return true;
    }
    close_current();
    scanned = 0;
  }
}

std::string_view LineReader::strip_bom(std::string_view text) {
  // A UTF-8 byte order mark (EF BB BF) before a file's first row is an encoding mark that Windows
  // editors, PowerShell and Excel's "CSV UTF-8" write, not data: every tool reads through here,
  // so all skip it alike and row 1 is never lost or misread (case 42). Per file, after gzip.
  if (line_no_ == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") {
    text.remove_prefix(3);
    ++boms_;
  }
  return text;
}

void LineReader::report_long_line() {
  ++long_lines_;
  if (!opts_.quiet)
    diag::warning(*cur_name_ + ":" + std::to_string(line_no_),
                  "line longer than " + std::to_string(opts_.max_line_bytes) + " bytes skipped");
}

}  // namespace dyn::io
