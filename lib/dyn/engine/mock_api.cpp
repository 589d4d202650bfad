// Mock engine wire shapes: request parsing, scripted replies, SSE and JSON response bodies.
#include "dyn/engine/mock_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"

namespace dyn::engine {
namespace {

const char kFiller[] = "The quick brown fox jumps over the lazy dog. ";
constexpr size_t kFillerLen = sizeof(kFiller) - 1;  // 45 bytes

// Splits text into pieces of >= 4 bytes ending on UTF-8 character boundaries.
std::vector<std::string> split_pieces(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = std::min(s.size(), i + 4);
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint64_t> limit_field(const Json& body, const char* key, std::string* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
    *err = fmt::format("'{}' must be a non-negative integer", key);
    return std::nullopt;
  }
  return it->get<uint64_t>();
}

// Text of a content value: a string, or the text of its parts (text, input_text, output_text,
// tool_result content).
std::string content_text(const Json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array()) {
    for (const Json& p : c) {
      if (p.is_string()) out += p.get<std::string>();
      else if (p.is_object()) {
        if (auto t = p.find("text"); t != p.end() && t->is_string()) out += t->get<std::string>();
        else if (auto k = p.find("content"); k != p.end()) out += content_text(*k);
        else if (auto o = p.find("output"); o != p.end() && o->is_string()) out += o->get<std::string>();
      }
    }
  }
  return out;
}

std::string last_user(const Json& items) {
  if (items.is_string()) return items.get<std::string>();
  if (!items.is_array()) return {};
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (!it->is_object()) continue;
    auto role = it->find("role");
    if (role != it->end() && role->is_string() && *role == "user") {
      if (auto c = it->find("content"); c != it->end()) return content_text(*c);
      return {};
    }
    if (role != it->end() && role->is_string() && *role == "tool") {
      if (auto c = it->find("content"); c != it->end()) return content_text(*c);
      return {};
    }
    auto type = it->find("type");
    if (type != it->end() && type->is_string() && *type == "function_call_output") {
      if (auto o = it->find("output"); o != it->end()) return content_text(*o);
    }
  }
  return {};
}

bool is_str(const Json& o, const char* key, const char* value) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() && *it == value;
}

