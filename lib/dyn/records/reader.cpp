// RowReader and the envelope rule (SPEC 5).
#include "dyn/records/reader.h"

#include <simdjson.h>

#include <utility>

namespace dyn::records {

const Json& unwrap_envelope(const Json& row) {
  if (!row.is_object()) return row;
  auto ev = row.find("event");
  if (ev != row.end() && ev->is_object() && row.contains("timestamp") && !row.contains("event_type")) return *ev;
  return row;
}

bool unwrap_envelope(simdjson::dom::object& row) {
  simdjson::dom::object inner;
  if (row["event"].get_object().get(inner) != simdjson::SUCCESS || row["timestamp"].error() ||
      !row["event_type"].error())
    return false;
  row = inner;
  return true;
}

RowReader::RowReader(std::vector<std::string> paths, io::JsonlOptions options) : in_(std::move(paths), options) {}

bool RowReader::next(Json& row, std::string* where) {
  if (!in_.next(row, where)) return false;
  const Json& inner = unwrap_envelope(row);
  enveloped_ = &inner != &row;
  if (enveloped_) {
    Json event = std::move(row["event"]);  // moved out before `row`, which owns it, is replaced
    row = std::move(event);
  }
  return true;
}

bool RowReader::parse_line_dom(simdjson::dom::object& row) {
  if (!in_.parse_line_dom(row)) return false;
  enveloped_ = unwrap_envelope(row);
  return true;
}

bool RowReader::next_dom(simdjson::dom::object& row, std::string* where) {
  std::string_view text;
  while (next_line(text)) {
    if (!parse_line_dom(row)) continue;
    if (where) *where = line().where();
    return true;
  }
  return false;
}

}  // namespace dyn::records
