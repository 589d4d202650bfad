// SSE framing: lines, fields, dispatch on blank lines; arrival stamps per event.
#include "dyn/http/sse.h"

namespace dyn::http {

void SseParser::feed(std::string_view bytes, double now_ms, std::vector<SseEvent>& out) {
  bytes_ += bytes.size();
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    char c = bytes[i];
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') {  // second half of a CRLF split across reads (or not)
        ++i;
        continue;
      }
    }
    if (!in_line_) {
      in_line_ = true;
      line_start_ms_ = now_ms;
    }
    // Copy the run of ordinary bytes in one go (the common case: a whole JSON payload).
    size_t j = i;
    while (j < n && bytes[j] != '\n' && bytes[j] != '\r') ++j;
    line_.append(bytes.data() + i, j - i);
    i = j;
    if (i < n) {
      after_cr_ = bytes[i] == '\r';
      ++i;
      line_done(out);
    }
  }
}

void SseParser::line_done(std::vector<SseEvent>& out) {
  in_line_ = false;
  if (line_.empty()) {  // blank line: dispatch
    if (cur_has_data_) out.push_back(std::move(cur_));
    cur_ = SseEvent{};
    cur_has_data_ = cur_started_ = false;
    return;
  }
  if (line_[0] == ':') {
    ++comments_;
    line_.clear();
    return;
  }
  std::string_view l(line_);
  std::string_view field = l, value;
  if (auto colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (!cur_started_) {
    cur_started_ = true;
    cur_.first_byte_ms = line_start_ms_;
  }
  if (field == "data") {
    if (cur_has_data_) cur_.data.push_back('\n');
    cur_.data.append(value);
    cur_has_data_ = true;
  } else if (field == "event") {
    cur_.event.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) cur_.id.assign(value);
  }  // "retry" and unknown fields: ignored (a client that does not reconnect has no use for retry)
  line_.clear();
}

bool SseParser::finish(std::vector<SseEvent>& out) {
  bool clean = !in_line_ && line_.empty();
  if (clean && cur_has_data_) out.push_back(std::move(cur_));
  line_.clear();
  in_line_ = after_cr_ = false;
  cur_ = SseEvent{};
  cur_has_data_ = cur_started_ = false;
  return clean;
}

}  // namespace dyn::http
