// Reading an API request: identity, body (simdjson, a Json tree where needed), upstream request,
// prompt hashes.
#include "dyn/serve/intake.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "dyn/base/json_limits.h"
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"

namespace dyn::serve {

int http_status(const Error& e) {
  if (e.exit_code >= 400 && e.exit_code <= 599) return e.exit_code;
  if (e.exit_code == kExitIo) return 503;
  return 400;
}

std::string absolute_or_origin(const std::string& p) { return "(?:[hH][tT][tT][pP][sS]?://[^/]*)?" + p; }

std::string origin_form(const std::string& target) {
  size_t scheme = target.find("://");
  if (target.empty() || target[0] == '/' || scheme == std::string::npos) return target;
  size_t path = target.find('/', scheme + 3);
  if (path == std::string::npos) {
    size_t q = target.find('?', scheme + 3);
    return q == std::string::npos ? "/" : "/" + target.substr(q);
  }
  return target.substr(path);
}

bool check_content_type(const http::ServerRequest& req, http::ServerResponse& res) {
  auto unsupported = [&](const std::string& what) {
    http::set_error(res, 415, "invalid_request_error",
                    "Content-Type " + what + " is not supported: send the JSON body with " +
                        "'Content-Type: application/json' (curl: -H 'Content-Type: application/json')");
    return false;
  };
  std::string ct = req.get_header_value("Content-Type");
  std::string lower = ct.substr(0, ct.find(';'));
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!lower.empty() && lower.back() == ' ') lower.pop_back();
  if (lower == "multipart/form-data" || lower == "application/x-www-form-urlencoded") return unsupported(lower);
  return true;
}

std::optional<Error> read_identity(Exchange& ex, const http::ServerRequest& req, const session::NormalizeOptions& opts,
                                   Dispatch& d) {
  auto ident = session::normalize(http::header_list(req.headers), opts);
  if (!ident) return Error{ident.error().message, http_status(ident.error())};
  if (ident->context && (!valid_utf8(ident->context->session_id) || !valid_utf8(ident->context->parent_session_id)))
    return Error{"session id headers must be valid UTF-8", 400};
  if (!valid_utf8(ident->x_request_id)) return Error{"x-request-id must be valid UTF-8", 400};
  ex.ctx = ident->context;
  ex.x_request_id = ident->x_request_id;
  d.pinned_worker = ident->worker_instance_id;
  d.header_hints.priority = ident->priority;
  d.header_hints.strict_priority = ident->strict_priority;
  d.header_hints.policy_class = ident->policy_class;
  return std::nullopt;
}

