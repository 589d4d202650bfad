// Anthropic Messages and OpenAI Responses bodies in the chat-completions form vLLM's frontend
// converts them to, and the two Python spellings that conversion puts in it.
#include "dyn/api/chat_form.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace dyn::api {

namespace {

Error bad(std::string what) { return Error{std::move(what), kExitBadData}; }

/// Python's truthiness of a JSON value: null, false, 0, "", [] and {} are false.
bool truthy(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return v.get<bool>();
    case Json::value_t::string: return !v.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !v.empty();
    case Json::value_t::number_float: return v.get<double>() != 0;
    default: return v != 0;
  }
}

/// body[key] when present, else null.
const Json& member(const Json& body, const char* key) {
  static const Json kNull;
  if (!body.is_object()) return kNull;
  auto it = body.find(key);
  return it == body.end() ? kNull : *it;
}

std::string text_of(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

/// Python's repr of a float (the shortest digits that read back, as 'short' float_repr_style
/// spells them: fixed notation for decimal exponents -4 < e <= 16, else d.ddde+XX).
std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  std::string sign;
  if (!sci.empty() && sci.front() == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int decpt = exp10 + 1;  // digits before the decimal point
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) return sign + "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    if (static_cast<size_t>(decpt) >= digits.size())
      return sign + digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    return sign + digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ex[16];  // "e-308" at most; sized for any int so -Wformat-truncation can prove it fits
  std::snprintf(ex, sizeof ex, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + ex;
}

/// Decodes one UTF-8 code point at s[i] (valid UTF-8: the JSON parser checked it); advances i.
uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const int n = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
  uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1f) : n == 3 ? (b & 0x0f) : (b & 0x07);
  for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += static_cast<size_t>(n);
  return cp;
}

/// Python's str.isprintable for a non-ASCII code point, for the code points it escapes that
/// text carries in practice: C1 controls, separators other than the space, format characters,
/// surrogates and private use (unassigned code points are taken as printable).
bool python_printable(uint32_t cp) {
  if (cp <= 0xa0 || cp == 0xad || cp == 0x1680 || cp == 0x180e || cp == 0x3000 || cp == 0xfeff) return false;
  if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f)) return false;
  if ((cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) || cp >= 0xf0000) return false;
  return !(cp == 0xe0001 || (cp >= 0xe0020 && cp <= 0xe007f));
}

/// Python's repr of a str: single quotes unless it holds one and no double quote.
std::string python_repr_str(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = next_code_point(s, i);
    char esc[16];
    if (cp == static_cast<uint32_t>(q) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7f) {
      std::snprintf(esc, sizeof esc, "\\x%02x", cp);
      out += esc;
    } else if (cp < 0x80 || python_printable(cp)) {
      out.append(s, start, i - start);
    } else {
      std::snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += esc;
    }
  }
  return out + q;
}

