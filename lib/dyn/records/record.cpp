// Trace record helpers.
#include "dyn/records/record.h"

namespace dyn::records {

Json make_record(std::string_view event_type, uint64_t t, std::string_view source) {
  Json r = Json::object();
  r["schema"] = kSchema;
  r["event_type"] = std::string(event_type);
  r["event_time_unix_ms"] = t;
  if (!source.empty()) r["event_source"] = std::string(source);
  return r;
}

const Json* find_path(const Json& row, std::string_view dotted) {
  const Json* cur = &row;
  size_t pos = 0;
  while (pos <= dotted.size()) {
    size_t dot = dotted.find('.', pos);
    std::string_view key = dotted.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(key));
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return cur;
}

bool is_trace_record(const Json& row) {
  return row.is_object() && (row.contains("event_type") || row.contains("schema"));
}

static std::string str_at(const Json& row, std::string_view path) {
  const Json* v = find_path(row, path);
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_unsigned()) return std::to_string(v->get<uint64_t>());
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  return {};
}

// Dynamo's trajectory era (docs/records.md): trajectory_id is the agent's session (that era's
// session_id named the whole run), parent_trajectory_id its parent; the same rule as
// session::AgentContext::from_json.
std::string session_of(const Json& row) {
  std::string t = str_at(row, "agent_context.trajectory_id");
  return t.empty() ? str_at(row, "agent_context.session_id") : t;
}
std::string parent_of(const Json& row) {
  const bool trajectory = !str_at(row, "agent_context.trajectory_id").empty();
  std::string p = str_at(row, trajectory ? "agent_context.parent_trajectory_id" : "agent_context.parent_session_id");
  return p.empty() ? str_at(row, trajectory ? "agent_context.parent_session_id" : "agent_context.parent_trajectory_id")
                   : p;
}
std::string worker_of(const Json& row) { return str_at(row, "request.worker.decode_worker_id"); }

std::optional<uint64_t> as_u64(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x >= 0) return static_cast<uint64_t>(x);
  }
  return std::nullopt;
}

std::optional<double> as_number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

}  // namespace dyn::records
