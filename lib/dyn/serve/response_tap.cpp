// ResponseTap: SSE event splitting and per-API extraction of timings, usage and finish reasons.
#include "dyn/serve/response_tap.h"

#include <simdjson.h>

namespace dyn::serve {

namespace {
using Elem = simdjson::dom::element;

// The same few accessors over both JSON representations, so each rule below is written once:
// nlohmann's Json for whole bodies, simdjson's DOM element for SSE events. A JSON null reads as
// absent.
const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}
std::optional<Elem> member(const Elem& j, const char* key) {
  Elem v;
  if (!j.is_object() || j.at_key(key).get(v) || v.is_null()) return std::nullopt;
  return v;
}
std::optional<uint64_t> u64_of(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}
std::optional<uint64_t> u64_of(const Elem& v) {
  uint64_t n;
  if (v.is_uint64() && !v.get_uint64().get(n)) return n;
  return std::nullopt;
}
/// The members of object `j` named in `keys`, found in one pass over it rather than one scan per
/// key (issue 16: a streamed chunk asked for up to a dozen): the first occurrence of each, as
/// at_key finds it, a JSON null read as absent (as member() does). All absent when `j` is not an
/// object.
template <size_t N>
std::array<std::optional<Elem>, N> members(const Elem& j, const std::array<std::string_view, N>& keys) {
  std::array<std::optional<Elem>, N> found;
  std::array<bool, N> seen{};
  simdjson::dom::object o;
  if (j.get_object().get(o)) return found;
  for (auto field : o) {
    for (size_t i = 0; i < N; ++i) {
      if (seen[i] || field.key != keys[i]) continue;
      seen[i] = true;
      if (!field.value.is_null()) found[i] = field.value;
      break;
    }
  }
  return found;
}
template <class V>
std::optional<uint64_t> u64_at(const V& j, const char* key) {
  auto v = member(j, key);
  return v ? u64_of(*v) : std::nullopt;
}
uint64_t text_len(const Json* v) { return v && v->is_string() ? v->get_ref<const std::string&>().size() : 0; }
uint64_t text_len(const std::optional<Elem>& v) {
  std::string_view s;
  return v && !v->get_string().get(s) ? s.size() : 0;
}
std::string str_of(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }
std::string str_of(const Elem& v) {
  std::string_view s;
  return v.get_string().get(s) ? std::string() : std::string(s);
}
template <class V>
std::string str_at(const V& j, const char* key) {
  auto v = member(j, key);
  return v ? str_of(*v) : std::string();
}
/// The elements of an array; none when `v` is not one. (A default-constructed dom::array has no
/// document behind it and crashes when read, so "none" is a parsed empty array, read-only and
/// shared by all threads.)
simdjson::dom::array elements(const Elem& v) {
  simdjson::dom::array a;
  if (!v.get_array().get(a)) return a;
  static simdjson::dom::parser empty_doc;
  static const simdjson::dom::array empty = empty_doc.parse(std::string_view("[]")).get_array().value();
  return empty;
}
/// Cumulative counters never go down (case 27: a final message_delta with input_tokens 0).
void raise(std::optional<uint64_t>& have, std::optional<uint64_t> v) {
  if (v && (!have || *v > *have)) have = v;
}
}  // namespace

StreamEnd stream_end(Api api, const ResponseFacts& f) {
  StreamEnd e;
  if (!f.event_stream || f.status < 200 || f.status >= 300 || f.error_event) return e;
  const char* terminal = api::api_info(api).terminal_event;
  if (f.terminal_event) return e;
  if (f.finish_reason) {
    e.warning = std::string("stream ended without ") + terminal + " after its finish reason";
    return e;
  }
  e.complete = false;
  e.message = std::string("stream ended without a finish reason or ") + terminal;
  return e;
}

void ResponseTap::on_response(int status, const httplib::Headers& headers, double) {
  facts_.status = status;
  auto it = headers.find("Content-Type");
  facts_.event_stream = it != headers.end() && it->second.rfind("text/event-stream", 0) == 0;
}

void ResponseTap::content(double t, uint64_t bytes) {
  facts_.content_bytes += bytes;
  facts_.content_chunks++;
  if (!facts_.first_content_ms) {
    facts_.first_content_ms = t;
    if (on_first_token_) on_first_token_();
  } else {
    if (!facts_.second_content_ms) facts_.second_content_ms = t;
    facts_.inter_chunk_ms.push_back(t - *facts_.last_content_ms);
  }
  facts_.last_content_ms = t;
}

