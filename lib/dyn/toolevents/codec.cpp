// The msgpack form of a harness tool event (Dynamo's RequestTraceToolEventIngress).
#include <msgpack.hpp>

#include <cmath>

#include <fmt/format.h>

#include "dyn/records/record.h"
#include "dyn/toolevents/toolevents.h"

namespace dyn::toolevents {

namespace {

using TeObj = msgpack::object;

/// The value under `name` in a msgpack map, nullptr when absent or nil (serde's Option).
const TeObj* te_field(const TeObj& map, std::string_view name) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == name)
      return kv.val.type == msgpack::type::NIL ? nullptr : &kv.val;
  }
  return nullptr;
}

Error te_bad(const std::string& what) { return Error{"tool event: " + what, kExitBadData}; }

/// Reads a string field; `required` makes absence an error.
std::optional<Error> te_str(const TeObj& map, const char* name, bool required, std::optional<std::string>& out) {
  const TeObj* o = te_field(map, name);
  if (!o) return required ? std::optional<Error>(te_bad(fmt::format("no '{}'", name))) : std::nullopt;
  if (o->type != msgpack::type::STR) return te_bad(fmt::format("'{}' is not a string", name));
  out = std::string(o->via.str.ptr, o->via.str.size);
  return std::nullopt;
}

std::optional<Error> te_u64(const TeObj& map, const char* name, bool required, std::optional<uint64_t>& out) {
  const TeObj* o = te_field(map, name);
  if (!o) return required ? std::optional<Error>(te_bad(fmt::format("no '{}'", name))) : std::nullopt;
  if (o->type != msgpack::type::POSITIVE_INTEGER) return te_bad(fmt::format("'{}' is not an unsigned integer", name));
  out = o->via.u64;
  return std::nullopt;
}

std::optional<Error> te_tool(const TeObj& tool, records::ToolEvent& e) {
  if (tool.type != msgpack::type::MAP) return te_bad("'tool' is not a map");
  std::optional<std::string> id, cls, status;
  if (auto err = te_str(tool, "tool_call_id", true, id)) return err;
  if (id->empty()) return te_bad("'tool.tool_call_id' is empty");
  if (auto err = te_str(tool, "tool_class", true, cls)) return err;
  e.tool_call_id = std::move(*id);
  e.tool_class = std::move(*cls);
  if (auto err = te_str(tool, "status", false, status)) return err;
  if (status) {
    e.status = normalize_tool_status(*status);
    if (!e.status) return te_bad("unknown status '" + *status + "'");
  }
  for (auto [name, dst] :
       {std::pair{"started_at_unix_ms", &e.started_at_unix_ms}, std::pair{"ended_at_unix_ms", &e.ended_at_unix_ms},
        std::pair{"output_tokens", &e.output_tokens}, std::pair{"output_bytes", &e.output_bytes}})
    if (auto err = te_u64(tool, name, false, *dst)) return err;
  if (const TeObj* d = te_field(tool, "duration_ms")) {
    double v = d->type == msgpack::type::FLOAT64 || d->type == msgpack::type::FLOAT32 ? d->via.f64
               : d->type == msgpack::type::POSITIVE_INTEGER                           ? static_cast<double>(d->via.u64)
                                                                                      : -1;
    if (!std::isfinite(v) || v < 0) return te_bad("'tool.duration_ms' is not a non-negative number");
    e.duration_ms = v;
  }
  if (auto err = te_str(tool, "tool_name_hash", false, e.tool_name_hash)) return err;
  if (auto err = te_str(tool, "error_type", false, e.error_type)) return err;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> normalize_tool_status(std::string_view s) {
  if (s == "running") return "running";
  if (s == "succeeded" || s == "ok" || s == "success") return "succeeded";
  if (s == "error" || s == "failed" || s == "timeout") return "error";
  if (s == "cancelled" || s == "canceled") return "cancelled";
  return std::nullopt;
}

Expected<records::ToolEvent> decode_tool_event(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    size_t off = 0;
    msgpack::unpack_limit limit(/*array=*/64, /*map=*/64, /*str=*/1u << 16, /*bin=*/1024, /*ext=*/0, /*depth=*/4);
    msgpack::unpack(oh, payload.data(), payload.size(), off, nullptr, nullptr, limit);
    if (off != payload.size())
      return te_bad(fmt::format("{} trailing bytes after the msgpack value", payload.size() - off));
  } catch (const std::exception& ex) {
    return te_bad(std::string("not valid msgpack: ") + ex.what());
  }
  const TeObj& o = oh.get();
  if (o.type != msgpack::type::MAP) return te_bad("not a msgpack map");
  records::ToolEvent e;
  std::optional<std::string> schema, type, session, parent;
  std::optional<uint64_t> time;
  if (auto err = te_str(o, "schema", true, schema)) return *err;
  if (*schema != records::kSchema) return te_bad("schema '" + *schema + "' (want dynamo.request.trace.v1)");
  if (auto err = te_str(o, "event_type", true, type)) return *err;
  if (*type != records::event::kToolStart && *type != records::event::kToolEnd && *type != records::event::kToolError)
    return te_bad("event_type '" + *type + "' (want tool_start, tool_end or tool_error)");
  if (auto err = te_u64(o, "event_time_unix_ms", true, time)) return *err;
  if (auto err = te_str(o, "session_id", true, session)) return *err;
  if (session->empty()) return te_bad("'session_id' is empty");
  if (auto err = te_str(o, "parent_session_id", false, parent)) return *err;
  const TeObj* tool = te_field(o, "tool");
  if (!tool) return te_bad("no 'tool'");
  if (auto err = te_tool(*tool, e)) return *err;
  e.event_type = std::move(*type);
  e.event_time_unix_ms = *time;
  e.session_id = std::move(*session);
  if (parent) e.parent_session_id = std::move(*parent);
  return e;
}