/// Python's spelling of a JSON value as json.loads reads it: json.dumps with its defaults
/// (`as_repr` false: separators ", " and ": ", ensure_ascii) or repr (`as_repr` true: quoted as
/// python_repr_str, True, False, None). Containers and floats are spelt alike by both.
void python_spell(const Json& v, bool as_repr, std::string& out) {
  switch (v.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += as_repr ? python_repr_str(it.key()) : Json(it.key()).dump(-1, ' ', /*ensure_ascii=*/true);
        out += ": ";
        python_spell(it.value(), as_repr, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        python_spell(v[i], as_repr, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float: out += python_float(v.get<double>()); return;
    case Json::value_t::string:
      if (as_repr) return void(out += python_repr_str(v.get_ref<const std::string&>()));
      break;
    case Json::value_t::boolean:
      if (as_repr) return void(out += v.get<bool>() ? "True" : "False");
      break;
    case Json::value_t::null:
      if (as_repr) return void(out += "None");
      break;
    default: break;
  }
  out += v.dump(-1, ' ', /*ensure_ascii=*/true);
}

/// An Anthropic image source as the URL vLLM gives the chat template (_convert_image_source_to_url):
/// a url source as its url, anything else as a base64 data URI.
std::string image_url(const Json& source) {
  if (text_of(member(source, "type")) == "url") return text_of(member(source, "url"));
  const Json& mt = member(source, "media_type");
  return "data:" + (mt.is_string() ? mt.get<std::string>() : std::string("image/jpeg")) + ";base64," +
         text_of(member(source, "data"));
}

/// A user's tool_result block as the tool message (and the user message of its images, and the
/// tool message of its tool references) vLLM appends before the user's own message
/// (_convert_user_tool_result).
void user_tool_result(const Json& b, Json& out) {
  const Json& content = member(b, "content");
  const Json& use_id = member(b, "tool_use_id");
  const Json call_id = truthy(use_id) ? use_id : Json("");
  std::string text;
  Json images = Json::array(), refs = Json::array();
  if (content.is_string()) {
    text = content.get<std::string>();
  } else if (content.is_array()) {
    bool first = true;
    for (const Json& item : content) {
      if (!item.is_object()) continue;
      const std::string type = text_of(member(item, "type"));
      if (type == "text") {
        if (!first) text += "\n";
        first = false;
        text += text_of(member(item, "text"));
      } else if (type == "image") {
        if (std::string url = image_url(member(item, "source")); !url.empty())
          images.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
      } else if (type == "tool_reference") {
        const Json& name = truthy(member(item, "tool_name")) ? member(item, "tool_name") : member(item, "name");
        if (truthy(name)) refs.push_back({{"type", "tool_reference"}, {"name", name}});
      }
    }
  }
  out.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}});
  if (!images.empty()) out.push_back({{"role", "user"}, {"content", std::move(images)}});
  if (!refs.empty()) out.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(refs)}});
}

/// One Anthropic message's content blocks into `om` (vLLM's _convert_message_content); a user's
/// tool results go to `out` first.
void convert_blocks(const Json& blocks, const std::string& role, Json& om, Json& out) {
  Json parts = Json::array(), calls = Json::array();
  std::string reasoning;
  bool has_reasoning = false;
  for (const Json& b : blocks) {
    const std::string type = text_of(member(b, "type"));
    if (type == "text" && truthy(member(b, "text"))) {
      parts.push_back({{"type", "text"}, {"text", member(b, "text")}});
    } else if (type == "image" && truthy(member(b, "source"))) {
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", image_url(member(b, "source"))}}}});
    } else if (type == "thinking" && !member(b, "thinking").is_null()) {
      reasoning += text_of(member(b, "thinking"));
      has_reasoning = true;
    } else if (type == "tool_use") {
      // vLLM names an id-less call after the clock; clients send ids (Claude Code always does).
      const Json& id = member(b, "id");
      const Json& input = member(b, "input");
      calls.push_back({{"id", truthy(id) ? id : Json("call_0")},
                       {"type", "function"},
                       {"function",
                        {{"name", truthy(member(b, "name")) ? member(b, "name") : Json("")},
                         {"arguments", python_json_dumps(truthy(input) ? input : Json::object())}}}});
    } else if (type == "tool_result") {
      if (role == "user") {
        user_tool_result(b, out);
      } else {
        const Json& content = member(b, "content");
        parts.push_back({{"type", "text"}, {"text", "Tool result: " + (truthy(content) ? python_str(content) : "")}});
      }
    }  // redacted_thinking (opaque) and tool_reference blocks give the template nothing
  }
  if (has_reasoning) om["reasoning"] = reasoning;
  if (!calls.empty()) om["tool_calls"] = std::move(calls);
  if (!parts.empty())
    om["content"] = parts.size() == 1 && parts[0]["type"] == "text" ? parts[0]["text"] : std::move(parts);
}