template <class V>
void ResponseTap::usage(const V& u) {
  if (!u.is_object()) return;  // "usage": null is absent (case 03 stream-c)
  switch (api_) {
    case Api::kChat:
    case Api::kCompletions:
      raise(facts_.input_tokens, u64_at(u, "prompt_tokens"));
      raise(facts_.output_tokens, u64_at(u, "completion_tokens"));
      if (auto d = member(u, "prompt_tokens_details")) raise(facts_.cached_tokens, u64_at(*d, "cached_tokens"));
      break;
    case Api::kResponses:
      raise(facts_.input_tokens, u64_at(u, "input_tokens"));
      raise(facts_.output_tokens, u64_at(u, "output_tokens"));
      if (auto d = member(u, "input_tokens_details")) raise(facts_.cached_tokens, u64_at(*d, "cached_tokens"));
      break;
    case Api::kMessages: {
      // Anthropic's input_tokens excludes cache reads and writes; the trace's input is the whole
      // prompt, so add them back.
      auto in = u64_at(u, "input_tokens");
      auto rd = u64_at(u, "cache_read_input_tokens");
      auto wr = u64_at(u, "cache_creation_input_tokens");
      // message_delta may repeat them, as 0, or leave them out (case 27): the larger count wins.
      if (in || rd || wr) raise(facts_.input_tokens, in.value_or(0) + rd.value_or(0) + wr.value_or(0));
      raise(facts_.cached_tokens, rd);
      raise(facts_.output_tokens, u64_at(u, "output_tokens"));
      break;
    }
  }
}

ToolCall& ResponseTap::tool_call(uint64_t choice, uint64_t index) {
  for (auto& tc : facts_.tool_calls) {
    if (tc.choice_index == choice && tc.tool_call_index == index) return tc;
  }
  facts_.tool_calls.push_back(ToolCall{choice, index, "", ""});
  return facts_.tool_calls.back();
}

void ResponseTap::on_data(std::string_view data, double t, std::string& out) {
  if (!facts_.event_stream) {
    // A JSON (or other) body: relayed unchanged, parsed once complete. Cap what is kept for
    // parsing so a huge body cannot exhaust memory; facts then stay unknown.
    if (pending_.size() < (64u << 20)) pending_.append(data);
    out.append(data);
    return;
  }
  size_t scan_from = pending_.size() >= 3 ? pending_.size() - 3 : 0;
  pending_.append(data);
  size_t start = 0;
  for (;;) {
    size_t lf = pending_.find("\n\n", scan_from);
    size_t crlf = pending_.find("\r\n\r\n", scan_from);
    size_t end, term;
    if (lf == std::string::npos && crlf == std::string::npos) break;
    if (crlf != std::string::npos && (lf == std::string::npos || crlf < lf)) {
      end = crlf;
      term = 4;
    } else {
      end = lf;
      term = 2;
    }
    std::string_view ev(pending_.data() + start, end - start);
    // Parse the fields of one event (SSE: "event:", "data:" lines; ":" comments).
    std::string name, payload;
    bool have_data = false;
    size_t p = 0;
    while (p <= ev.size()) {
      size_t nl = ev.find('\n', p);
      std::string_view line = ev.substr(p, nl == std::string_view::npos ? std::string_view::npos : nl - p);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      auto field = [&](std::string_view key) -> std::optional<std::string_view> {
        if (line.substr(0, key.size()) != key) return std::nullopt;
        std::string_view v = line.substr(key.size());
        if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        return v;
      };
      if (auto v = field("data:")) {
        if (have_data) payload += '\n';
        payload.append(*v);
        have_data = true;
      } else if (auto v2 = field("event:")) {
        name.assign(*v2);
      }
      if (nl == std::string_view::npos) break;
      p = nl + 1;
    }
    bool keep = true;
    if (have_data || !name.empty()) keep = on_event(name, payload, t);
    if (keep) out.append(pending_, start, end + term - start);
    start = end + term;
    scan_from = start;
  }
  pending_.erase(0, start);
}