std::string str_of(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Offered tool names: chat {"type":"function","function":{"name"}}, Anthropic and Responses
// {"name"}, Responses {"type":"namespace","name","tools":[{"name"}]} (both levels).
std::vector<std::string> offered_tools(const Json& tools) {
  std::vector<std::string> out;
  if (!tools.is_array()) return out;
  for (const Json& t : tools) {
    if (!t.is_object()) continue;
    if (auto n = str_of(t, "name"); !n.empty()) out.push_back(n);
    if (auto f = t.find("function"); f != t.end() && f->is_object())
      if (auto n = str_of(*f, "name"); !n.empty()) out.push_back(n);
    if (auto sub = t.find("tools"); sub != t.end() && sub->is_array())
      for (const Json& x : *sub)
        if (x.is_object())
          if (auto n = str_of(x, "name"); !n.empty()) out.push_back(n);
  }
  return out;
}

// Fills first_turn, after_tool and last_tool_output from the conversation. Chat: an assistant
// message; a final role "tool" message answers an assistant tool_calls[].id. Anthropic: an
// assistant message; a final user message holding tool_result blocks answers a tool_use id.
// Responses: an assistant message or function_call item; a final function_call_output item
// answers a function_call's call_id.
void conversation_facts(Api api, const Json& items, MockRequest* r) {
  if (!items.is_array() || items.empty()) return;
  auto tool_name_of = [&](const std::string& id) -> std::string {
    if (id.empty()) return {};
    for (const Json& m : items) {
      if (!m.is_object()) continue;
      if (api == Api::kResponses) {
        if (is_str(m, "type", "function_call") && str_of(m, "call_id") == id) return str_of(m, "name");
        continue;
      }
      if (!is_str(m, "role", "assistant")) continue;
      if (api == Api::kChat) {
        if (auto tc = m.find("tool_calls"); tc != m.end() && tc->is_array())
          for (const Json& c : *tc)
            if (c.is_object() && str_of(c, "id") == id)
              if (auto f = c.find("function"); f != c.end() && f->is_object()) return str_of(*f, "name");
      } else if (auto c = m.find("content"); c != m.end() && c->is_array()) {
        for (const Json& b : *c)
          if (b.is_object() && is_str(b, "type", "tool_use") && str_of(b, "id") == id) return str_of(b, "name");
      }
    }
    return {};
  };
  for (const Json& m : items) {
    if (!m.is_object()) continue;
    if (is_str(m, "role", "assistant") || is_str(m, "type", "function_call")) r->first_turn = false;
  }
  const Json& last = items.back();
  if (!last.is_object()) return;
  std::string id;
  if (api == Api::kChat && is_str(last, "role", "tool")) {
    id = str_of(last, "tool_call_id");
    if (auto c = last.find("content"); c != last.end()) r->last_tool_output = content_text(*c);
  } else if (api == Api::kMessages && is_str(last, "role", "user")) {
    if (auto c = last.find("content"); c != last.end() && c->is_array())
      for (const Json& b : *c)
        if (b.is_object() && is_str(b, "type", "tool_result")) {
          id = str_of(b, "tool_use_id");
          if (auto k = b.find("content"); k != b.end()) r->last_tool_output = content_text(*k);
        }
  } else if (api == Api::kResponses && is_str(last, "type", "function_call_output")) {
    id = str_of(last, "call_id");
    if (auto o = last.find("output"); o != last.end()) r->last_tool_output = content_text(*o);
  }
  r->after_tool = tool_name_of(id);
  if (r->after_tool.empty()) r->last_tool_output.clear();
}

// Replaces string values "${result.PATH}" in `args` by the value at PATH in `result`.
void substitute_result(Json& args, const Json& result) {
  if (args.is_object() || args.is_array()) {
    for (Json& v : args) substitute_result(v, result);
    return;
  }
  if (!args.is_string()) return;
  const std::string& s = args.get_ref<const std::string&>();
  static const std::string kOpen = "${result.";
  if (s.size() <= kOpen.size() + 1 || s.compare(0, kOpen.size(), kOpen) != 0 || s.back() != '}') return;
  const Json* cur = &result;
  std::string path = s.substr(kOpen.size(), s.size() - kOpen.size() - 1);
  size_t i = 0;
  while (cur && i <= path.size()) {
    size_t j = path.find('.', i);
    if (j == std::string::npos) j = path.size();
    std::string key = path.substr(i, j - i);
    if (!cur->is_object() || !cur->contains(key)) return;  // unresolvable: left as written
    cur = &(*cur)[key];
    i = j + 1;
  }
  args = *cur;
}

}  // namespace

std::vector<std::string> filler_pieces(uint64_t tokens, uint64_t offset) {
  std::vector<std::string> out;
  out.reserve(tokens);
  for (uint64_t k = 0; k < tokens; ++k) {
    size_t pos = static_cast<size_t>(((offset + k) * 4) % kFillerLen);
    std::string piece;
    for (size_t b = 0; b < 4; ++b) piece += kFiller[(pos + b) % kFillerLen];
    out.push_back(std::move(piece));
  }
  return out;
}

