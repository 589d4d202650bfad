// JsonlReader implementation.
#include "dyn/io/jsonl.h"

#include <algorithm>
#include <functional>

#include <simdjson.h>

#include "dyn/base/diag.h"
#include "dyn/base/json_limits.h"

namespace dyn::io {

Json to_json(const simdjson::dom::element& v) {
  using simdjson::dom::element_type;
  switch (v.type()) {
    case element_type::OBJECT: {
      simdjson::dom::object o;
      if (v.get(o) == simdjson::SUCCESS) return to_json(o);
      break;
    }
    case element_type::ARRAY: {
      simdjson::dom::array arr;
      if (v.get(arr) != simdjson::SUCCESS) break;
      Json a = Json::array();
      for (simdjson::dom::element x : arr) a.push_back(to_json(x));
      return a;
    }
    case element_type::STRING: {
      std::string_view s;
      if (v.get(s) == simdjson::SUCCESS) return std::string(s);
      break;
    }
    case element_type::INT64: {
      int64_t i = 0;
      if (v.get(i) != simdjson::SUCCESS) break;
      if (i >= 0) return static_cast<uint64_t>(i);  // nlohmann parses non-negative integers as unsigned
      return i;
    }
    case element_type::UINT64: {
      uint64_t u = 0;
      if (v.get(u) == simdjson::SUCCESS) return u;
      break;
    }
    case element_type::DOUBLE: {
      double d = 0;
      if (v.get(d) == simdjson::SUCCESS) return d;
      break;
    }
    case element_type::BOOL: {
      bool b = false;
      if (v.get(b) == simdjson::SUCCESS) return b;
      break;
    }
    case element_type::NULL_VALUE: break;
  }
  return nullptr;
}

Json to_json(const simdjson::dom::object& v) {
  Json o = Json::object();
  for (auto field : v) o[std::string(field.key)] = to_json(field.value);
  return o;
}

JsonlReader::JsonlReader(std::vector<std::string> paths, JsonlOptions options)
    : reader_(std::move(paths), options.lines), opts_(options) {}

JsonlReader::~JsonlReader() = default;

std::string out_of_range_message(std::string_view line) {
  // nlohmann keeps an integer past 2^64-1 as a double: find the first such number and its key.
  Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  std::string found;
  std::function<void(const Json&, const std::string&)> walk = [&](const Json& v, const std::string& path) {
    if (!found.empty()) return;
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (d >= 18446744073709551616.0 || d <= -9223372036854775808.0) found = path;
    } else if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), path.empty() ? it.key() : path + "." + it.key());
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) walk(v[i], path + "[" + std::to_string(i) + "]");
    }
  };
  if (!j.is_discarded()) walk(j, "");
  if (found.empty()) return "";
  return "'" + found + "' is out of range (integers must be within 64 bits)";
}

bool JsonlReader::skip_blank() const { return line_.text.find_first_not_of(" \t") == std::string_view::npos; }

void JsonlReader::reject_malformed(bool parsed_but_not_object) {
  size_t nuls = std::count(line_.text.begin(), line_.text.end(), '\0');
  nul_bytes_ += nuls;
  bool nul = nuls > 0;
  reject(line_.where(), nul                     ? "malformed JSON row (NUL bytes), skipped"
                        : parsed_but_not_object ? "row is not a JSON object, skipped"
                                                : "malformed JSON row, skipped");
}

void JsonlReader::reject(const std::string& where, const std::string& what) {
  ++malformed_;
  if (malformed_ <= opts_.max_reports) diag::warning(where, what);
}

bool JsonlReader::next(Json& row, std::string* where) {
  while (reader_.next(line_)) {
    if (skip_blank()) continue;
    std::string_view t = line_.text;
    // Printing or walking a deeper row would recurse past the stack (simdjson's fast path has
    // its own limit of 1024).
    if (json_too_deep(t)) {
      reject(line_.where(), "row nested deeper than " + std::to_string(kMaxJsonDepth) + " levels, skipped");
      continue;
    }
    Json parsed = Json::parse(t.begin(), t.end(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      reject_malformed(!parsed.is_discarded());
      continue;
    }
    ++rows_;
    row = std::move(parsed);
    if (where) *where = line_.where();
    return true;
  }
  return false;
}

bool JsonlReader::next_line(std::string_view& text) {
  while (reader_.next(line_)) {
    if (skip_blank()) continue;
    text = line_.text;
    return true;
  }
  return false;
}

bool JsonlReader::parse_line_dom(simdjson::dom::object& row) {
  if (!dom_) dom_ = std::make_unique<simdjson::dom::parser>();
  std::string_view t = line_.text;
  simdjson::dom::element doc;
  // realloc_if_needed: the line lives in LineReader's buffer without simdjson's padding.
  if (auto err = dom_->parse(t.data(), t.size(), /*realloc_if_needed=*/true).get(doc); err != simdjson::SUCCESS) {
    // Name the two kinds of bad input a user can fix (invalid UTF-8, nesting over simdjson's
    // 1024 levels); everything else is plain malformed JSON.
    std::string range;
    if (err == simdjson::NUMBER_OUT_OF_RANGE || err == simdjson::NUMBER_ERROR) range = out_of_range_message(t);
    if (!range.empty()) {
      // A count past 64 bits is no row this toolkit can use, and not a typo to skip quietly:
      // name the field (issue 21.8); callers that need every row fail with exit 3.
      ++out_of_range_;
      reject(line_.where(), range + ", skipped");
    } else if (err == simdjson::UTF8_ERROR) {
      reject(line_.where(), "malformed JSON row (invalid UTF-8), skipped");
    } else if (err == simdjson::DEPTH_ERROR) {
      reject(line_.where(), "row nested too deeply, skipped");
    } else {
      reject_malformed(false);
    }
    return false;
  }
  if (doc.get_object().get(row) != simdjson::SUCCESS) {
    reject_malformed(true);
    return false;
  }
  ++rows_;
  return true;
}

bool JsonlReader::next_dom(simdjson::dom::object& row, std::string* where) {
  std::string_view text;
  while (next_line(text)) {
    if (!parse_line_dom(row)) continue;
    if (where) *where = line_.where();
    return true;
  }
  return false;
}

void summarize_rows(uint64_t read, uint64_t skipped, uint64_t nul_bytes) {
  // Rows read, rows skipped and NUL bytes in one line (issue 21.8), so a run over a damaged or
  // wrong-format file says how much of it was used.
  if (skipped == 0) return;
  std::string msg = std::to_string(skipped) + " malformed row" + (skipped == 1 ? "" : "s") + " skipped, " +
                    std::to_string(read) + " row" + (read == 1 ? "" : "s") + " read";
  if (nul_bytes)
    msg += ", " + std::to_string(nul_bytes) + " NUL byte" + (nul_bytes == 1 ? "" : "s") + " in skipped rows";
  diag::warning("", msg);
}

void JsonlReader::summarize() const { summarize_rows(rows_, malformed(), nul_bytes_); }

}  // namespace dyn::io
