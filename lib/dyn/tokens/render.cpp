// Request renderer (SPEC 4.2). One renderer, instantiated on two readers of a parsed body: a Json
// tree (the tools that hold one) and a simdjson DOM element (dyn-route serve's request path, where
// parsing every body into a Json tree and printing it again was half the router's instructions,
// issue 16). Sharing the renderer keeps the two texts equal by construction; what each reader must
// do alike (a member's value, a compact print) is said beside it.
#include "dyn/tokens/render.h"

#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include <simdjson.h>

#include "dyn/base/json_write.h"

namespace dyn::tokens {

namespace {

/// A Json value as the renderer reads it.
class JsonReader {
 public:
  explicit JsonReader(const Json& j) : j_(&j) {}
  bool is_string() const { return j_->is_string(); }
  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  std::string_view str() const { return j_->get_ref<const std::string&>(); }
  /// The member `key` of an object; nullopt when absent or when this is not an object.
  std::optional<JsonReader> get(std::string_view key) const {
    if (!j_->is_object()) return std::nullopt;
    auto it = j_->find(key);
    if (it == j_->end()) return std::nullopt;
    return JsonReader(*it);
  }
  template <class F>
  void each(F&& f) const {
    for (const auto& x : *j_) f(JsonReader(x));
  }
  template <class Out>
  void dump(Out& out) const {
    out += j_->dump();
  }

 private:
  const Json* j_;
};

/// Thrown where a simdjson reading could differ from a Json tree's: an object with a repeated
/// key (nlohmann keeps one member, at the first key's place with the last value).
struct Ambiguous {};

/// Throws Ambiguous when `o` repeats a key.
void check_unique_keys(simdjson::dom::object o) {
  std::vector<std::string_view> keys;
  for (auto field : o) {
    for (std::string_view k : keys)
      if (k == field.key) throw Ambiguous{};
    keys.push_back(field.key);
  }
}

/// Appends `e` as nlohmann's compact dump() of the same text prints it (json_write's writers):
/// members in their order; simdjson and nlohmann's strtod both round a number literal correctly,
/// so they hold the same double.
void dump_element(simdjson::dom::element e, std::string& out) {
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::ARRAY: {
      out += '[';
      bool first = true;
      for (auto x : simdjson::dom::array(e)) {
        if (!first) out += ',';
        first = false;
        dump_element(x, out);
      }
      out += ']';
      return;
    }
    case T::OBJECT: {
      auto o = simdjson::dom::object(e);
      check_unique_keys(o);
      out += '{';
      bool first = true;
      for (auto field : o) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, field.key);
        out += ':';
        dump_element(field.value, out);
      }
      out += '}';
      return;
    }
    case T::STRING: append_json_string(out, std::string_view(e)); return;
    case T::INT64: append_json_number(out, int64_t(e)); return;
    case T::UINT64: append_json_number(out, uint64_t(e)); return;
    case T::DOUBLE: append_json_number(out, double(e)); return;
    case T::BOOL: out += bool(e) ? "true" : "false"; return;
    case T::NULL_VALUE: out += "null"; return;
  }
}

/// A simdjson DOM element as the renderer reads it.
class DomReader {
 public:
  explicit DomReader(simdjson::dom::element e) : e_(e) {}
  bool is_string() const { return e_.type() == simdjson::dom::element_type::STRING; }
  bool is_object() const { return e_.type() == simdjson::dom::element_type::OBJECT; }
  bool is_array() const { return e_.type() == simdjson::dom::element_type::ARRAY; }
  std::string_view str() const { return std::string_view(e_); }
  /// As JsonReader::get; a key present twice throws Ambiguous.
  std::optional<DomReader> get(std::string_view key) const {
    if (!is_object()) return std::nullopt;
    std::optional<DomReader> found;
    for (auto field : simdjson::dom::object(e_)) {
      if (field.key != key) continue;
      if (found) throw Ambiguous{};
      found = DomReader(field.value);
    }
    return found;
  }
  template <class F>
  void each(F&& f) const {
    for (auto x : simdjson::dom::array(e_)) f(DomReader(x));
  }
  template <class Out>
  void dump(Out& out) const {
    if constexpr (std::is_same_v<Out, std::string>) {
      dump_element(e_, out);
    } else {  // a sink that takes text (TextBlockHasher): the print is made, then appended
      std::string text;
      dump_element(e_, text);
      out += text;
    }
  }

 private:
  simdjson::dom::element e_;
};

