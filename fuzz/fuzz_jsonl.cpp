// Fuzz target: LineReader (plain and gzip: multi-member, zero padding, truncated tails) and
// JsonlReader (both the nlohmann and the simdjson fast path), reading real files (memfd).
// Input: one flags byte, then the payload. Flags: bit0 gzip the payload here (so the fuzzer
// explores the line logic under compression; without it the payload is read as is, gzip seeds
// included), bit1 two gzip members, bit2 zero padding between members, bit3 cut the compressed
// tail, bit4 split the payload over two files, bit5 strict mode, bits 6-7 where to split.
// Properties checked: plain input yields exactly its lines (LF or CRLF, last line without newline
// kept), numbered from 1 in each file; gzip input yields the same lines, a truncated one a prefix
// of them with truncated_files() counted (strict mode: Fatal exit 3); JsonlReader accounts for
// every non-blank line as a row or a malformed row, on both paths.
#include <simdjson.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/io/jsonl.h"
#include "dyn/io/line_reader.h"
#include "fuzz_util.h"

using dyn::fuzz::MemFile;

namespace {

std::string gzip(std::string_view in) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

bool gzip_magic(std::string_view f) {
  return f.size() >= 2 && static_cast<unsigned char>(f[0]) == 0x1f && static_cast<unsigned char>(f[1]) == 0x8b;
}

// The lines a correct reader yields for plain bytes.
std::vector<std::string> expected_lines(std::string_view s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    std::string_view l = s.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    // The reader skips a UTF-8 BOM before each file's first line (case 42).
    if (out.empty() && l.substr(0, 3) == "\xEF\xBB\xBF") l.remove_prefix(3);
    out.emplace_back(l);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return out;
}

struct ReadResult {
  std::vector<std::string> lines;
  uint64_t truncated = 0;
  bool fatal = false;
};

ReadResult read_lines(const std::vector<std::string>& paths, bool strict) {
  ReadResult r;
  dyn::io::LineReader reader(paths, {.strict = strict});
  dyn::io::Line line;
  const std::string* file = nullptr;
  uint64_t expect_no = 0;
  try {
    while (reader.next(line)) {
      if (line.file != file) file = line.file, expect_no = 0;
      FUZZ_CHECK(line.number == ++expect_no);
      r.lines.emplace_back(line.text);
    }
  } catch (const dyn::Fatal& f) {
    FUZZ_CHECK(strict && f.exit_code() == dyn::kExitBadData);
    r.fatal = true;
  }
  r.truncated = reader.truncated_files();
  return r;
}

bool blank(std::string_view l) { return l.find_first_not_of(" \t") == std::string_view::npos; }

void check_jsonl(const std::vector<std::string>& paths, const ReadResult& lines, bool strict) {
  uint64_t nonblank = 0;
  for (auto& l : lines.lines) nonblank += !blank(l);
  for (int fast = 0; fast < 2; ++fast) {
    dyn::io::JsonlOptions opts;
    opts.lines.strict = strict;
    opts.max_reports = 0;
    dyn::io::JsonlReader reader(paths, opts);
    dyn::Json row;
    simdjson::dom::object obj;
    std::string where;
    try {
      while (fast ? reader.next_dom(obj, &where) : reader.next(row, &where)) {
        FUZZ_CHECK(!where.empty());
        if (!fast) FUZZ_CHECK(row.is_object());
      }
    } catch (const dyn::Fatal& f) {
      FUZZ_CHECK(lines.fatal && f.exit_code() == dyn::kExitBadData);
    }
    if (!lines.fatal) FUZZ_CHECK(reader.rows() + reader.malformed() == nonblank);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view payload = dyn::fuzz::as_view(data + 1, size - 1);
  const bool wrap = flags & 1, two_members = flags & 2, padding = flags & 4, cut = flags & 8;
  const bool two_files = flags & 16, strict = flags & 32;
  const size_t split = payload.size() * (flags >> 6) / 4;

  std::vector<std::string> files;
  if (two_files) files = {std::string(payload.substr(0, split)), std::string(payload.substr(split))};
  else files = {std::string(payload)};
  std::vector<std::string> plain = files;  // what each file decodes to
  size_t cut_bytes = 0;
  if (wrap) {
    for (auto& f : files) {
      std::string z;
      if (two_members) {
        size_t half = f.size() / 2;
        z = gzip(std::string_view(f).substr(0, half));
        if (padding) z.append(1 + f.size() % 5, '\0');
        z += gzip(std::string_view(f).substr(half));
      } else {
        z = gzip(f);
      }
      if (cut) {
        cut_bytes = 1 + payload.size() % 24;
        z.resize(z.size() > cut_bytes ? z.size() - cut_bytes : 0);
      }
      f = std::move(z);
    }
  }

  std::vector<std::unique_ptr<MemFile>> mem;
  std::vector<std::string> paths;
  for (auto& f : files) {
    mem.push_back(std::make_unique<MemFile>(f));
    paths.push_back(mem.back()->path());
  }
  ReadResult got = read_lines(paths, strict);

  bool raw_gzip = false;
  for (auto& f : plain) raw_gzip |= !wrap && gzip_magic(f);
  if (!raw_gzip) {
    std::vector<std::string> want;
    for (auto& f : plain) {
      auto l = expected_lines(f);
      want.insert(want.end(), l.begin(), l.end());
    }
    if (!wrap || !cut) {
      FUZZ_CHECK(!got.fatal && got.truncated == 0);
      FUZZ_CHECK(got.lines == want);
    } else {
      // A cut stream: complete lines only, in order (a prefix, per file, of what was written).
      FUZZ_CHECK(got.lines.size() <= want.size());
      // A cut that removes a whole later member leaves a stream ending on a member boundary,
      // which is indistinguishable from a complete file: its last line may be a partial one.
      if (!two_files)
        for (size_t i = 0; i < got.lines.size(); ++i)
          FUZZ_CHECK(got.lines[i] == want[i] ||
                     (two_members && i + 1 == got.lines.size() && want[i].starts_with(got.lines[i])));
      FUZZ_CHECK(got.truncated <= files.size());
      if (strict && got.truncated == 0) FUZZ_CHECK(!got.fatal);
    }
  }
  check_jsonl(paths, got, strict);
  return 0;
}