Expected<MockRequest> parse_mock_request(Api api, const Json& body, uint32_t block_size, uint64_t default_max_tokens) {
  auto bad = [](std::string m) { return Error{std::move(m), kExitBadData}; };
  if (!body.is_object()) return bad("request body must be a JSON object");
  MockRequest r;
  r.api = api;
  if (auto m = body.find("model"); m != body.end() && m->is_string()) r.model = m->get<std::string>();
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad("'stream' must be a boolean");
    r.stream = s->get<bool>();
  }
  if (auto so = body.find("stream_options"); so != body.end() && so->is_object()) {
    if (auto iu = so->find("include_usage"); iu != so->end() && iu->is_boolean()) r.include_usage = iu->get<bool>();
  }
  switch (api) {
    case Api::kChat:
    case Api::kMessages: {
      auto m = body.find("messages");
      if (m == body.end() || !m->is_array() || m->empty()) return bad("'messages' must be a non-empty array");
      for (const Json& x : *m)
        if (!x.is_object() || !x.contains("role")) return bad("each message must be an object with a 'role'");
      r.last_user_text = last_user(*m);
      conversation_facts(api, *m, &r);
      const Json& last = m->back();
      const bool continues = api == Api::kMessages || body.value("continue_final_message", false);
      if (continues && last.value("role", "") == "assistant" && last.contains("content"))
        r.continued_tokens = split_pieces(content_text(last["content"])).size();
      break;
    }
    case Api::kCompletions: {
      auto p = body.find("prompt");
      if (p == body.end() || !(p->is_string() || p->is_array()))
        return bad("'prompt' must be a string or an array of strings");
      r.last_user_text = content_text(*p);
      break;
    }
    case Api::kResponses: {
      auto in = body.find("input");
      if (in == body.end() || !(in->is_string() || in->is_array()))
        return bad("'input' must be a string or an array of items");
      r.last_user_text = last_user(*in);
      conversation_facts(api, *in, &r);
      break;
    }
  }
  if (auto t = body.find("tools"); t != body.end() && t->is_array()) {
    r.tools = *t;
    r.tool_names = offered_tools(*t);
  }
  std::string err;
  auto mct = limit_field(body, "max_completion_tokens", &err);
  auto mt = limit_field(body, "max_tokens", &err);
  auto mot = limit_field(body, "max_output_tokens", &err);
  auto mint = limit_field(body, "min_tokens", &err);
  if (!err.empty()) return bad(err);
  r.max_tokens = mct ? *mct : mt ? *mt : mot ? *mot : default_max_tokens;
  if (r.max_tokens == 0) return bad("the output token limit must be at least 1");
  r.min_tokens = mint.value_or(0);
  if (r.min_tokens > r.max_tokens)
    return bad(fmt::format("min_tokens ({}) is greater than the output limit ({})", r.min_tokens, r.max_tokens));
  if (auto ie = body.find("ignore_eos"); ie != body.end() && ie->is_boolean()) r.ignore_eos = ie->get<bool>();
  if (auto p = body.find("priority"); p != body.end() && !p->is_null()) {
    if (!p->is_number_integer() || (p->is_number_unsigned() && p->get<uint64_t>() > INT32_MAX) ||
        p->get<int64_t>() < INT32_MIN || p->get<int64_t>() > INT32_MAX)
      return bad("priority must be a 32-bit integer");
    r.priority = p->get<int64_t>();
  }
  const std::string text = tokens::render_request(body);
  auto toks = tokens::text_to_tokens(text);
  if (toks.empty()) return bad("the prompt renders to no tokens");
  r.prompt_tokens = toks.size();
  r.block_hashes = tokens::sequence_hashes(tokens::block_hashes(toks, block_size));
  r.tokens = std::move(toks);
  return r;
}

