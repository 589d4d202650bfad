// Request migration: the continuation request and the splice of its events into the client's stream.
#include "dyn/serve/migration.h"

#include <algorithm>

#include "dyn/serve/response_tap.h"

namespace dyn::serve {

bool migrates(api::Api api) { return api == api::Api::kChat || api == api::Api::kMessages; }

namespace {

/// Lowers the output limit `key` of `body` by `sent`; an error when nothing would be left.
std::optional<Error> lower_limit(Json& body, const char* key, uint64_t sent) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t limit = it->get<uint64_t>();
  if (limit <= sent) return Error{std::string("no output budget left (") + key + " reached)", 400};
  *it = limit - sent;
  return std::nullopt;
}

/// Appends `text` to a final assistant message's content (a string, or an array of blocks);
/// false when its content is neither.
bool extend_content(Json& msg, const std::string& text) {
  Json& c = msg["content"];
  if (c.is_string()) {
    c = c.get<std::string>() + text;
    return true;
  }
  if (c.is_array()) {
    c.push_back(Json{{"type", "text"}, {"text", text}});
    return true;
  }
  return false;
}

}  // namespace

Expected<std::string> continuation_body(api::Api api, const std::string& upstream_body, const StreamLog& log) {
  Json body = Json::parse(upstream_body, nullptr, false);
  if (!body.is_object()) return Error{"the request body is not a JSON object", 400};
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (auto e = lower_limit(body, key, log.tokens)) return *e;
  if (log.text.empty()) return body.dump();  // nothing generated yet: the request as it was
  auto m = body.find("messages");
  if (m == body.end() || !m->is_array() || m->empty()) return Error{"the request has no messages", 400};
  Json& last = m->back();
  const bool last_assistant = last.is_object() && last.value("role", "") == "assistant";
  if (api == api::Api::kChat) {
    // vLLM's chat template options: the assistant message is continued, not closed and answered.
    const bool continuing = body.value("continue_final_message", false);
    if (last_assistant && continuing) {
      if (!extend_content(last, log.text)) return Error{"the final assistant message is not text", 400};
    } else {
      m->push_back(Json{{"role", "assistant"}, {"content", log.text}});
    }
    body["continue_final_message"] = true;
    body["add_generation_prompt"] = false;
  } else {
    // Anthropic: a final assistant message is a prefill the model continues.
    if (last_assistant) {
      if (!extend_content(last, log.text)) return Error{"the final assistant message is not text", 400};
    } else {
      m->push_back(Json{{"role", "assistant"}, {"content", log.text}});
    }
  }
  return body.dump();
}

ContinuationTap::ContinuationTap(api::Api api, std::shared_ptr<ResponseTap> client, const StreamLog& log,
                                 std::function<void()> on_first_token)
    : api_(api),
      client_(std::move(client)),
      sent_tokens_(log.tokens),
      id_(log.id),
      model_(log.model),
      created_(log.created),
      block_base_(log.open_block >= 0 ? log.open_block : log.blocks_started),
      continue_block_(log.open_block >= 0),
      on_first_token_(std::move(on_first_token)) {}

void ContinuationTap::fix_usage(Json& u) const {
  if (!u.is_object()) return;
  auto shift = [&](const char* key, bool add) {
    auto it = u.find(key);
    if (it == u.end() || !it->is_number_unsigned()) return;
    const uint64_t v = it->get<uint64_t>();
    *it = add ? v + sent_tokens_ : (v > sent_tokens_ ? v - sent_tokens_ : 0);
  };
  // The continuation's prompt held the tokens sent; they count as output, once.
  shift(api_ == api::Api::kMessages ? "input_tokens" : "prompt_tokens", false);
  shift(api_ == api::Api::kMessages ? "output_tokens" : "completion_tokens", true);
}

