// .npz reading with libzip: each member's .npy header (NumPy format 1.0-3.0) and its raw values.
#include "dyn/engine/npz.h"

#include <zip.h>

#include <bit>
#include <cstring>
#include <memory>
#include <regex>

#include <fmt/format.h>

namespace dyn::engine {
namespace {

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// The header dictionary's three fields, as numpy.lib.format writes them:
// {'descr': '<f8', 'fortran_order': False, 'shape': (17, 3), }
struct Header {
  char order = '<';  // byte order: '<', '>' or '|' (one byte)
  char kind = 'f';   // f, i, u, b
  size_t item = 8;
  bool fortran = false;
  std::vector<size_t> shape;
};

Expected<Header> parse_header(const std::string& h) {
  static const std::regex descr(R"('descr'\s*:\s*'([<>|=])([a-zA-Z])(\d+)')");
  static const std::regex fortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch m;
  Header out;
  if (!std::regex_search(h, m, descr)) return bad_data("no supported 'descr' in the .npy header: " + h);
  out.order = m[1].str()[0] == '=' ? '<' : m[1].str()[0];
  out.kind = m[2].str()[0];
  out.item = std::stoul(m[3].str());
  const bool ok =
      (out.kind == 'f' && (out.item == 4 || out.item == 8)) ||
      ((out.kind == 'i' || out.kind == 'u') && (out.item == 1 || out.item == 2 || out.item == 4 || out.item == 8)) ||
      (out.kind == 'b' && out.item == 1);
  if (!ok)
    return bad_data(fmt::format("unsupported dtype '{}{}{}' (numbers only)", m[1].str(), m[2].str(), m[3].str()));
  if (!std::regex_search(h, m, fortran)) return bad_data("no 'fortran_order' in the .npy header");
  out.fortran = m[1] == "True";
  if (!std::regex_search(h, m, shape)) return bad_data("no 'shape' in the .npy header");
  const std::string dims = m[1];
  static const std::regex num(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
    out.shape.push_back(std::stoull(it->str()));
  return out;
}

double value_at(const unsigned char* p, const Header& h) {
  unsigned char b[8];
  std::memcpy(b, p, h.item);
  if (h.item > 1 && (h.order == '>') == (std::endian::native == std::endian::little))
    for (size_t i = 0; i < h.item / 2; ++i) std::swap(b[i], b[h.item - 1 - i]);
  auto as = [&b]<class T>(T) {
    T v;
    std::memcpy(&v, b, sizeof v);
    return static_cast<double>(v);
  };
  switch (h.kind) {
    case 'f': return h.item == 8 ? as(double{}) : as(float{});
    case 'i':
      return h.item == 8 ? as(int64_t{}) : h.item == 4 ? as(int32_t{}) : h.item == 2 ? as(int16_t{}) : as(int8_t{});
    case 'b': return b[0] ? 1.0 : 0.0;
    default:
      return h.item == 8 ? as(uint64_t{}) : h.item == 4 ? as(uint32_t{}) : h.item == 2 ? as(uint16_t{}) : as(uint8_t{});
  }
}

// One .npy member's bytes -> array; errors say what is wrong, the caller adds file and member.
Expected<NpyArray> parse_npy(const std::string& bytes) {
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) return bad_data("not a .npy array (bad magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  size_t len = 0, off = 0;
  if (major == 1) {
    len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad_data("truncated .npy header");
    for (int i = 3; i >= 0; --i) len = len << 8 | static_cast<unsigned char>(bytes[8 + i]);
    off = 12;
  } else {
    return bad_data(fmt::format("unsupported .npy format version {}", major));
  }
  if (off + len > bytes.size()) return bad_data("truncated .npy header");
  auto h = parse_header(bytes.substr(off, len));
  if (!h) return h.error();
  size_t n = 1;
  for (size_t d : h->shape) n *= d;
  const size_t data = off + len;
  if (bytes.size() - data < n * h->item)
    return bad_data(
        fmt::format("truncated array: {} values need {} bytes, {} present", n, n * h->item, bytes.size() - data));
  NpyArray a;
  a.shape = h->shape;
  a.values.resize(n);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + data);
  if (!h->fortran || h->shape.size() < 2) {
    for (size_t i = 0; i < n; ++i) a.values[i] = value_at(p + i * h->item, *h);
    return a;
  }
  // Fortran order: the first index varies fastest; store row-major.
  std::vector<size_t> idx(h->shape.size(), 0);
  for (size_t f = 0; f < n; ++f) {
    size_t c = 0;
    for (size_t d = 0; d < idx.size(); ++d) c = c * h->shape[d] + idx[d];
    a.values[c] = value_at(p + f * h->item, *h);
    for (size_t d = 0; d < idx.size() && ++idx[d] == h->shape[d]; ++d) idx[d] = 0;
  }
  return a;
}

}  // namespace

Expected<std::map<std::string, NpyArray>> read_npz(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, ZipCloser> z(zip_open(path.c_str(), ZIP_RDONLY, &err));
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return bad_data(fmt::format("{}: not a readable .npz (zip) file: {}", path, why));
  }
  std::map<std::string, NpyArray> out;
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
      return bad_data(fmt::format("{}: member {} cannot be read", path, i));
    std::string name = st.name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0)
      return bad_data(fmt::format("{}: member '{}' is not a .npy array", path, name));
    std::unique_ptr<zip_file_t, FileCloser> f(zip_fopen_index(z.get(), i, 0));
    std::string bytes(st.size, '\0');
    if (!f || zip_fread(f.get(), bytes.data(), st.size) != static_cast<zip_int64_t>(st.size))
      return bad_data(fmt::format("{}: member '{}' cannot be read: {}", path, name, zip_strerror(z.get())));
    auto a = parse_npy(bytes);
    if (!a) return bad_data(fmt::format("{}: member '{}': {}", path, name, a.error().message));
    out.emplace(name.substr(0, name.size() - 4), std::move(*a));
  }
  return out;
}

}  // namespace dyn::engine