Expected<Reply> ReplyScript::parse_row(const Json& row) {
  if (!row.is_object()) return Error{"reply row must be a JSON object", kExitBadData};
  Reply r;
  if (auto m = row.find("match"); m != row.end()) {
    if (!m->is_string()) return Error{"'match' must be a string", kExitBadData};
    r.match = m->get<std::string>();
  }
  if (auto o = row.find("offered"); o != row.end()) {
    if (!o->is_string() || o->get<std::string>().empty())
      return Error{"'offered' must be a non-empty string", kExitBadData};
    r.offered = o->get<std::string>();
  }
  if (auto a = row.find("after_tool"); a != row.end()) {
    if (!a->is_string() || a->get<std::string>().empty())
      return Error{"'after_tool' must be a non-empty string", kExitBadData};
    r.after_tool = a->get<std::string>();
  }
  if (auto f = row.find("first_turn"); f != row.end()) {
    if (!f->is_boolean()) return Error{"'first_turn' must be a boolean", kExitBadData};
    r.first_turn = f->get<bool>();
  }
  if (auto t = row.find("text"); t != row.end() && t->is_string()) {
    r.text = t->get<std::string>();
    return r;
  }
  if (auto tc = row.find("tool_call"); tc != row.end() && tc->is_object()) {
    auto n = tc->find("name");
    if (n == tc->end() || !n->is_string() || n->get<std::string>().empty())
      return Error{"'tool_call.name' must be a non-empty string", kExitBadData};
    r.tool_call = true;
    r.name = n->get<std::string>();
    auto a = tc->find("arguments");
    if (a == tc->end()) r.arguments = "{}";
    else if (a->is_object()) r.arguments = a->dump();
    else if (a->is_string() && Json::accept(a->get<std::string>())) r.arguments = a->get<std::string>();
    else return Error{"'tool_call.arguments' must be a JSON object", kExitBadData};
    return r;
  }
  return Error{"reply row needs \"text\" (a string) or \"tool_call\" ({\"name\", \"arguments\"})", kExitBadData};
}

Expected<ReplyScript> ReplyScript::load(const std::string& path) {
  ReplyScript s;
  std::ifstream in(path);
  if (!in) return Error{fmt::format("{}: cannot open", path), kExitIo};
  std::string line;
  uint64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (n == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 BOM (case 42)
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json row = Json::parse(line, nullptr, false);
    if (row.is_discarded()) return Error{fmt::format("{}:{}: malformed JSON", path, n), kExitBadData};
    auto r = parse_row(row);
    if (!r) return Error{fmt::format("{}:{}: {}", path, n, r.error().message), kExitBadData};
    s.rows_.push_back(std::move(*r));
  }
  if (s.rows_.empty()) return Error{fmt::format("{}: no replies", path), kExitBadData};
  s.used_.assign(s.rows_.size(), false);
  return s;
}

bool Reply::holds(const MockRequest& req) const {
  if (!match.empty() && req.last_user_text.find(match) == std::string::npos) return false;
  if (!offered.empty() && std::find(req.tool_names.begin(), req.tool_names.end(), offered) == req.tool_names.end())
    return false;
  if (first_turn && *first_turn != req.first_turn) return false;
  if (!after_tool.empty() && after_tool != req.after_tool) return false;
  return true;
}

std::optional<Reply> ReplyScript::choose(const std::string& last_user_text) {
  MockRequest req;
  req.last_user_text = last_user_text;
  return choose(req);
}

std::optional<Reply> ReplyScript::choose(const MockRequest& req) {
  auto fill = [&](Reply r) {
    if (r.tool_call && r.arguments.find("${result.") != std::string::npos) {
      Json args = Json::parse(r.arguments, nullptr, false);
      Json result = Json::parse(req.last_tool_output, nullptr, false);
      if (!args.is_discarded() && !result.is_discarded()) {
        substitute_result(args, result);
        r.arguments = args.dump();
      }
    }
    return r;
  };
  std::lock_guard lk(mu_);
  if (rows_.empty()) return std::nullopt;
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].conditioned() && !used_[i] && rows_[i].holds(req)) {
      used_[i] = true;
      return fill(rows_[i]);
    }
  }
  size_t last = rows_.size();
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].conditioned()) continue;
    last = i;
    if (i >= next_unmatched_) {
      next_unmatched_ = i + 1;
      return fill(rows_[i]);
    }
  }
  if (last < rows_.size()) return fill(rows_[last]);
  return std::nullopt;  // only matched rows and none matched: the default reply
}

