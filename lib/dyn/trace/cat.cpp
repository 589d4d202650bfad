// dyn-trace cat. simdjson validates each line at several GB/s, so cat runs at the speed of
// gzip decompression; only envelopes are re-serialized.
#include "dyn/trace/cat.h"

#include <algorithm>
#include <simdjson.h>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/io/jsonl.h"

namespace dyn::trace {

int cat_traces(const CatOptions& o, io::Output& out) {
  io::LineReader reader(o.inputs, io::LineReaderOptions{o.strict});
  simdjson::dom::parser parser;
  io::Line line;
  uint64_t malformed = 0, rows = 0, nuls = 0;
  struct Held {
    bool has_time;
    uint64_t time;
    std::string text;
  };
  std::vector<Held> held;
  std::string scratch;
  while (reader.next(line)) {
    std::string_view t = line.text;
    if (t.find_first_not_of(" \t") == std::string_view::npos) continue;
    simdjson::dom::element doc;
    auto err = parser.parse(t.data(), t.size(), true).get(doc);
    if (err || !doc.is_object()) {
      ++malformed;
      nuls += static_cast<uint64_t>(std::count(t.begin(), t.end(), '\0'));
      if (malformed <= 20)
        diag::warning(line.where(), t.find('\0') != std::string_view::npos ? "malformed JSON row (NUL bytes), skipped"
                                    : err                                  ? "malformed JSON row, skipped"
                                                                           : "row is not a JSON object, skipped");
      continue;
    }
    ++rows;
    std::string_view text = t;
    simdjson::dom::element row = doc;
    simdjson::dom::element ev;
    if (doc["event"].get(ev) == simdjson::SUCCESS && ev.is_object() && !doc["timestamp"].error() &&
        doc["event_type"].error()) {
      scratch = simdjson::minify(ev);
      text = scratch;
      row = ev;
    }
    if (o.sort) {
      uint64_t tm = 0;
      bool has = row["event_time_unix_ms"].get_uint64().get(tm) == simdjson::SUCCESS;
      if (!has) {
        double d;
        if (row["event_time_unix_ms"].get_double().get(d) == simdjson::SUCCESS && d >= 0) {
          tm = static_cast<uint64_t>(d);
          has = true;
        }
      }
      held.push_back({has, tm, std::string(text)});
    } else {
      out.line(text);
    }
  }
  if (o.sort) {
    std::stable_sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
      if (a.has_time != b.has_time) return !a.has_time;
      return a.time < b.time;
    });
    for (auto& h : held) out.line(h.text);
  }
  malformed += reader.long_lines();  // over-long lines were reported by the reader itself
  io::summarize_rows(rows, malformed, nuls);
  if (o.strict && (reader.truncated_files() > 0 || malformed > 0)) return kExitBadData;
  return kExitOk;
}

}  // namespace dyn::trace