/// The system prompt vLLM gives the template (_convert_system_message): the `system` field's
/// text and then that of system-role messages, joined, without Claude Code's attribution block
/// ("x-anthropic-billing-header...", which holds a per-request hash); "" when there is none.
std::string system_text(const Json& body) {
  std::string text;
  auto add_blocks = [&](const Json& blocks) {
    if (blocks.is_string()) return void(text += blocks.get<std::string>());
    if (!blocks.is_array()) return;
    for (const Json& b : blocks) {
      const std::string t = text_of(member(b, "text"));
      if (text_of(member(b, "type")) == "text" && !t.empty() && t.rfind("x-anthropic-billing-header", 0) != 0)
        text += t;
    }
  };
  if (const Json& sys = member(body, "system"); truthy(sys)) add_blocks(sys);
  for (const Json& m : member(body, "messages"))
    if (member(m, "role") == "system") add_blocks(member(m, "content"));
  return text;
}

}  // namespace

std::string python_json_dumps(const Json& value) {
  std::string out;
  python_spell(value, /*as_repr=*/false, out);
  return out;
}

std::string python_str(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  std::string out;
  python_spell(value, /*as_repr=*/true, out);
  return out;
}

Expected<Json> chat_from_messages(const Json& body) {
  const Json& msgs = member(body, "messages");
  if (!msgs.is_array()) return bad("an Anthropic Messages request needs a \"messages\" array");
  Json out = Json::array();
  if (std::string sys = system_text(body); !sys.empty()) out.push_back({{"role", "system"}, {"content", sys}});
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Json& m = msgs[i];
    const Json& role = member(m, "role");
    const Json& content = member(m, "content");
    if (!role.is_string() || !(content.is_string() || content.is_array()))
      return bad("message " + std::to_string(i) + " is not {role, content} (the engine refuses it)");
    if (role == "system") continue;  // in the system prompt
    Json om = {{"role", role}};
    if (content.is_string()) om["content"] = content;
    else convert_blocks(content, role.get<std::string>(), om, out);
    if (role == "user" && !om.contains("content")) continue;  // its tool results went before it
    out.push_back(std::move(om));
  }
  Json chat = {{"messages", std::move(out)}};
  if (const Json& tools = member(body, "tools"); tools.is_array()) {
    Json t = Json::array();
    for (const Json& tool : tools) {
      Json f = {{"name", member(tool, "name")},
                {"description", member(tool, "description")},
                {"parameters", member(tool, "input_schema")}};
      if (const Json& dl = member(tool, "defer_loading"); !dl.is_null()) f["defer_loading"] = dl;
      t.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    chat["tools"] = std::move(t);
  }
  if (const Json& kw = member(body, "chat_template_kwargs"); kw.is_object()) chat["chat_template_kwargs"] = kw;
  if (const Json& effort = member(member(body, "output_config"), "effort"); !effort.is_null())
    chat["reasoning_effort"] = effort;
  return chat;
}

