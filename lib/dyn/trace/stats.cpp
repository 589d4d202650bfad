// dyn-trace stats: one simdjson pass collecting per-group sums and latency samples.
#include "dyn/trace/stats.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/records/percentile.h"
#include "dyn/records/reader.h"

namespace dyn::trace {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

struct Group {
  bool is_null = false;
  std::string parent;
  uint64_t requests = 0, errors = 0, input = 0, output = 0, cached = 0, tool_calls = 0, tool_events = 0;
  double tool_ms = 0;
  std::vector<double> ttft, latency;
  std::set<std::string> members;  // workers of a session, sessions of a worker
  bool has_time = false;
  uint64_t first = 0, last = 0;
};

using Row = simdjson::dom::object;

bool at(Row e, const char* ptr, element* out) { return e.at_pointer(ptr).get(*out) == simdjson::SUCCESS; }

bool number(Row e, const char* ptr, double* v) {
  element x;
  if (!at(e, ptr, &x)) return false;
  switch (x.type()) {
    case element_type::INT64: *v = static_cast<double>(x.get_int64().value_unsafe()); return true;
    case element_type::UINT64: *v = static_cast<double>(x.get_uint64().value_unsafe()); return true;
    case element_type::DOUBLE: *v = x.get_double().value_unsafe(); return true;
    default: return false;
  }
}

uint64_t count(Row e, const char* ptr) {
  element x;
  if (!at(e, ptr, &x)) return 0;
  if (x.type() == element_type::UINT64) return x.get_uint64().value_unsafe();
  if (x.type() == element_type::INT64) return static_cast<uint64_t>(std::max<int64_t>(0, x.get_int64().value_unsafe()));
  if (x.type() == element_type::DOUBLE) return static_cast<uint64_t>(std::max(0.0, x.get_double().value_unsafe()));
  return 0;
}

/// Id as text (string, or integer in decimal); false when absent or another type.
bool id(Row e, const char* ptr, std::string* out) {
  element x;
  if (!at(e, ptr, &x)) return false;
  if (x.type() == element_type::STRING) *out = std::string(x.get_string().value_unsafe());
  else if (x.type() == element_type::INT64) *out = std::to_string(x.get_int64().value_unsafe());
  else if (x.type() == element_type::UINT64) *out = std::to_string(x.get_uint64().value_unsafe());
  else return false;
  return true;
}

bool session_id(Row row, std::string* out) {
  // A trajectory-era row's trajectory_id is the agent's own session (its session_id named the run).
  return id(row, "/agent_context/trajectory_id", out) || id(row, "/agent_context/session_id", out) ||
         id(row, "/session_id", out);
}

Json pct(std::vector<double>& v) {
  Json o = Json::object();
  if (v.empty()) {
    o["p50"] = nullptr, o["p90"] = nullptr, o["p99"] = nullptr;
    return o;
  }
  std::sort(v.begin(), v.end());
  o["p50"] = records::percentile_linear(v, 50);
  o["p90"] = records::percentile_linear(v, 90);
  o["p99"] = records::percentile_linear(v, 99);
  return o;
}

Json summary(const char* kind, const char* key, const std::string& name, Group& g) {
  Json o = Json::object();
  o["kind"] = kind;
  if (g.is_null) o[key] = nullptr;
  else o[key] = name;
  if (std::string(kind) == "session") {
    if (g.parent.empty()) o["parent_session_id"] = nullptr;
    else o["parent_session_id"] = g.parent;
  }
  o["requests"] = g.requests;
  o["errors"] = g.errors;
  o["input_tokens"] = g.input;
  o["output_tokens"] = g.output;
  o["cached_tokens"] = g.cached;
  if (g.input > 0) o["cached_ratio"] = static_cast<double>(g.cached) / static_cast<double>(g.input);
  else o["cached_ratio"] = nullptr;
  o["ttft_ms"] = pct(g.ttft);
  o["latency_ms"] = pct(g.latency);
  o["tool_calls"] = g.tool_calls;
  o["tool_events"] = g.tool_events;
  o["tool_ms"] = g.tool_ms;
  if (std::string(kind) == "session") o["workers"] = Json(std::vector<std::string>(g.members.begin(), g.members.end()));
  else if (std::string(kind) == "worker") o["sessions"] = g.members.size();
  if (g.has_time) {
    o["first_event_unix_ms"] = g.first;
    o["last_event_unix_ms"] = g.last;
  } else {
    o["first_event_unix_ms"] = nullptr;
    o["last_event_unix_ms"] = nullptr;
  }
  return o;
}

std::string fmt_num(const Json& v, int prec) {
  if (v.is_null()) return "-";
  char b[64];
  if (v.is_number_float()) std::snprintf(b, sizeof b, "%.*f", prec, v.get<double>());
  else std::snprintf(b, sizeof b, "%s", v.dump().c_str());
  return b;
}

}  // namespace

