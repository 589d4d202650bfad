// Writers for JSON rows built by hand on hot paths; they match Json::dump() byte for byte.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dyn {

/// Appends `s` as a JSON string literal exactly as Json::dump() writes it: quotes, \" and \\,
/// the short escapes \b \f \n \r \t, \u00xx (lowercase hex) for other control characters, every
/// other byte as is. The caller guarantees valid UTF-8 (dump() would throw on invalid UTF-8; rows
/// parsed by simdjson or nlohmann are valid). Thread-safe.
void append_json_string(std::string& out, std::string_view s);

/// append_json_string for text that may not be valid UTF-8 (header values, upstream messages):
/// exactly what Json::dump(-1, ' ', false, Json::error_handler_t::replace) writes, i.e. each
/// invalid sequence becomes U+FFFD. Valid text takes append_json_string's fast path. Thread-safe.
void append_json_string_replace(std::string& out, std::string_view s);

/// True when append_json_string_replace(s) writes s unchanged between quotes: printable ASCII
/// without '"' and '\\' (nothing to escape, valid UTF-8). Writers that copy such strings
/// straight into a buffer ask this first. Thread-safe.
bool json_string_is_plain(std::string_view s);

/// Appends a double exactly as Json::dump() writes it (nlohmann's shortest round-trip digits, a
/// trailing ".0" on integral values, "null" for NaN and infinities). Thread-safe.
void append_json_number(std::string& out, double v);
/// The same bytes written at `out`, which has room for kJsonDoubleChars; returns their end.
inline constexpr size_t kJsonDoubleChars = 32;
char* write_json_number(char* out, double v);

/// Appends an unsigned / signed integer in decimal, as Json::dump() writes integers. Thread-safe.
void append_json_number(std::string& out, uint64_t v);
void append_json_number(std::string& out, int64_t v);
/// Appends `v` comma-separated ("1,22,333"; nothing for none), the bytes append_json_number
/// writes one by one, at under half their cost: a 150k-token prompt's trace row lists 2,344
/// sequence hashes of up to 20 digits (issue 54). Thread-safe.
void append_json_numbers(std::string& out, std::span<const uint64_t> v);

}  // namespace dyn