namespace {

// Why generation ended, as vLLM's scheduler decides it (check_stop in vllm/v1/core/sched/utils.py
// tests the length cap before EOS): a reply whose output reaches max_tokens was cut by the limit
// ("length"), whether or not it would have ended there (its EOS would be one token more) and
// with ignore_eos too; otherwise it ended on its own ("stop", or "tool_calls" for a tool call,
// as vLLM's chat server reports a parsed tool call). The unscripted filler never ends on its
// own, so it always reports "length", as vLLM does for ignore_eos runs.
std::string finish_reason_for(const ReplyPlan& p, uint64_t max_tokens) {
  if (p.tokens() >= max_tokens) return "length";
  return p.tool_call ? "tool_calls" : "stop";
}

}  // namespace

ReplyPlan plan_reply(const MockRequest& req, const std::optional<Reply>& scripted) {
  ReplyPlan p;
  if (scripted && scripted->tool_call) {
    p.tool_call = true;
    p.name = scripted->name;
    p.pieces = split_pieces(scripted->arguments);
    if (p.pieces.empty()) p.pieces.push_back("{}");
    if (p.pieces.size() > req.max_tokens) p.pieces.resize(req.max_tokens);
    p.finish_reason = finish_reason_for(p, req.max_tokens);
    return p;
  }
  if (!scripted) {
    p.pieces = filler_pieces(req.max_tokens, req.continued_tokens);
    p.finish_reason = finish_reason_for(p, req.max_tokens);
    return p;
  }
  p.pieces = split_pieces(scripted->text);
  uint64_t want = p.pieces.size();
  if (req.ignore_eos) want = req.max_tokens;
  want = std::max<uint64_t>({want, req.min_tokens, 1});
  want = std::min(want, req.max_tokens);
  if (p.pieces.size() > want) p.pieces.resize(want);
  else if (p.pieces.size() < want) {
    auto pad = filler_pieces(want - p.pieces.size());
    p.pieces.insert(p.pieces.end(), pad.begin(), pad.end());
  }
  p.finish_reason = finish_reason_for(p, req.max_tokens);
  return p;
}

ResponseWriter::ResponseWriter(const MockRequest& req, const ReplyPlan& plan, uint64_t id_seq, uint64_t created)
    : req_(req), plan_(plan), created_(created) {
  switch (req.api) {
    case Api::kChat: id_ = fmt::format("chatcmpl-mock-{}", id_seq); break;
    case Api::kCompletions: id_ = fmt::format("cmpl-mock-{}", id_seq); break;
    case Api::kMessages: id_ = fmt::format("msg_mock_{}", id_seq); break;
    case Api::kResponses: id_ = fmt::format("resp_mock_{}", id_seq); break;
  }
  item_id_ = plan.tool_call ? fmt::format("fc_mock_{}", id_seq) : fmt::format("msg_mock_{}", id_seq);
  call_id_ = req.api == Api::kMessages ? fmt::format("toolu_mock_{}", id_seq) : fmt::format("call_mock_{}", id_seq);
}

std::string ResponseWriter::text() const {
  std::string s;
  for (const auto& p : plan_.pieces) s += p;
  return s;
}

std::string ResponseWriter::namespace_of(const std::string& name) const {
  if (!req_.tools.is_array()) return {};
  for (const Json& t : req_.tools) {
    if (!t.is_object() || t.value("type", "") != "namespace") continue;
    auto sub = t.find("tools");
    if (sub == t.end() || !sub->is_array()) continue;
    for (const Json& f : *sub)
      if (f.is_object() && f.value("name", "") == name) return t.value("name", "");
  }
  return {};
}