int trace_stats(const StatsOptions& o, io::Output& out) {
  records::RowReader reader(o.inputs, io::JsonlOptions{.lines = {.strict = o.strict}});
  std::map<std::string, Group> sessions, workers;
  Group null_session, null_worker, total;
  null_session.is_null = null_worker.is_null = true;
  std::string sid, wid, status;
  Row row;
  while (reader.next_dom(row)) {
    element x;
    std::string_view type;
    if (!at(row, "/event_type", &x) || x.get_string().get(type)) continue;
    bool has_sid = session_id(row, &sid);
    Group& sg = has_sid ? sessions[sid] : null_session;
    double tm = 0;
    bool has_time = number(row, "/event_time_unix_ms", &tm) && tm >= 0;
    auto stamp = [&](Group& g) {
      if (!has_time) return;
      uint64_t u = static_cast<uint64_t>(tm);
      if (!g.has_time) g.first = g.last = u, g.has_time = true;
      g.first = std::min(g.first, u);
      g.last = std::max(g.last, u);
    };
    if (type == "tool_end" || type == "tool_error") {
      double d = 0;
      number(row, "/tool/duration_ms", &d);
      for (Group* g : {&sg, &total}) {
        ++g->tool_events;
        g->tool_ms += d;
        stamp(*g);
      }
      continue;
    }
    if (type != "request_end") continue;
    bool warm = false;
    if (at(row, "/dyn/warmup", &x) && x.get_bool().get(warm) == simdjson::SUCCESS && warm) continue;
    bool has_wid = id(row, "/request/worker/decode_worker_id", &wid);
    Group& wg = has_wid ? workers[wid] : null_worker;
    bool ok = !(id(row, "/dyn/status", &status) && status != "ok");
    std::string parent;
    if (has_sid && sg.parent.empty() &&
        (id(row, "/agent_context/parent_session_id", &parent) ||
         id(row, "/agent_context/parent_trajectory_id", &parent)))
      sg.parent = parent;
    if (has_wid) sg.members.insert(wid);
    if (has_sid) wg.members.insert(sid);
    uint64_t calls = 0;
    if (at(row, "/request/finish_reason_metadata/tool_calls", &x) && x.type() == element_type::ARRAY)
      calls = x.get_array().value_unsafe().size();
    double ttft = 0, lat = 0;
    bool has_ttft = number(row, "/request/ttft_ms", &ttft);
    bool has_lat = number(row, "/request/total_time_ms", &lat);
    uint64_t in = count(row, "/request/input_tokens"), outt = count(row, "/request/output_tokens"),
             cached = count(row, "/request/cached_tokens");
    for (Group* g : {&sg, &wg, &total}) {
      ++g->requests;
      stamp(*g);
      if (!ok) {
        ++g->errors;
        continue;
      }
      g->input += in;
      g->output += outt;
      g->cached += cached;
      g->tool_calls += calls;
      if (has_ttft) g->ttft.push_back(ttft);
      if (has_lat) g->latency.push_back(lat);
    }
  }
  reader.summarize();

  std::vector<Json> rows;
  for (auto& [k, g] : sessions) rows.push_back(summary("session", "session_id", k, g));
  if (null_session.requests + null_session.tool_events > 0)
    rows.push_back(summary("session", "session_id", "", null_session));
  for (auto& [k, g] : workers) rows.push_back(summary("worker", "worker", k, g));
  if (null_worker.requests > 0) rows.push_back(summary("worker", "worker", "", null_worker));
  total.members.clear();
  rows.push_back(summary("total", "total", "", total));
  rows.back().erase("total");

  if (!o.table) {
    for (auto& r : rows) out.line(r.dump());
  } else {
    char b[512];
    std::snprintf(b, sizeof b, "%-8s %-28s %8s %6s %12s %10s %7s %9s %9s %9s %9s %9s %9s %6s", "kind", "id", "requests",
                  "errors", "input_tok", "output_tok", "cached", "ttft_p50", "ttft_p90", "ttft_p99", "lat_p50",
                  "lat_p90", "lat_p99", "tools");
    out.line(b);
    for (auto& r : rows) {
      std::string idv = r["kind"] == "session"  ? (r["session_id"].is_null() ? "-" : r["session_id"].get<std::string>())
                        : r["kind"] == "worker" ? (r["worker"].is_null() ? "-" : r["worker"].get<std::string>())
                                                : "all";
      if (idv.size() > 28) idv = idv.substr(0, 25) + "...";
      std::string ratio =
          r["cached_ratio"].is_null() ? "-" : fmt_num(Json(100.0 * r["cached_ratio"].get<double>()), 1) + "%";
      std::snprintf(b, sizeof b, "%-8s %-28s %8s %6s %12s %10s %7s %9s %9s %9s %9s %9s %9s %6s",
                    r["kind"].get<std::string>().c_str(), idv.c_str(), fmt_num(r["requests"], 0).c_str(),
                    fmt_num(r["errors"], 0).c_str(), fmt_num(r["input_tokens"], 0).c_str(),
                    fmt_num(r["output_tokens"], 0).c_str(), ratio.c_str(), fmt_num(r["ttft_ms"]["p50"], 1).c_str(),
                    fmt_num(r["ttft_ms"]["p90"], 1).c_str(), fmt_num(r["ttft_ms"]["p99"], 1).c_str(),
                    fmt_num(r["latency_ms"]["p50"], 1).c_str(), fmt_num(r["latency_ms"]["p90"], 1).c_str(),
                    fmt_num(r["latency_ms"]["p99"], 1).c_str(), fmt_num(r["tool_calls"], 0).c_str());
      out.line(b);
    }
  }
  if (o.strict && (reader.truncated_files() > 0 || reader.malformed() > 0)) return kExitBadData;
  return kExitOk;
}

}  // namespace dyn::trace