namespace {

constexpr const char* kBadPriority = "nvext.agent_hints.priority must be a 32-bit integer";
constexpr const char* kBadStrict = "nvext.agent_hints.strict_priority must be a 32-bit unsigned integer";

/// nvext.agent_hints of a simdjson body into `h`; an error for values of the wrong type.
std::optional<Error> read_hints(simdjson::dom::element nvext, route::PriorityHints& h) {
  simdjson::dom::element hints, v;
  if (nvext.at_key("agent_hints").get(hints) != simdjson::SUCCESS || !hints.is_object()) return std::nullopt;
  if (hints.at_key("priority").get(v) == simdjson::SUCCESS && !v.is_null()) {
    int64_t p = 0;
    if (v.get(p) != simdjson::SUCCESS || p < INT32_MIN || p > INT32_MAX) return Error{kBadPriority, 400};
    h.priority = p;
  }
  if (hints.at_key("strict_priority").get(v) == simdjson::SUCCESS && !v.is_null()) {
    uint64_t p = 0;
    if (v.get(p) != simdjson::SUCCESS || p > UINT32_MAX) return Error{kBadStrict, 400};
    h.strict_priority = p;
  }
  return std::nullopt;
}

/// The same from a Json tree.
std::optional<Error> read_hints(const Json& body, route::PriorityHints& h) {
  auto n = body.find("nvext");
  if (n == body.end() || !n->is_object()) return std::nullopt;
  auto a = n->find("agent_hints");
  if (a == n->end() || !a->is_object()) return std::nullopt;
  if (auto p = a->find("priority"); p != a->end() && !p->is_null()) {
    if (!p->is_number_integer() || p->get<int64_t>() < INT32_MIN || p->get<int64_t>() > INT32_MAX ||
        (p->is_number_unsigned() && p->get<uint64_t>() > INT32_MAX))
      return Error{kBadPriority, 400};
    h.priority = p->get<int64_t>();
  }
  if (auto p = a->find("strict_priority"); p != a->end() && !p->is_null()) {
    if (!p->is_number_unsigned() || p->get<uint64_t>() > UINT32_MAX) return Error{kBadStrict, 400};
    h.strict_priority = p->get<uint64_t>();
  }
  return std::nullopt;
}

/// Reads the top-level members the router needs from a simdjson object into `ex` and `b`. False
/// when a key repeats (a Json tree keeps the last value; read_tree decides then).
bool read_top_level(simdjson::dom::object o, Exchange& ex, Body& b) {
  std::vector<std::string_view> keys;
  for (auto field : o) {
    for (std::string_view k : keys)
      if (k == field.key) return false;
    keys.push_back(field.key);
    std::string_view sv;
    bool flag = false;
    if (field.key == "model" && field.value.get(sv) == simdjson::SUCCESS) ex.model = sv;
    if (field.key == "stream") ex.stream = field.value.get(flag) == simdjson::SUCCESS && flag;
    if (field.key == "stream_options") {
      simdjson::dom::element iu;
      b.usage =
          field.value.at_key("include_usage").get(iu) == simdjson::SUCCESS && iu.get(flag) == simdjson::SUCCESS && flag
              ? Body::Usage::kIncluded
              : Body::Usage::kOther;
    }
    if (field.key == "nvext" && read_hints(field.value, b.hints)) return false;  // read_tree says why
    if (field.key == "priority") b.engine_priority = true;
  }
  return true;
}

/// The Json tree path of read_body: nlohmann's verdict and messages for what simdjson refused.
Expected<Body> read_tree(Exchange& ex, const std::string& text) {
  // Deep nesting would overflow the stack of the recursive code that renders and prints bodies.
  if (json_too_deep(text)) return Error{fmt::format("JSON body nested deeper than {} levels", kMaxJsonDepth), 400};
  Body b;
  b.json = std::make_shared<Json>();
  Json& body = *b.json;
  try {
    body = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // The position only: the parser's own message quotes body bytes, which must not reach traces.
    return Error{fmt::format("malformed JSON body (invalid JSON or UTF-8 near byte {})", e.byte), 400};
  }
  if (!body.is_object()) return Error{"request body must be a JSON object", 400};
  if (auto it = body.find("model"); it != body.end() && it->is_string()) ex.model = it->get<std::string>();
  auto st = body.find("stream");
  ex.stream = st != body.end() && st->is_boolean() && st->get<bool>();
  if (auto e = read_hints(body, b.hints)) return *e;
  b.engine_priority = body.contains("priority");
  return b;
}

}  // namespace

Expected<Body> read_body(Exchange& ex, const std::string& text, bool need_tree, const PromptHashing* hashing) {
  if (text.empty()) return Error{"empty request body (a JSON object is required)", 400};
  // One parser per loop thread: it keeps its buffers from one body to the next. It refuses
  // nesting deeper than kMaxJsonDepth as json_too_deep does (read_tree then says so).
  thread_local simdjson::dom::parser parser = [] {
    simdjson::dom::parser p;
    if (p.allocate(64 << 10, kMaxJsonDepth) != simdjson::SUCCESS) throw std::bad_alloc();
    return p;
  }();
  simdjson::dom::element doc;
  simdjson::dom::object top;
  Body b;
  if (need_tree || parser.parse(text).get(doc) != simdjson::SUCCESS || doc.get(top) != simdjson::SUCCESS ||
      !read_top_level(top, ex, b))
    return read_tree(ex, text);
  if (hashing) {
    tokens::TextBlockHasher h(hashing->block_size, hashing->seed ? hashing->seed(ex.model) : tokens::kHashSeed);
    h.reserve(text.size());  // the body's size bounds a long conversation's text closely
    if (!tokens::render_request_dom(doc, h)) return read_tree(ex, text);
    b.hashed = Body::Hashed{h.bytes(), h.finish(/*include_partial=*/true)};
    return b;
  }
  b.rendered = tokens::render_request_dom(doc, text.size());
  if (!b.rendered) return read_tree(ex, text);
  return b;
}