Json ResponseWriter::usage_json(uint64_t cached) const {
  const uint64_t in = req_.prompt_tokens, out = plan_.tokens();
  Json u = Json::object();
  switch (req_.api) {
    case Api::kChat:
    case Api::kCompletions:
      u["prompt_tokens"] = in;
      u["completion_tokens"] = out;
      u["total_tokens"] = in + out;
      u["prompt_tokens_details"] = {{"cached_tokens", cached}};
      break;
    case Api::kMessages:
      // Anthropic counts cache reads apart from input_tokens.
      u["input_tokens"] = in - cached;
      u["cache_creation_input_tokens"] = 0;
      u["cache_read_input_tokens"] = cached;
      u["output_tokens"] = out;
      break;
    case Api::kResponses:
      u["input_tokens"] = in;
      u["input_tokens_details"] = {{"cached_tokens", cached}};
      u["output_tokens"] = out;
      u["output_tokens_details"] = {{"reasoning_tokens", 0}};
      u["total_tokens"] = in + out;
      break;
  }
  if (tiers_) {
    const auto& t = *tiers_;
    const uint64_t lower = t[0] + t[1] + t[2];
    u["dyn"] = {{"cached_tokens_by_tier",
                 {{"g1", cached > lower ? cached - lower : 0}, {"g2", t[0]}, {"g3", t[1]}, {"g4", t[2]}}}};
  }
  return u;
}

std::string ResponseWriter::event(const char* name, const Json& data) {
  std::string s;
  if (name) s += fmt::format("event: {}\n", name);
  s += "data: ";
  s += data.dump();
  s += "\n\n";
  return s;
}

Json ResponseWriter::chat_chunk(Json delta, const Json& finish) const {
  Json c = {{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_}, {"model", req_.model}};
  c["choices"] =
      Json::array({Json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish}}});
  return c;
}

std::string ResponseWriter::stream_start() {
  switch (req_.api) {
    case Api::kChat: return event(nullptr, chat_chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
    case Api::kCompletions: return {};
    case Api::kMessages: {
      Json u = usage_json(0);
      u["output_tokens"] = 0;
      Json msg = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", req_.model},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", u}};
      return event("message_start", {{"type", "message_start"}, {"message", msg}});
    }
    case Api::kResponses: {
      Json base = {{"id", id_},           {"object", "response"},    {"created_at", created_},
                   {"model", req_.model}, {"status", "in_progress"}, {"output", Json::array()}};
      std::string s =
          event("response.created", {{"type", "response.created"}, {"sequence_number", seq_++}, {"response", base}});
      s += event("response.in_progress",
                 {{"type", "response.in_progress"}, {"sequence_number", seq_++}, {"response", base}});
      return s;
    }
  }
  return {};
}

