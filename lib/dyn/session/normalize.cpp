// SPEC 1 header normalization: precedence rows, Claude Code child/parent inference, Codex spellings.
#include "dyn/session/normalize.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <string>

#include "dyn/base/json_write.h"

namespace dyn::session {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r' || v.back() == '\n'))
    v.remove_suffix(1);
  return v;
}

Error http400(std::string msg) { return Error{std::move(msg), 400}; }

// Lookup table of trimmed, non-blank values by lower-case name (first value; duplicates checked).
struct Table {
  std::vector<std::pair<std::string, std::string>> entries;  // lower name, trimmed value
  const std::string* get(std::string_view name) const {
    for (auto& [n, v] : entries)
      if (n == name) return &v;
    return nullptr;
  }
  std::string value(std::string_view name) const {
    auto* v = get(name);
    return v ? *v : std::string();
  }
  /// The value of the first spelling present, in the list's (precedence) order.
  const std::string* first(const std::vector<std::string_view>& names) const {
    for (auto n : names)
      if (auto* v = get(n)) return v;
    return nullptr;
  }
  /// The same over `names`, then `aliases` when `with_aliases`.
  const std::string* first(const std::vector<std::string_view>& names, const std::vector<std::string_view>& aliases,
                           bool with_aliases) const {
    if (const std::string* v = first(names)) return v;
    return with_aliases ? first(aliases) : nullptr;
  }
};

std::optional<bool> parse_bool(std::string_view v) {
  std::string l = lower(v);
  if (l == "true" || l == "1" || l == "yes") return true;
  if (l == "false" || l == "0" || l == "no") return false;
  return std::nullopt;
}

}  // namespace

Json AgentContext::to_json() const {
  Json j = Json::object();
  j["session_id"] = session_id;
  if (!parent_session_id.empty()) j["parent_session_id"] = parent_session_id;
  if (session_final) j["session_final"] = *session_final;
  if (compaction) j["compaction"] = *compaction;
  if (priority) j["priority"] = *priority;
  if (strict_priority) j["strict_priority"] = *strict_priority;
  return j;
}