void ResponseTap::on_end(double now_ms, std::string& out) {
  if (!facts_.event_stream) {
    if (!pending_.empty()) {
      Json body = Json::parse(pending_, nullptr, false);
      if (!body.is_discarded()) observe_body(body);
    }
    pending_.clear();
    return;
  }
  // An unterminated last event: relay it as is (the client decides what it means).
  if (!pending_.empty()) out.append(pending_);
  pending_.clear();
}

bool ResponseTap::on_event(std::string_view event_name, std::string_view data, double t) {
  facts_.events++;
  if (data == "[DONE]") {
    if (api_ == Api::kChat || api_ == Api::kCompletions) facts_.terminal_event = true;
    return true;
  }
  // One parser per thread, reused: its buffers grow to the largest event and stay (a tap runs on
  // one thread at a time and keeps no element past this call).
  thread_local simdjson::dom::parser parser;
  Elem j;
  const bool is_object = !parser.parse(data.data(), data.size()).get(j) && j.is_object();
  if (event_name == "error") {
    // Anthropic: event: error, data {"type":"error","error":{"type":"overloaded_error",...}};
    // a payload that is not JSON keeps its first bytes as the message.
    if (!is_object) note_error(Json(std::string(data.substr(0, 500))));
  }
  if (!is_object) return true;
  const auto [error, type, model, message, response, choices, usage_m] =
      members<7>(j, {"error", "type", "model", "message", "response", "choices", "usage"});
  if (error) {
    note_error(*error);
  } else if (event_name == "error" || (type && str_of(*type) == "error")) {
    note_error(j);  // Responses: {"type":"error","code":...,"message":...}
  }
  if (facts_.model.empty()) {
    if (model) facts_.model = str_of(*model);
    if (facts_.model.empty()) {
      if (message) facts_.model = str_at(*message, "model");
      if (response) facts_.model = str_at(*response, "model");
    }
  }
  switch (api_) {
    case Api::kChat:
    case Api::kCompletions: {
      bool empty_choices = !choices || elements(*choices).size() == 0;
      if (usage_m) usage(*usage_m);
      if (empty_choices) {
        if (hide_usage_ && usage_m) {
          facts_.dropped_events++;
          return false;
        }
        return true;
      }
      uint64_t bytes = 0;
      bool any = false;
      for (Elem c : elements(*choices)) {
        const auto [index, finish_reason, text, delta] = members<4>(c, {"index", "finish_reason", "text", "delta"});
        uint64_t ci = index ? u64_of(*index).value_or(0) : 0;
        if (finish_reason && finish_reason->is_string()) facts_.finish_reason = str_of(*finish_reason);
        if (api_ == Api::kCompletions) {
          uint64_t n = text_len(text);
          if (n) {
            bytes += n;
            any = true;
          }
          continue;
        }
        if (!delta) continue;
        const auto [content, reasoning_content, reasoning, tool_calls] =
            members<4>(*delta, {"content", "reasoning_content", "reasoning", "tool_calls"});
        for (const auto* v : {&content, &reasoning_content, &reasoning}) {
          uint64_t n = text_len(*v);
          if (n) {
            bytes += n;
            any = true;
          }
        }
        if (const auto& tcs = tool_calls; tcs && tcs->is_array()) {
          for (Elem tc : elements(*tcs)) {
            ToolCall& rec = tool_call(ci, u64_at(tc, "index").value_or(0));
            if (std::string id = str_at(tc, "id"); !id.empty()) rec.id = id;
            if (auto f = member(tc, "function")) {
              if (std::string nm = str_at(*f, "name"); !nm.empty()) rec.name = nm;
              bytes += text_len(member(*f, "arguments"));
            }
            any = true;
          }
        }
      }
      if (any) {
        if (log_) log_chat(j, *choices);
        content(t, bytes);
        std::optional<uint64_t> cum;
        if (usage_m) cum = u64_at(*usage_m, "completion_tokens");
        if (chunk_usage_ok_ && cum && *cum >= chunk_usage_prev_) {
          facts_.chunk_tokens.push_back(*cum - chunk_usage_prev_);
          chunk_usage_prev_ = *cum;
        } else if (chunk_usage_ok_) {
          chunk_usage_ok_ = false;
          facts_.chunk_tokens.clear();
        }
      }
      return true;
    }
    case Api::kMessages: on_messages_event(j, t); return true;
    case Api::kResponses: on_responses_event(j, t); return true;
  }
  return true;
}

