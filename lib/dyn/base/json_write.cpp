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

void append_json_number(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace dyn