void build_upstream(const Exchange& ex, Body& b, const std::shared_ptr<const http::ServerRequest>& req, Dispatch& d) {
  http::ProxyRequest& p = d.request;
  p.method = "POST";
  p.path = origin_form(req->target.empty() ? req->path : req->target);
  p.headers = req->headers;
  // The client's bytes as they came, shared with the request that holds them (no copy).
  p.body = std::shared_ptr<const std::string>(req, &req->body);
  if (!ex.stream || !api::has_stream_usage_option(ex.api)) return;
  if (!b.json && b.usage == Body::Usage::kIncluded) return;
  d.hide_usage = true;
  if (!b.json && b.usage == Body::Usage::kAbsent) {
    // The member goes first, so the client's bytes are forwarded as they came after it; the
    // proxy splices it in as it sends them (the body is not copied).
    const std::string& in = req->body;
    p.insert_at = in.find('{') + 1;
    const size_t next = in.find_first_not_of(" \t\r\n", p.insert_at);
    p.insert =
        in[next] == '}' ? R"("stream_options":{"include_usage":true})" : R"("stream_options":{"include_usage":true},)";
    return;
  }
  if (!b.json) b.json = std::make_shared<Json>(Json::parse(req->body));
  Json& so = (*b.json)["stream_options"];
  if (!so.is_object()) so = Json::object();
  auto iu = so.find("include_usage");
  if (iu != so.end() && iu->is_boolean() && iu->get<bool>()) {
    d.hide_usage = false;
    return;
  }
  so["include_usage"] = true;
  p.body = std::make_shared<const std::string>(b.json->dump());
}

void forward_priority(const Body& b, int32_t priority, WorkerPriority polarity, Dispatch& d) {
  if (polarity == WorkerPriority::kOff || priority == 0 || b.engine_priority) return;
  const int64_t v =
      polarity == WorkerPriority::kLowerFirst ? std::min<int64_t>(-int64_t{priority}, INT32_MAX) : priority;
  http::ProxyRequest& p = d.request;
  std::string member = fmt::format(R"("priority":{})", v);
  if (!p.insert.empty()) {  // stream_options goes in at the same place, right after the '{'
    p.insert = member + "," + p.insert;
    return;
  }
  const std::string& in = *p.body;
  p.insert_at = in.find('{') + 1;
  const size_t next = in.find_first_not_of(" \t\r\n", p.insert_at);
  p.insert = next != std::string::npos && in[next] == '}' ? member : member + ",";
}

void hash_prompt(Exchange& ex, const Body& b, EngineTokenizer* tokenizer, uint32_t block_size, uint64_t seed) {
  std::optional<std::vector<uint32_t>> ids;
  if (tokenizer) ids = tokenizer->ids(ex.api, *b.json, ex.model);
  std::vector<uint64_t> blocks;
  if (ids) {
    ex.input_length = ids->size();
    blocks = tokens::block_hashes(*ids, block_size, /*include_partial=*/true, seed);
  } else if (b.hashed) {
    ex.input_length = tokens::token_count(b.hashed->bytes);
    ex.sequence_hashes = tokens::sequence_hashes(b.hashed->blocks);
    return;
  } else {
    // SPEC 4.2 tokens are the rendered text's bytes: hashed where they lie, never copied.
    std::string rendered_here;
    if (!b.rendered) rendered_here = tokens::render_request(*b.json);
    const std::string& text = b.rendered ? *b.rendered : rendered_here;
    ex.input_length = tokens::token_count(text.size());
    blocks = tokens::text_block_hashes(text, block_size, /*include_partial=*/true, seed);
  }
  ex.sequence_hashes = tokens::sequence_hashes(blocks);
}

}  // namespace dyn::serve
