// Hand-written JSON pieces that match nlohmann's serializer byte for byte.
#include "dyn/base/json_write.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "dyn/base/json.h"
#include "dyn/base/json_limits.h"  // valid_utf8

namespace dyn {

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

void append_json_string_replace(std::string& out, std::string_view s) {
  if (valid_utf8(s)) {
    append_json_string(out, s);
    return;
  }
  // Rare: let nlohmann's own replacement rules decide, so the bytes are dump()'s.
  out += Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool json_string_is_plain(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80 || c == '"' || c == '\\')
      return false;
  return true;
}

char* write_json_number(char* out, double v) {
  if (!std::isfinite(v)) {
    std::memcpy(out, "null", 4);
    return out + 4;
  }
  // The routine Json::dump() itself uses for doubles (nlohmann/detail/conversions/to_chars.hpp):
  // at most 24 characters ("-1.2345678901234567e-308").
  return nlohmann::detail::to_chars(out, out + kJsonDoubleChars, v);
}

void append_json_number(std::string& out, double v) {
  char buf[kJsonDoubleChars];
  out.append(buf, write_json_number(buf, v));
}

void append_json_number(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

namespace {

/// The 8 decimal digits of `v` < 10^8, zero-padded, at `p`: two digits per table lookup.
void write_8_digits(char* p, uint32_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  const uint32_t hi = v / 10000, lo = v % 10000;
  std::memcpy(p, kPairs + 2 * (hi / 100), 2);
  std::memcpy(p + 2, kPairs + 2 * (hi % 100), 2);
  std::memcpy(p + 4, kPairs + 2 * (lo / 100), 2);
  std::memcpy(p + 6, kPairs + 2 * (lo % 100), 2);
}

/// `v` in decimal at `p` (room for 20 characters); returns the end. As std::to_chars, in at most
/// three 8-digit pieces instead of a division per digit pair.
char* write_u64(char* p, uint64_t v) {
  constexpr uint64_t k8 = 100000000, k16 = k8 * k8;
  if (v < k8) return std::to_chars(p, p + 8, static_cast<uint32_t>(v)).ptr;
  if (v < k16) {
    p = std::to_chars(p, p + 8, static_cast<uint32_t>(v / k8)).ptr;
    write_8_digits(p, static_cast<uint32_t>(v % k8));
    return p + 8;
  }
  p = std::to_chars(p, p + 4, static_cast<uint32_t>(v / k16)).ptr;
  write_8_digits(p, static_cast<uint32_t>(v % k16 / k8));
  write_8_digits(p + 8, static_cast<uint32_t>(v % k8));
  return p + 16;
}

}  // namespace

void append_json_numbers(std::string& out, std::span<const uint64_t> v) {
  // Through a local buffer: one append per 4 KiB instead of one per number and comma.
  char buf[4096];
  char* p = buf;
  for (size_t i = 0; i < v.size(); ++i) {
    if (p + 21 > buf + sizeof buf) {
      out.append(buf, p);
      p = buf;
    }
    if (i) *p++ = ',';
    p = write_u64(p, v[i]);
  }
  out.append(buf, p);
}

void append_json_number(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace dyn
