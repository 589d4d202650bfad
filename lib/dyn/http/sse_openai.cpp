// Interpretation of OpenAI chunks: token stamps, usage, finish reason, tool calls.
#include "dyn/http/sse_openai.h"

#include <optional>

#include "dyn/base/json.h"

namespace dyn::http {

namespace {

std::optional<uint64_t> count(const Json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<uint64_t>();
}

std::string_view str(const Json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return {};
  return it->get_ref<const std::string&>();
}

}  // namespace

void OpenAiStream::on_event(const SseEvent& ev) {
  ++s_.events;
  s_.last_event_ms = ev.first_byte_ms;
  std::string_view d = ev.data;
  while (!d.empty() && (d.back() == ' ' || d.back() == '\t')) d.remove_suffix(1);
  if (d == "[DONE]") {
    s_.done = true;
    return;
  }
  if (ev.event == "error") {  // named error event (some servers), payload may or may not be JSON
    s_.stream_error = true;
    s_.error_type = "stream_error";
    s_.error_message = std::string(d.substr(0, 4000));
  }
  on_json_chunk(d, ev.first_byte_ms, false);
}

void OpenAiStream::on_body(std::string_view body, double at_ms) {
  s_.last_event_ms = at_ms;
  on_json_chunk(body, at_ms, true);
}

void OpenAiStream::on_json_chunk(std::string_view data, double t, bool whole_body) {
  Json j = Json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (s_.parse_errors++ == 0) s_.first_parse_error = std::string(data.substr(0, 200));
    return;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (s_.stream_error && s_.error_type != "stream_error") return;  // keep the first error's facts
    s_.stream_error = true;
    if (e->is_object()) {
      s_.error_type = std::string(str(*e, "type"));
      s_.error_message = std::string(str(*e, "message"));
    } else if (e->is_string()) {
      s_.error_message = e->get<std::string>();
    }
    if (s_.error_type.empty()) s_.error_type = "stream_error";
    return;
  }
  std::optional<uint64_t> chunk_completion;                        // this chunk's cumulative completion_tokens
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {  // "usage": null is absent
    chunk_completion = count(*u, "completion_tokens");
    // Cumulative counts never go down (case 27's rule, shared with the router's tap): a later
    // chunk repeating 0 or leaving a count out keeps the larger one.
    auto raise = [](std::optional<uint64_t>& have, std::optional<uint64_t> v) {
      if (v && (!have || *v > *have)) have = v;
    };
    raise(s_.prompt_tokens, count(*u, "prompt_tokens"));
    raise(s_.completion_tokens, count(*u, "completion_tokens"));
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      raise(s_.cached_tokens, count(*d, "cached_tokens"));
    if (auto d = u->find("dyn"); d != u->end() && d->is_object())
      if (auto t = d->find("cached_tokens_by_tier"); t != d->end() && t->is_object()) {
        auto g1 = count(*t, "g1"), g2 = count(*t, "g2"), g3 = count(*t, "g3"), g4 = count(*t, "g4");
        if (g1 && g2 && g3 && g4) s_.cached_tokens_by_tier = std::array<uint64_t, 4>{*g1, *g2, *g3, *g4};
      }
  }
  auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array()) return;
  bool output = false;
  for (const auto& c : *ch) {
    if (!c.is_object()) continue;
    uint64_t index = count(c, "index").value_or(0);
    const Json* delta = nullptr;
    if (auto it = c.find(whole_body ? "message" : "delta"); it != c.end() && it->is_object()) delta = &*it;
    auto take = [&](std::string_view piece, bool is_content) {
      if (piece.empty()) return;
      output = true;
      s_.text_bytes += piece.size();
      if (keep_text_) {
        s_.text.append(piece);
        if (is_content) s_.content.append(piece);
      }
    };
    take(str(c, "text"), true);  // completions
    if (delta) {
      take(str(*delta, "content"), true);
      take(str(*delta, "reasoning_content"), false);
      take(str(*delta, "reasoning"), false);
      if (auto tc = delta->find("tool_calls"); tc != delta->end() && tc->is_array()) {
        for (const auto& call : *tc) {
          if (!call.is_object()) continue;
          uint64_t ti = count(call, "index").value_or(s_.tool_calls.size());
          std::string_view id = str(call, "id");
          const Json* fn = nullptr;
          if (auto f = call.find("function"); f != call.end() && f->is_object()) fn = &*f;
          std::string_view name = fn ? str(*fn, "name") : std::string_view{};
          if (!id.empty() || !name.empty()) {
            bool known = false;
            for (auto& k : s_.tool_calls)
              if (k.choice_index == index && k.tool_call_index == ti) {
                known = true;
                if (k.id.empty()) k.id = id;
                if (k.name.empty()) k.name = name;
              }
            if (!known) s_.tool_calls.push_back({index, ti, std::string(id), std::string(name)});
          }
          take(name, false);
          if (fn) take(str(*fn, "arguments"), false);
        }
      }
    }
    if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string() && (index == 0 || s_.finish_reason.empty()))
      s_.finish_reason = fr->get<std::string>();
  }
  if (output) {
    s_.token_chunk_ms.push_back(t);
    if (!whole_body && chunk_usage_ok_ && chunk_completion && *chunk_completion >= chunk_usage_prev_) {
      s_.chunk_tokens.push_back(*chunk_completion - chunk_usage_prev_);
      chunk_usage_prev_ = *chunk_completion;
    } else if (chunk_usage_ok_) {
      chunk_usage_ok_ = false;
      s_.chunk_tokens.clear();
    }
  }
}

}  // namespace dyn::http
