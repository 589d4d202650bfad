// Input shape sniffing for "no usable rows" errors.
#include "dyn/io/sniff.h"

#include "dyn/base/json.h"

#include "dyn/base/error.h"
#include "dyn/io/line_reader.h"

namespace dyn::io {

InputShape sniff_input(const std::string& path, std::string* first_line) {
  if (path.empty() || path == "-") return InputShape::kOther;
  try {
    LineReader r({path});
    Line l;
    while (r.next(l)) {
      std::string_view t = l.text;
      while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
      if (t.empty()) continue;
      if (first_line) *first_line = std::string(t.substr(0, 80)) + (t.size() > 80 ? "..." : "");
      if (t.front() == '{' || t.front() == '[') {
        bool whole = Json::accept(t);
        if (whole) return t.front() == '{' ? InputShape::kJsonLines : InputShape::kJsonDocument;
        return InputShape::kJsonDocument;
      }
      if (t.find(',') != std::string_view::npos) return InputShape::kCsv;
      return InputShape::kOther;
    }
    return InputShape::kEmpty;
  } catch (const Fatal&) {
    return InputShape::kOther;
  }
}

std::string explain_unusable_input(const std::vector<std::string>& paths,
                                   const std::vector<std::pair<InputShape, std::string>>& hints) {
  for (const auto& p : paths) {
    std::string first;
    InputShape s = sniff_input(p, &first);
    std::string what;
    switch (s) {
      case InputShape::kCsv: what = p + " looks like CSV (first line '" + first + "'), not JSON Lines"; break;
      case InputShape::kJsonDocument:
        what = p + " is one JSON document over several lines (first line '" + first + "'), not JSON Lines";
        break;
      case InputShape::kOther:
        if (!first.empty()) what = p + " is not JSON Lines (first line '" + first + "')";
        break;
      case InputShape::kEmpty:
      case InputShape::kJsonLines: break;
    }
    if (what.empty()) continue;
    for (const auto& [shape, advice] : hints)
      if (shape == s) return what + ": " + advice;
    return what;
  }
  return "";
}

}  // namespace dyn::io
