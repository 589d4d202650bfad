// dyn-trace cat. simdjson validates each line at several GB/s, so cat runs at the speed of
// gzip decompression; only envelopes are re-serialized.
#include "dyn/trace/cat.h"

#include <simdjson.h>

#include <algorithm>

#include "dyn/base/error.h"
#include "dyn/records/reader.h"

namespace dyn::trace {

int cat_traces(const CatOptions& o, io::Output& out) {
  records::RowReader reader(o.inputs, io::JsonlOptions{.lines = {.strict = o.strict}});
  simdjson::dom::object row;
  struct Held {
    bool has_time;
    uint64_t time;
    std::string text;
  };
  std::vector<Held> held;
  std::string scratch;
  while (reader.next_dom(row)) {
    std::string_view text = reader.line().text;
    if (reader.enveloped()) {
      scratch = simdjson::minify(row);
      text = scratch;
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
  reader.summarize();
  if (o.strict && (reader.truncated_files() > 0 || reader.malformed() > 0)) return kExitBadData;
  return kExitOk;
}

}  // namespace dyn::trace