namespace {

/// The assistant message a converted item merges into: the last message when it is one.
Json* last_assistant(Json& msgs) {
  if (msgs.empty() || member(msgs.back(), "role") != "assistant") return nullptr;
  return &msgs.back();
}

/// A tool call item into the assistant message before it, or a new one (vLLM's merge).
void add_tool_call(Json& msgs, Json call) {
  if (Json* prev = last_assistant(msgs)) {
    Json& calls = (*prev)["tool_calls"];
    if (!calls.is_array()) calls = Json::array();
    calls.push_back(std::move(call));
    return;
  }
  msgs.push_back({{"role", "assistant"}, {"tool_calls", Json::array({std::move(call)})}});
}

/// `text` as the content of the assistant message before it when that has none, else a new one.
void add_assistant(Json& msgs, const char* key, Json text) {
  Json* prev = last_assistant(msgs);
  if (prev && (!prev->contains(key) || (*prev)[key].is_null())) {
    (*prev)[key] = std::move(text);
    return;
  }
  msgs.push_back({{"role", "assistant"}, {key, std::move(text)}});
}

/// One Responses input item into `msgs` (vLLM's _construct_message_from_response_item).
std::optional<Error> convert_item(const Json& item, size_t i, Json& msgs) {
  const std::string where = "input item " + std::to_string(i);
  if (!item.is_object()) return bad(where + " is not an object");
  const std::string type = text_of(member(item, "type"));
  if (type == "function_call" || type == "custom_tool_call") {
    if (truthy(member(item, "namespace"))) return bad(where + ": a namespaced tool call");
    Json args = type == "function_call" ? member(item, "arguments")
                                        : Json(python_json_dumps({{"input", member(item, "input")}}));
    add_tool_call(msgs, {{"id", member(item, "call_id")},
                         {"function", {{"name", member(item, "name")}, {"arguments", std::move(args)}}},
                         {"type", "function"}});
  } else if (type == "reasoning") {
    if (truthy(member(item, "encrypted_content"))) return bad(where + ": encrypted reasoning (the engine refuses it)");
    const Json& content = member(item, "content");
    const Json& summary = member(item, "summary");
    Json text = content.is_array() && !content.empty()   ? member(content[0], "text")
                : summary.is_array() && !summary.empty() ? member(summary[0], "text")
                                                         : Json("");
    add_assistant(msgs, "reasoning", std::move(text));
  } else if (type == "function_call_output" || type == "custom_tool_call_output") {
    msgs.push_back({{"role", "tool"}, {"content", member(item, "output")}, {"tool_call_id", member(item, "call_id")}});
  } else if (member(item, "role") == "assistant") {
    // Its first text part (vLLM: an assistant turn of only a tool call may have no content: "").
    const Json& content = member(item, "content");
    const Json& first = content.is_array() && !content.empty() ? content[0] : content;
    const Json& text = first.is_string() ? first : member(first, "text");
    add_assistant(msgs, "content", text.is_string() ? text : Json(""));
  } else if (item.contains("role")) {
    msgs.push_back(item);  // the message as given (its input_text parts are read by the template renderer)
  } else {
    return bad(where + " of type '" + type + "' is not converted by the engine's frontend");
  }
  return std::nullopt;
}

}  // namespace

Expected<Json> chat_from_responses(const Json& body) {
  if (!body.is_object()) return bad("a Responses request must be a JSON object");
  for (const char* key : {"previous_response_id", "previous_response", "previous_input_messages"})
    if (truthy(member(body, key)))
      return bad(std::string(key) + ": the engine prepends the turns it stored, which the router cannot see");
  const Json& input = member(body, "input");
  if (!input.is_string() && !input.is_array()) return bad("a Responses request needs an \"input\"");
  Json msgs = Json::array();
  if (const Json& ins = member(body, "instructions"); truthy(ins))
    msgs.push_back({{"role", "system"}, {"content", ins}});
  bool continue_final = false;
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
  } else {
    for (size_t i = 0; i < input.size(); ++i)
      if (auto e = convert_item(input[i], i, msgs)) return *e;
    if (!input.empty() && input.back().is_object()) {
      const Json& last = input.back();
      const std::string type = text_of(member(last, "type"));
      const std::string status = text_of(member(last, "status"));
      continue_final = (type.empty() || type == "message" || type == "reasoning") &&
                       (status == "in_progress" || status == "incomplete");
    }
  }
  Json chat = {{"messages", std::move(msgs)}};
  Json tools = Json::array();
  if (const Json& ts = member(body, "tools"); ts.is_array())
    for (const Json& t : ts) {
      if (member(t, "type") != "function") continue;
      Json f = t;
      f.erase("type");
      tools.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
  if (!tools.empty()) chat["tools"] = std::move(tools);
  chat["add_generation_prompt"] = !continue_final;
  chat["continue_final_message"] = continue_final;
  if (const Json& effort = member(member(body, "reasoning"), "effort"); effort.is_string() && effort != "auto")
    chat["chat_template_kwargs"] = {{"reasoning_effort", effort}};
  return chat;
}

}  // namespace dyn::api