/// The string member `key`, or "" when it is absent or not a string.
template <class R>
std::string_view str_or_empty(const R& v, std::string_view key) {
  auto m = v.get(key);
  return m && m->is_string() ? m->str() : std::string_view{};
}

// `Out` receives the text: a std::string, or a sink with the same += (tokens::TextBlockHasher).
template <class R, class Out>
void append_text(const R& v, Out& out);

// Text of one content part / block (OpenAI parts, Anthropic blocks, Responses content items).
template <class R, class Out>
void append_part(const R& p, Out& out) {
  if (p.is_string()) {
    out += p.str();
    return;
  }
  if (!p.is_object()) return;
  if (auto t = p.get("text"); t && t->is_string()) {
    out += t->str();
    return;
  }
  std::string_view type = str_or_empty(p, "type");
  if (type == "tool_use") {
    out += str_or_empty(p, "name");
    if (auto in = p.get("input")) in->dump(out);
  } else if (type == "tool_result") {
    if (auto c = p.get("content")) append_text(*c, out);
  } else if (type == "thinking") {
    out += str_or_empty(p, "thinking");
  }
}

template <class R, class Out>
void append_text(const R& v, Out& out) {
  if (v.is_string()) out += v.str();
  else if (v.is_array()) v.each([&](const R& p) { append_part(p, out); });
  else if (v.is_object()) append_part(v, out);
}

template <class R, class Out>
void append_args(const R& a, Out& out) {
  if (a.is_string()) out += a.str();
  else a.dump(out);
}

template <class R, class Out>
void render_item(const R& item, Out& out) {
  if (item.is_string()) {
    out += "user\n";
    out += item.str();
    out += '\n';
    return;
  }
  if (!item.is_object()) return;
  std::string_view type = str_or_empty(item, "type");
  auto role = item.get("role");
  out += role && role->is_string() ? role->str() : type;
  out += '\n';
  if (type == "function_call" || type == "custom_tool_call") {
    out += str_or_empty(item, "name");
    if (auto a = item.get("arguments")) append_args(*a, out);
    if (auto in = item.get("input")) append_args(*in, out);
  } else if (type == "function_call_output" || type == "custom_tool_call_output") {
    if (auto o = item.get("output")) append_text(*o, out);
  } else {
    if (auto c = item.get("content")) append_text(*c, out);
    if (auto calls = item.get("tool_calls"); calls && calls->is_array()) {
      calls->each([&](const R& tc) {
        auto f = tc.get("function");
        const R& fn = f ? *f : tc;
        out += str_or_empty(fn, "name");
        if (auto a = fn.get("arguments")) append_args(*a, out);
      });
    }
  }
  out += '\n';
}

template <class R, class Out>
void render(const R& body, Out& out) {
  if (!body.is_object()) return;
  auto messages = body.get("messages");
  auto input = body.get("input");
  if (auto p = body.get("prompt"); p && !messages && !input) {
    if (p->is_string()) out += p->str();
    else if (p->is_array())
      p->each([&](const R& x) {
        if (x.is_string()) out += x.str();
      });
    return;
  }
  if (auto tools = body.get("tools"); tools && tools->is_array())
    tools->each([&](const R& t) {
      t.dump(out);
      out += '\n';
    });
  if (auto s = body.get("system")) {
    append_text(*s, out);
    out += '\n';
  }
  if (auto i = body.get("instructions"); i && i->is_string()) {
    out += i->str();
    out += '\n';
  }
  if (messages && messages->is_array()) messages->each([&](const R& m) { render_item(m, out); });
  if (input) {
    if (input->is_string()) render_item(*input, out);
    else if (input->is_array()) input->each([&](const R& m) { render_item(m, out); });
  }
}

}  // namespace

std::string render_request(const Json& body) {
  std::string out;
  render(JsonReader(body), out);
  return out;
}

std::optional<std::string> render_request_dom(simdjson::dom::element body, size_t reserve) {
  std::string out;
  if (body.type() == simdjson::dom::element_type::OBJECT) out.reserve(reserve);
  try {
    render(DomReader(body), out);
  } catch (const Ambiguous&) {
    return std::nullopt;
  }
  return out;
}

bool render_request_dom(simdjson::dom::element body, TextBlockHasher& out) {
  try {
    render(DomReader(body), out);
  } catch (const Ambiguous&) {
    return false;
  }
  return true;
}

}  // namespace dyn::tokens