std::string encode_tool_event(const records::ToolEvent& e) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk{buf};
  pk.pack_map(e.parent_session_id.empty() ? 5 : 6);
  pk.pack("schema");
  pk.pack(records::kSchema);
  pk.pack("event_type");
  pk.pack(e.event_type);
  pk.pack("event_time_unix_ms");
  pk.pack(e.event_time_unix_ms);
  pk.pack("session_id");
  pk.pack(e.session_id);
  if (!e.parent_session_id.empty()) {
    pk.pack("parent_session_id");
    pk.pack(e.parent_session_id);
  }
  pk.pack("tool");
  uint32_t n = 2 + !!e.status + !!e.started_at_unix_ms + !!e.ended_at_unix_ms + !!e.duration_ms + !!e.output_tokens +
               !!e.output_bytes + !!e.tool_name_hash + !!e.error_type;
  pk.pack_map(n);
  pk.pack("tool_call_id");
  pk.pack(e.tool_call_id);
  pk.pack("tool_class");
  pk.pack(e.tool_class);
  auto opt_str = [&](const char* k, const std::optional<std::string>& v) {
    if (!v) return;
    pk.pack(k);
    pk.pack(*v);
  };
  auto opt_u64 = [&](const char* k, const std::optional<uint64_t>& v) {
    if (!v) return;
    pk.pack(k);
    pk.pack(*v);
  };
  opt_str("status", e.status);
  opt_u64("started_at_unix_ms", e.started_at_unix_ms);
  opt_u64("ended_at_unix_ms", e.ended_at_unix_ms);
  if (e.duration_ms) {
    pk.pack("duration_ms");
    pk.pack_double(*e.duration_ms);
  }
  opt_u64("output_tokens", e.output_tokens);
  opt_u64("output_bytes", e.output_bytes);
  opt_str("tool_name_hash", e.tool_name_hash);
  opt_str("error_type", e.error_type);
  return std::string(buf.data(), buf.size());
}

}  // namespace dyn::toolevents
