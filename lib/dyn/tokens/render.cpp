// Request renderer.
#include "dyn/tokens/render.h"

namespace dyn::tokens {

namespace {

std::string as_text(const Json& v);

// Text of one content part / block (OpenAI parts, Anthropic blocks, Responses content items).
std::string part_text(const Json& p) {
  if (p.is_string()) return p.get<std::string>();
  if (!p.is_object()) return {};
  std::string type = p.value("type", "");
  if (p.contains("text") && p["text"].is_string()) return p["text"].get<std::string>();
  if (type == "tool_use") {
    std::string s = p.value("name", "");
    if (p.contains("input")) s += p["input"].dump();
    return s;
  }
  if (type == "tool_result") return p.contains("content") ? as_text(p["content"]) : "";
  if (type == "thinking" && p.contains("thinking") && p["thinking"].is_string())
    return p["thinking"].get<std::string>();
  return {};
}

std::string as_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string s;
  if (v.is_array())
    for (const auto& p : v) s += part_text(p);
  else if (v.is_object()) s += part_text(v);
  return s;
}

std::string args_text(const Json& a) { return a.is_string() ? a.get<std::string>() : a.dump(); }

void render_item(const Json& item, std::string& out) {
  if (item.is_string()) {
    out += "user\n" + item.get<std::string>() + "\n";
    return;
  }
  if (!item.is_object()) return;
  std::string role =
      item.contains("role") && item["role"].is_string() ? item["role"].get<std::string>() : item.value("type", "");
  std::string text;
  std::string type = item.value("type", "");
  if (type == "function_call" || type == "custom_tool_call") {
    text = item.value("name", "");
    if (item.contains("arguments")) text += args_text(item["arguments"]);
    if (item.contains("input")) text += args_text(item["input"]);
  } else if (type == "function_call_output" || type == "custom_tool_call_output") {
    if (item.contains("output")) text = as_text(item["output"]);
  } else {
    if (item.contains("content")) text = as_text(item["content"]);
    if (item.contains("tool_calls") && item["tool_calls"].is_array()) {
      for (const auto& tc : item["tool_calls"]) {
        const Json& fn = tc.contains("function") ? tc["function"] : tc;
        text += fn.value("name", "");
        if (fn.contains("arguments")) text += args_text(fn["arguments"]);
      }
    }
  }
  out += role;
  out += '\n';
  out += text;
  out += '\n';
}

}  // namespace

std::string render_request(const Json& body) {
  if (!body.is_object()) return {};
  if (body.contains("prompt") && !body.contains("messages") && !body.contains("input")) {
    const Json& p = body["prompt"];
    if (p.is_string()) return p.get<std::string>();
    std::string s;
    if (p.is_array())
      for (const auto& x : p)
        if (x.is_string()) s += x.get<std::string>();
    return s;
  }
  std::string out;
  if (body.contains("tools") && body["tools"].is_array())
    for (const auto& t : body["tools"]) out += t.dump() + "\n";
  if (body.contains("system")) out += as_text(body["system"]) + "\n";
  if (body.contains("instructions") && body["instructions"].is_string())
    out += body["instructions"].get<std::string>() + "\n";
  if (body.contains("messages") && body["messages"].is_array())
    for (const auto& m : body["messages"]) render_item(m, out);
  if (body.contains("input")) {
    const Json& in = body["input"];
    if (in.is_string()) render_item(in, out);
    else if (in.is_array())
      for (const auto& m : in) render_item(m, out);
  }
  return out;
}

}  // namespace dyn::tokens
