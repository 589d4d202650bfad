// JsonlReader implementation.
#include "dyn/io/jsonl.h"

#include "dyn/base/diag.h"

namespace dyn::io {

const Json& unwrap_envelope(const Json& row) {
  if (row.is_object() && row.size() <= 3) {
    auto ev = row.find("event");
    if (ev != row.end() && ev->is_object() && row.contains("timestamp") &&
        !row.contains("event_type"))
      return *ev;
  }
  return row;
}

JsonlReader::JsonlReader(std::vector<std::string> paths, JsonlOptions options)
    : reader_(std::move(paths), options.lines), opts_(options) {}

void JsonlReader::reject(const std::string& where, const std::string& what) {
  ++malformed_;
  if (malformed_ <= opts_.max_reports) diag::warning(where, what);
}

bool JsonlReader::next(Json& row, std::string* where) {
  while (reader_.next(line_)) {
    std::string_view t = line_.text;
    size_t i = 0;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
    if (i == t.size()) continue;
    Json parsed = Json::parse(t.begin(), t.end(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      bool nul = t.find('\0') != std::string_view::npos;
      reject(line_.where(), nul ? "malformed JSON row (NUL bytes), skipped"
                                : parsed.is_discarded() ? "malformed JSON row, skipped"
                                                        : "row is not a JSON object, skipped");
      continue;
    }
    ++rows_;
    if (opts_.unwrap) {
      const Json& inner = unwrap_envelope(parsed);
      if (&inner != &parsed) {
        Json tmp = inner;
        row = std::move(tmp);
      } else {
        row = std::move(parsed);
      }
    } else {
      row = std::move(parsed);
    }
    if (where) *where = line_.where();
    return true;
  }
  return false;
}

void JsonlReader::summarize() const {
  if (malformed_ > 0)
    diag::warning("", std::to_string(malformed_) + " malformed row" + (malformed_ == 1 ? "" : "s") +
                          " skipped");
}

}  // namespace dyn::io