void append_agent_context(std::string& out, std::string_view session_id, std::string_view parent_session_id,
                          std::optional<bool> session_final, const Json* compaction, std::optional<int32_t> priority,
                          std::optional<uint32_t> strict_priority) {
  // Key order of to_json() above.
  out += R"({"session_id":)";
  append_json_string_replace(out, session_id);
  if (!parent_session_id.empty()) {
    out += R"(,"parent_session_id":)";
    append_json_string_replace(out, parent_session_id);
  }
  if (session_final) out += *session_final ? R"(,"session_final":true)" : R"(,"session_final":false)";
  if (compaction) {
    out += R"(,"compaction":)";
    out += compaction->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  if (priority) {
    out += R"(,"priority":)";
    out += std::to_string(*priority);
  }
  if (strict_priority) {
    out += R"(,"strict_priority":)";
    out += std::to_string(*strict_priority);
  }
  out += '}';
}

std::optional<AgentContext> AgentContext::from_json(const Json& v) {
  if (!v.is_object()) return std::nullopt;
  // The first non-empty string among `keys`, in order.
  auto text = [&](std::initializer_list<const char*> keys) -> std::string {
    for (const char* k : keys)
      if (auto it = v.find(k); it != v.end() && it->is_string() && !it->get_ref<const std::string&>().empty())
        return it->get<std::string>();
    return {};
  };
  AgentContext c;
  // A trajectory-era row's session_id named the whole run; its trajectory is the agent's own.
  c.session_id = text({"trajectory_id"});
  const bool trajectory = !c.session_id.empty();
  if (!trajectory) c.session_id = text({"session_id"});
  if (c.session_id.empty()) return std::nullopt;
  c.parent_session_id = trajectory ? text({"parent_trajectory_id", "parent_session_id"})
                                   : text({"parent_session_id", "parent_trajectory_id"});
  if (c.parent_session_id == c.session_id) c.parent_session_id.clear();
  const char* finals[] = {"session_final", "trajectory_final"};
  if (trajectory) std::swap(finals[0], finals[1]);
  for (const char* k : finals)
    if (auto f = v.find(k); f != v.end() && f->is_boolean()) {
      c.session_final = f->get<bool>();
      break;
    }
  if (auto m = v.find("compaction"); m != v.end() && m->is_object()) c.compaction = *m;
  if (auto p = v.find("priority");
      p != v.end() && p->is_number_integer() && p->get<int64_t>() >= INT32_MIN && p->get<int64_t>() <= INT32_MAX)
    c.priority = static_cast<int32_t>(p->get<int64_t>());
  if (auto p = v.find("strict_priority"); p != v.end() && p->is_number_unsigned() && p->get<uint64_t>() <= UINT32_MAX)
    c.strict_priority = static_cast<uint32_t>(p->get<uint64_t>());
  return c;
}

Expected<Identity> normalize(const HeaderList& headers, const NormalizeOptions& options) {
  Table t;
  const auto& names = identity_header_names(options.aliases);
  for (auto& [name, raw] : headers) {
    std::string n = lower(trim(name));
    if (std::find(names.begin(), names.end(), n) == names.end()) continue;
    std::string_view v = trim(raw);
    if (v.empty()) continue;  // blank counts as absent
    // RFC 9110 5.5: a field value holds no control character but HTAB. One here would let a
    // session id pose as a subagent group key ("\x1fgroup:...", SPEC 2.4; found by fuzz_headers)
    // or carry CR/LF into the traces and upstream headers that repeat the value.
    if (auto bad =
            std::find_if(v.begin(), v.end(), [](unsigned char ch) { return (ch < 0x20 && ch != '\t') || ch == 0x7f; });
        bad != v.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(*bad));
      return http400("header '" + n + "' contains a control character (" + hex + ")");
    }
    if (const std::string* prev = t.get(n)) {
      // x-request-id and x-session-affinity are not identity: the first value is kept.
      if (*prev != v && n != "x-request-id" && n != "x-session-affinity")
        return http400("conflicting values for header '" + n + "'");
      continue;
    }
    t.entries.emplace_back(std::move(n), std::string(v));
  }

  Identity id;
  id.x_request_id = t.value("x-request-id");
  id.affinity_hint = t.value("x-session-affinity");
  for (const char* h : {"x-dynamo-worker-instance-id", "x-worker-instance-id"}) {
    if (const std::string* v = t.get(h)) {
      uint64_t w = 0;
      auto r = std::from_chars(v->data(), v->data() + v->size(), w);
      if (r.ec != std::errc() || r.ptr != v->data() + v->size())
        return http400(std::string(h) + " must be an unsigned integer, got '" + *v + "'");
      if (id.worker_instance_id && *id.worker_instance_id != w)
        return http400("x-dynamo-worker-instance-id and x-worker-instance-id disagree");
      id.worker_instance_id = w;
    }
  }
  // Dynamo (extensions.rs): a priority header wins only when it parses; otherwise the body's
  // nvext.agent_hints value (or none) stands, so a malformed one is not an error.
  if (const std::string* v = t.get("x-dynamo-request-priority")) {
    int64_t p = 0;
    auto r = std::from_chars(v->data(), v->data() + v->size(), p);
    if (r.ec == std::errc() && r.ptr == v->data() + v->size() && p >= INT32_MIN && p <= INT32_MAX) id.priority = p;
  }
  if (const std::string* v = t.get("x-dynamo-request-strict-priority")) {
    uint64_t p = 0;
    auto r = std::from_chars(v->data(), v->data() + v->size(), p);
    if (r.ec == std::errc() && r.ptr == v->data() + v->size() && p <= UINT32_MAX) id.strict_priority = p;
  }
  id.policy_class = t.value("x-dynamo-meta-policy-class");

  AgentContext c;
  Source src = Source::kNone;
  for (const Family& f : families()) {
    const std::string* session = t.first(f.session, f.session_aliases, options.aliases);
    const std::string* subagent = t.first(f.subagent);
    if (!session && !subagent) continue;
    src = f.source;
    const std::string* parent = t.first(f.parent);
    if (subagent) {
      // A subagent without a parent header was spawned by the main thread: its parent is the
      // root session (Dynamo's behaviour before nested agents existed, kept for them).
      c.session_id = *subagent;
      c.parent_session_id = parent ? *parent : session ? *session : std::string();
    } else {
      c.session_id = *session;
      // A family with subagent ids marks a root turn by their absence: a stray parent header on
      // it is not a parent.
      if (f.subagent.empty() && parent) c.parent_session_id = *parent;
    }
    if (const std::string* v = f.final_flag.empty() ? nullptr : t.get(f.final_flag)) {
      auto b = parse_bool(*v);
      if (!b) return http400(std::string(f.final_flag) + " must be true/false/1/0/yes/no, got '" + *v + "'");
      c.session_final = b;
    }
    if (const std::string* meta = f.turn_metadata.empty() ? nullptr : t.get(f.turn_metadata)) {
      Json m = Json::parse(*meta, nullptr, false);
      if (m.is_object()) {
        auto k = m.find("request_kind");
        if (k != m.end() && k->is_string() && *k == "compaction") {
          auto cobj = m.find("compaction");
          c.compaction = (cobj != m.end() && cobj->is_object()) ? *cobj : Json::object();
        }
      }
    }
    break;
  }
  if (src == Source::kNone) return id;
  if (c.parent_session_id == c.session_id) c.parent_session_id.clear();
  if (c.session_id.size() > kMaxSessionIdBytes)
    return http400("session id is " + std::to_string(c.session_id.size()) + " bytes, over the limit of 256");
  if (c.parent_session_id.size() > kMaxSessionIdBytes)
    return http400("parent session id is " + std::to_string(c.parent_session_id.size()) +
                   " bytes, over the limit of 256");
  id.source = src;
  id.context = std::move(c);
  return id;
}

Expected<HeaderList> headers_from_json(const Json& v) {
  HeaderList out;
  auto text = [](const Json& x, std::string* s) {
    if (x.is_string()) *s = x.get<std::string>();
    else if (x.is_number() || x.is_boolean()) *s = x.dump();
    else return false;
    return true;
  };
  auto add = [&](const std::string& name, const Json& value) -> bool {
    std::string s;
    if (value.is_array()) {
      for (auto& e : value) {
        if (!text(e, &s)) return false;
        out.emplace_back(name, s);
      }
      return true;
    }
    if (!text(value, &s)) return false;
    out.emplace_back(name, std::move(s));
    return true;
  };
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!add(it.key(), it.value())) return bad_data("header '" + it.key() + "' has a value that is not a string");
    return out;
  }
  if (v.is_array()) {
    for (auto& p : v) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_string())
        return bad_data("headers list entries must be [name, value] pairs");
      if (!add(p[0].get<std::string>(), p[1]))
        return bad_data("header '" + p[0].get<std::string>() + "' has a value that is not a string");
    }
    return out;
  }
  return bad_data("headers must be an object or a list of [name, value] pairs");
}

std::string parent_group_key(std::string_view parent) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : parent) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("\x1fgroup:") + buf;
}

}  // namespace dyn::session