std::string ResponseWriter::open_item() {
  if (opened_) return {};
  opened_ = true;
  switch (req_.api) {
    case Api::kChat: {
      if (!plan_.tool_call) return {};
      Json tc = {{"index", 0},
                 {"id", call_id_},
                 {"type", "function"},
                 {"function", {{"name", plan_.name}, {"arguments", ""}}}};
      return event(nullptr, chat_chunk({{"tool_calls", Json::array({tc})}}, nullptr));
    }
    case Api::kCompletions: return {};
    case Api::kMessages: {
      Json block = plan_.tool_call
                       ? Json{{"type", "tool_use"}, {"id", call_id_}, {"name", plan_.name}, {"input", Json::object()}}
                       : Json{{"type", "text"}, {"text", ""}};
      return event("content_block_start", {{"type", "content_block_start"}, {"index", 0}, {"content_block", block}});
    }
    case Api::kResponses: {
      Json item;
      if (plan_.tool_call) {
        item = {{"type", "function_call"}, {"id", item_id_},  {"call_id", call_id_},
                {"name", plan_.name},      {"arguments", ""}, {"status", "in_progress"}};
        if (auto ns = namespace_of(plan_.name); !ns.empty()) item["namespace"] = ns;
      } else {
        item = {{"type", "message"},
                {"id", item_id_},
                {"role", "assistant"},
                {"status", "in_progress"},
                {"content", Json::array()}};
      }
      std::string s = event(
          "response.output_item.added",
          {{"type", "response.output_item.added"}, {"sequence_number", seq_++}, {"output_index", 0}, {"item", item}});
      if (!plan_.tool_call)
        s += event("response.content_part.added",
                   {{"type", "response.content_part.added"},
                    {"sequence_number", seq_++},
                    {"output_index", 0},
                    {"item_id", item_id_},
                    {"content_index", 0},
                    {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
      return s;
    }
  }
  return {};
}

std::string ResponseWriter::stream_tokens(uint64_t from, uint64_t to) {
  std::string s;
  to = std::min<uint64_t>(to, plan_.pieces.size());
  if (from < to) s += open_item();
  for (uint64_t k = from; k < to; ++k) {
    const std::string& piece = plan_.pieces[k];
    switch (req_.api) {
      case Api::kChat:
        if (plan_.tool_call)
          s += event(
              nullptr,
              chat_chunk({{"tool_calls", Json::array({Json{{"index", 0}, {"function", {{"arguments", piece}}}}})}},
                         nullptr));
        else s += event(nullptr, chat_chunk({{"content", piece}}, nullptr));
        break;
      case Api::kCompletions: {
        Json c = {
            {"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", req_.model},
            {"choices",
             Json::array({Json{{"index", 0}, {"text", piece}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})}};
        s += event(nullptr, c);
        break;
      }
      case Api::kMessages: {
        Json d = plan_.tool_call ? Json{{"type", "input_json_delta"}, {"partial_json", piece}}
                                 : Json{{"type", "text_delta"}, {"text", piece}};
        s += event("content_block_delta", {{"type", "content_block_delta"}, {"index", 0}, {"delta", d}});
        break;
      }
      case Api::kResponses:
        if (plan_.tool_call)
          s += event("response.function_call_arguments.delta", {{"type", "response.function_call_arguments.delta"},
                                                                {"sequence_number", seq_++},
                                                                {"output_index", 0},
                                                                {"item_id", item_id_},
                                                                {"delta", piece}});
        else
          s += event("response.output_text.delta", {{"type", "response.output_text.delta"},
                                                    {"sequence_number", seq_++},
                                                    {"output_index", 0},
                                                    {"item_id", item_id_},
                                                    {"content_index", 0},
                                                    {"delta", piece}});
        break;
    }
  }
  return s;
}

std::string ResponseWriter::stream_end(uint64_t cached) {
  std::string s = open_item();  // normally sent with the first token already
  const std::string all = text();
  switch (req_.api) {
    case Api::kChat:
    case Api::kCompletions: {
      if (req_.api == Api::kChat) s += event(nullptr, chat_chunk(Json::object(), plan_.finish_reason));
      else
        s += event(
            nullptr,
            {{"id", id_},
             {"object", "text_completion"},
             {"created", created_},
             {"model", req_.model},
             {"choices",
              Json::array(
                  {Json{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", plan_.finish_reason}}})}});
      if (req_.include_usage) {
        Json c = {{"id", id_},
                  {"object", req_.api == Api::kChat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_},
                  {"model", req_.model},
                  {"choices", Json::array()},
                  {"usage", usage_json(cached)}};
        s += event(nullptr, c);
      }
      s += "data: [DONE]\n\n";
      return s;
    }
    case Api::kMessages: {
      s += event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
      const char* stop = plan_.finish_reason == "length" ? "max_tokens" : plan_.tool_call ? "tool_use" : "end_turn";
      Json u = usage_json(cached);
      s += event(
          "message_delta",
          {{"type", "message_delta"}, {"delta", {{"stop_reason", stop}, {"stop_sequence", nullptr}}}, {"usage", u}});
      s += event("message_stop", {{"type", "message_stop"}});
      return s;
    }
    case Api::kResponses: {
      Json item;
      if (plan_.tool_call) {
        s += event("response.function_call_arguments.done", {{"type", "response.function_call_arguments.done"},
                                                             {"sequence_number", seq_++},
                                                             {"output_index", 0},
                                                             {"item_id", item_id_},
                                                             {"arguments", all}});
      } else {
        Json part = {{"type", "output_text"}, {"text", all}, {"annotations", Json::array()}};
        s += event("response.output_text.done", {{"type", "response.output_text.done"},
                                                 {"sequence_number", seq_++},
                                                 {"output_index", 0},
                                                 {"item_id", item_id_},
                                                 {"content_index", 0},
                                                 {"text", all}});
        s += event("response.content_part.done", {{"type", "response.content_part.done"},
                                                  {"sequence_number", seq_++},
                                                  {"output_index", 0},
                                                  {"item_id", item_id_},
                                                  {"content_index", 0},
                                                  {"part", part}});
      }
      Json body = full_body(cached);
      s += event("response.output_item.done", {{"type", "response.output_item.done"},
                                               {"sequence_number", seq_++},
                                               {"output_index", 0},
                                               {"item", body["output"][0]}});
      // A reply cut by max_output_tokens ends with response.incomplete (OpenAI's event for a
      // response that "finishes as incomplete"), carrying the same body as the JSON answer.
      const char* done = plan_.finish_reason == "length" ? "response.incomplete" : "response.completed";
      s += event(done, {{"type", done}, {"sequence_number", seq_++}, {"response", body}});
      return s;
    }
  }
  return s;
}

Json ResponseWriter::full_body(uint64_t cached) const {
  const std::string all = text();
  switch (req_.api) {
    case Api::kChat: {
      Json msg = {{"role", "assistant"}, {"content", plan_.tool_call ? Json(nullptr) : Json(all)}};
      if (plan_.tool_call)
        msg["tool_calls"] = Json::array(
            {Json{{"id", call_id_}, {"type", "function"}, {"function", {{"name", plan_.name}, {"arguments", all}}}}});
      return {{"id", id_},
              {"object", "chat.completion"},
              {"created", created_},
              {"model", req_.model},
              {"choices",
               Json::array({Json{
                   {"index", 0}, {"message", msg}, {"logprobs", nullptr}, {"finish_reason", plan_.finish_reason}}})},
              {"usage", usage_json(cached)}};
    }
    case Api::kCompletions:
      return {{"id", id_},
              {"object", "text_completion"},
              {"created", created_},
              {"model", req_.model},
              {"choices",
               Json::array(
                   {Json{{"index", 0}, {"text", all}, {"logprobs", nullptr}, {"finish_reason", plan_.finish_reason}}})},
              {"usage", usage_json(cached)}};
    case Api::kMessages: {
      Json block;
      if (plan_.tool_call) {
        Json input = Json::parse(all, nullptr, false);
        if (input.is_discarded()) input = Json::object();
        block = {{"type", "tool_use"}, {"id", call_id_}, {"name", plan_.name}, {"input", input}};
      } else {
        block = {{"type", "text"}, {"text", all}};
      }
      const char* stop = plan_.finish_reason == "length" ? "max_tokens" : plan_.tool_call ? "tool_use" : "end_turn";
      return {{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", req_.model},
              {"content", Json::array({block})},
              {"stop_reason", stop},
              {"stop_sequence", nullptr},
              {"usage", usage_json(cached)}};
    }
    case Api::kResponses: {
      // Cut by max_output_tokens: the response and its item are "incomplete" and
      // incomplete_details names the limit (OpenAI's Responses API; vLLM's reports the same).
      const bool cut = plan_.finish_reason == "length";
      const char* status = cut ? "incomplete" : "completed";
      Json item;
      if (plan_.tool_call) {
        item = {{"type", "function_call"}, {"id", item_id_},   {"call_id", call_id_},
                {"name", plan_.name},      {"arguments", all}, {"status", status}};
        if (auto ns = namespace_of(plan_.name); !ns.empty()) item["namespace"] = ns;
      } else {
        item = {
            {"type", "message"},
            {"id", item_id_},
            {"role", "assistant"},
            {"status", status},
            {"content", Json::array({Json{{"type", "output_text"}, {"text", all}, {"annotations", Json::array()}}})}};
      }
      Json body = {
          {"id", id_},        {"object", "response"},          {"created_at", created_},     {"model", req_.model},
          {"status", status}, {"output", Json::array({item})}, {"usage", usage_json(cached)}};
      if (cut) body["incomplete_details"] = {{"reason", "max_output_tokens"}};
      return body;
    }
  }
  return Json::object();
}

}  // namespace dyn::engine