void ContinuationTap::chat_event(Json& j, std::string& events) {
  if (auto u = j.find("usage"); u != j.end()) fix_usage(*u);
  if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
    const Json& ch = (*c)[0];
    const Json* d = ch.contains("delta") ? &ch["delta"] : nullptr;
    const bool has_text = d && d->is_object() && [&] {
      for (const char* k : {"content", "reasoning_content", "reasoning", "tool_calls"})
        if (d->contains(k) && !(*d)[k].is_null() && (*d)[k] != "") return true;
      return false;
    }();
    const bool finishes = ch.contains("finish_reason") && !ch["finish_reason"].is_null();
    if (!has_text && !finishes && !j.contains("usage")) return;  // the role chunk: the client has one
    if (has_text && on_first_token_) std::exchange(on_first_token_, nullptr)();
  }
  if (!id_.empty()) j["id"] = id_;
  if (created_) j["created"] = *created_;
  if (!model_.empty()) j["model"] = model_;
  events += "data: " + j.dump() + "\n\n";
}

void ContinuationTap::messages_event(const std::string& name, Json& j, std::string& events) {
  const std::string type = j.value("type", name);
  if (type == "message_start" || type == "ping") return;  // the client has its message
  if (auto i = j.find("index"); i != j.end() && i->is_number_unsigned()) {
    const uint64_t k = i->get<uint64_t>();
    if (k == 0 && continue_block_ && type == "content_block_start") return;  // the open block goes on
    *i = static_cast<uint64_t>(block_base_) + k;
  }
  if (type == "content_block_delta" && on_first_token_) std::exchange(on_first_token_, nullptr)();
  if (type == "message_delta") {
    if (auto u = j.find("usage"); u != j.end()) fix_usage(*u);
  }
  events += "event: " + type + "\ndata: " + j.dump() + "\n\n";
}

void ContinuationTap::event(std::string_view raw, std::string_view name, std::string_view data, std::string& events) {
  Json j = data == "[DONE]" ? Json() : Json::parse(data, nullptr, false);
  if (!j.is_object()) {
    events.append(raw);  // [DONE], a comment, something unreadable: as the worker sent it
    return;
  }
  if (api_ == api::Api::kMessages) messages_event(std::string(name), j, events);
  else chat_event(j, events);
}

void ContinuationTap::on_data(std::string_view data, double arrival_ms, std::string& out) {
  pending_.append(data);
  std::string events;
  size_t start = 0;
  for (;;) {
    size_t lf = pending_.find("\n\n", start), crlf = pending_.find("\r\n\r\n", start);
    if (lf == std::string::npos && crlf == std::string::npos) break;
    const bool is_crlf = crlf != std::string::npos && (lf == std::string::npos || crlf < lf);
    const size_t end = is_crlf ? crlf : lf, next = end + (is_crlf ? 4 : 2);
    std::string_view ev(pending_.data() + start, end - start);
    std::string name, payload;
    size_t p = 0;
    while (p <= ev.size()) {
      size_t nl = ev.find('\n', p);
      std::string_view line = ev.substr(p, nl == std::string_view::npos ? std::string_view::npos : nl - p);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      auto value = [&](size_t n) {
        std::string_view v = line.substr(n);
        return !v.empty() && v.front() == ' ' ? v.substr(1) : v;
      };
      if (line.substr(0, 5) == "data:") payload += (payload.empty() ? "" : "\n") + std::string(value(5));
      else if (line.substr(0, 6) == "event:") name = value(6);
      if (nl == std::string_view::npos) break;
      p = nl + 1;
    }
    event(std::string_view(pending_.data() + start, next - start), name, payload, events);
    start = next;
  }
  pending_.erase(0, start);
  if (!events.empty()) client_->on_data(events, arrival_ms, out);
}

void ContinuationTap::on_end(double now_ms, std::string& out) {
  if (!pending_.empty()) client_->on_data(std::exchange(pending_, {}), now_ms, out);
  client_->on_end(now_ms, out);
}

}  // namespace dyn::serve