template <class V>
void ResponseTap::log_chat(const V& j, const V& choices) {
  StreamLog& l = *log_;
  if (l.id.empty()) {
    l.id = str_at(j, "id");
    l.model = str_at(j, "model");
    l.created = u64_at(j, "created");
  }
  l.tokens++;
  for (Elem c : elements(choices)) {
    if (u64_at(c, "index").value_or(0) != 0) l.refuse("more than one choice (n > 1)");
    auto d = member(c, "delta");
    if (!d) continue;
    if (member(*d, "tool_calls")) l.refuse("a tool call was streamed");
    if (text_len(member(*d, "reasoning_content")) || text_len(member(*d, "reasoning")))
      l.refuse("reasoning was streamed");
    if (auto text = member(*d, "content")) l.text += str_of(*text);
  }
}

template <class V>
void ResponseTap::on_messages_event(const V& j, double t) {
  std::string type = str_at(j, "type");
  if (log_) {
    StreamLog& l = *log_;
    if (type == "content_block_start") {
      auto b = member(j, "content_block");
      l.blocks_started++;
      if (b && str_at(*b, "type") == "text") l.open_block = static_cast<int>(u64_at(j, "index").value_or(0));
      else l.refuse("a " + (b ? str_at(*b, "type") : std::string("?")) + " block was streamed");
    } else if (type == "content_block_stop") {
      if (static_cast<int>(u64_at(j, "index").value_or(0)) == l.open_block) l.open_block = -1;
    } else if (type == "content_block_delta") {
      auto d = member(j, "delta");
      if (d && str_at(*d, "type") == "text_delta") {
        l.text += str_at(*d, "text");
        l.tokens++;
      } else {
        l.refuse("a " + (d ? str_at(*d, "type") : std::string("?")) + " was streamed");
      }
    }
  }
  if (type == "message_start") {
    if (auto m = member(j, "message")) {
      if (auto u = member(*m, "usage")) usage(*u);
    }
  } else if (type == "content_block_start") {
    auto b = member(j, "content_block");
    if (b && str_at(*b, "type") == "tool_use") {
      uint64_t idx = facts_.tool_calls.size();
      ToolCall& rec = tool_call(0, idx);
      rec.id = str_at(*b, "id");
      rec.name = str_at(*b, "name");
    }
  } else if (type == "content_block_delta") {
    if (auto d = member(j, "delta")) {
      uint64_t n =
          text_len(member(*d, "text")) + text_len(member(*d, "thinking")) + text_len(member(*d, "partial_json"));
      if (n) content(t, n);
    }
  } else if (type == "message_delta") {
    if (auto d = member(j, "delta")) {
      if (std::string sr = str_at(*d, "stop_reason"); !sr.empty()) facts_.finish_reason = sr;
    }
    // message_delta carries the final output count (and may repeat the input counts, as 0,
    // or leave them out: usage() never lowers a count, case 27).
    if (auto u = member(j, "usage")) usage(*u);
  } else if (type == "message_stop") {
    facts_.terminal_event = true;
  }
}

template <class V>
void ResponseTap::on_responses_event(const V& j, double t) {
  std::string type = str_at(j, "type");
  if (type == "response.output_text.delta" || type == "response.reasoning_text.delta" ||
      type == "response.reasoning_summary_text.delta" || type == "response.function_call_arguments.delta") {
    uint64_t n = text_len(member(j, "delta"));
    if (n) content(t, n);
  } else if (type == "response.output_item.added" || type == "response.output_item.done") {
    auto item = member(j, "item");
    if (item && str_at(*item, "type") == "function_call") {
      uint64_t oi = u64_at(j, "output_index").value_or(facts_.tool_calls.size());
      ToolCall& rec = tool_call(0, oi);
      if (std::string id = str_at(*item, "call_id"); !id.empty()) rec.id = id;
      if (std::string nm = str_at(*item, "name"); !nm.empty()) rec.name = nm;
    }
  } else if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    if (auto r = member(j, "response")) {
      // Once per response: the whole-body rules run on a Json copy.
      Json copy = Json::parse(simdjson::minify(*r), nullptr, false);
      if (copy.is_object()) copy.erase("output");  // items were seen as events; observe_body would re-add them
      observe_body(copy);
    }
    facts_.terminal_event = true;
    if (type == "response.failed" && !facts_.error_event) {
      auto r = member(j, "response");
      auto e = r ? member(*r, "error") : std::nullopt;
      if (e) note_error(*e);
      else note_error(Json(std::string("response.failed")));
      if (facts_.error_type.empty() || facts_.error_type == "stream_error") facts_.error_type = "response.failed";
    }
  }
}

template <class V>
void ResponseTap::note_error(const V& e) {
  if (facts_.error_event) return;  // the first error is the cause; later ones are its echoes
  facts_.error_event = true;
  if (e.is_object()) {
    facts_.error_type = str_at(e, "type");
    if (facts_.error_type.empty() || facts_.error_type == "error") {
      // {"type":"error","error":{...}} was unwrapped by the caller; Responses puts a code here.
      std::string code = str_at(e, "code");
      facts_.error_type = code.empty() ? "stream_error" : code;
    }
    facts_.error_message = str_at(e, "message");
  } else if (e.is_string()) {
    facts_.error_type = "stream_error";
    facts_.error_message = str_of(e);
  } else {
    facts_.error_type = "stream_error";
  }
  if (facts_.error_message.size() > 500) facts_.error_message.resize(500);
}

void ResponseTap::observe_body(const Json& body) {
  if (!body.is_object()) return;
  if (facts_.model.empty()) facts_.model = str_at(body, "model");
  // An error body ({"error": {...}} from OpenAI-style servers and Anthropic; vLLM's flat
  // {"object":"error","message":...}) keeps the upstream's type and message for the row.
  if (const Json* e = member(body, "error")) note_error(*e);
  else if (str_at(body, "object") == "error") note_error(body);
  if (const Json* u = member(body, "usage")) usage(*u);
  switch (api_) {
    case Api::kChat:
    case Api::kCompletions:
      if (const Json* choices = member(body, "choices"); choices && choices->is_array()) {
        for (const Json& c : *choices) {
          uint64_t ci = u64_at(c, "index").value_or(0);
          if (const Json* fr = member(c, "finish_reason"); fr && fr->is_string())
            facts_.finish_reason = fr->get<std::string>();
          facts_.content_bytes += text_len(member(c, "text"));
          if (const Json* m = member(c, "message")) {
            facts_.content_bytes += text_len(member(*m, "content"));
            if (const Json* tcs = member(*m, "tool_calls"); tcs && tcs->is_array()) {
              uint64_t i = 0;
              for (const Json& tc : *tcs) {
                ToolCall& rec = tool_call(ci, i++);
                rec.id = str_at(tc, "id");
                if (const Json* f = member(tc, "function")) rec.name = str_at(*f, "name");
              }
            }
          }
        }
      }
      break;
    case Api::kMessages:
      if (std::string sr = str_at(body, "stop_reason"); !sr.empty()) facts_.finish_reason = sr;
      if (const Json* blocks = member(body, "content"); blocks && blocks->is_array()) {
        for (const Json& b : *blocks) {
          facts_.content_bytes += text_len(member(b, "text"));
          if (str_at(b, "type") == "tool_use") {
            ToolCall& rec = tool_call(0, facts_.tool_calls.size());
            rec.id = str_at(b, "id");
            rec.name = str_at(b, "name");
          }
        }
      }
      break;
    case Api::kResponses: {
      if (const Json* out = member(body, "output"); out && out->is_array()) {
        uint64_t i = 0;
        for (const Json& item : *out) {
          if (str_at(item, "type") == "function_call") {
            ToolCall& rec = tool_call(0, i);
            rec.id = str_at(item, "call_id");
            rec.name = str_at(item, "name");
          }
          ++i;
        }
      }
      // The Responses API has no finish_reason: map its status the way chat reports it.
      std::string status = str_at(body, "status");
      if (status == "completed") {
        facts_.finish_reason = facts_.tool_calls.empty() ? "stop" : "tool_calls";
      } else if (status == "incomplete") {
        std::string reason;
        if (const Json* d = member(body, "incomplete_details")) reason = str_at(*d, "reason");
        facts_.finish_reason = reason == "max_output_tokens" ? "length" : (reason.empty() ? status : reason);
      } else if (!status.empty()) {
        facts_.finish_reason = status;
      }
      break;
    }
  }
}

}  // namespace dyn::serve
