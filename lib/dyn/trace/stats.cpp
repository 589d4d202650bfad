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
  /// A session's turns for the inferred tool gaps (request_end rows): start, end (unix ms), whether
  /// the reply stopped for a tool, and the tools it called.
  struct Turn {
    double start = 0, end = 0;
    bool tool_stop = false;
    std::string tools;
  };
  std::vector<Turn> turns;
  double inferred_ms = 0;
  uint64_t inferred_gaps = 0;
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

/// Where tool time came from: "harness" (tool_end/tool_error rows), "inferred" (gaps after a
/// reply that stopped for a tool), "mixed", or null when there is none.
Json tool_source(uint64_t harness, uint64_t inferred) {
  if (harness && inferred) return "mixed";
  if (harness) return "harness";
  if (inferred) return "inferred";
  return nullptr;
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
  // Harness rows where the session has them; else the gaps after replies that stopped for a tool.
  o["tool_ms"] = g.tool_ms + g.inferred_ms;
  o["tool_source"] = tool_source(g.tool_events, g.inferred_gaps);
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

/// One tool name's calls and time (kind "tool"): harness rows and inferred gaps.
struct ToolGroup {
  uint64_t harness = 0, inferred = 0;
  double ms = 0;
  std::vector<double> durations;
  void add(double d, bool from_harness) {
    ++(from_harness ? harness : inferred);
    ms += d;
    durations.push_back(d);
  }
};

/// Adds the inferred gaps of every session without harness rows (Dynamo's request trace docs:
/// tool_wait(turn N) ~ next.request_received_ms - this.event_time_unix_ms) to it, `total` and `tools`.
void infer_tool_gaps(std::map<std::string, Group>& sessions, Group& total, std::map<std::string, ToolGroup>& tools) {
  for (auto& [id, g] : sessions) {
    if (g.tool_events > 0) continue;  // the harness said when its tools ran
    std::stable_sort(g.turns.begin(), g.turns.end(),
                     [](const Group::Turn& a, const Group::Turn& b) { return a.start < b.start; });
    for (size_t i = 0; i + 1 < g.turns.size(); ++i) {
      if (!g.turns[i].tool_stop) continue;
      double gap = std::max(0.0, g.turns[i + 1].start - g.turns[i].end);
      g.inferred_ms += gap;
      ++g.inferred_gaps;
      tools[g.turns[i].tools.empty() ? "unknown" : g.turns[i].tools].add(gap, false);
    }
    total.inferred_ms += g.inferred_ms;
    total.inferred_gaps += g.inferred_gaps;
  }
}

Json tool_summary(const std::string& name, ToolGroup& t) {
  Json o = Json::object();
  o["kind"] = "tool";
  o["tool"] = name;
  o["calls"] = t.harness + t.inferred;
  o["tool_ms"] = t.ms;
  o["mean_ms"] = t.ms / static_cast<double>(std::max<uint64_t>(1, t.harness + t.inferred));
  o["duration_ms"] = pct(t.durations);
  o["tool_source"] = tool_source(t.harness, t.inferred);
  return o;
}

}  // namespace

int trace_stats(const StatsOptions& o, io::Output& out) {
  records::RowReader reader(o.inputs, io::JsonlOptions{.lines = {.strict = o.strict}});
  std::map<std::string, Group> sessions, workers;
  std::map<std::string, ToolGroup> tools;
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
      std::string name;
      if (!id(row, "/tool/tool_class", &name) || name.empty()) name = "unknown";
      tools[name].add(d, true);
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
    std::set<std::string> names;
    if (at(row, "/request/finish_reason_metadata/tool_calls", &x) && x.type() == element_type::ARRAY) {
      simdjson::dom::array list = x.get_array().value_unsafe();
      calls = list.size();
      for (element c : list) {
        std::string_view n;
        if (c.at_key("name").get_string().get(n) == simdjson::SUCCESS && !n.empty()) names.emplace(n);
      }
    }
    double ttft = 0, lat = 0;
    bool has_ttft = number(row, "/request/ttft_ms", &ttft);
    bool has_lat = number(row, "/request/total_time_ms", &lat);
    if (has_sid && has_time) {
      // The turn's span for the inferred tool gaps: from its arrival to its row.
      Group::Turn t;
      t.end = tm;
      if (!number(row, "/request/request_received_ms", &t.start)) t.start = tm - (has_lat ? lat : 0.0);
      std::string_view reason;
      t.tool_stop = calls > 0 || (at(row, "/request/finish_reason_metadata/finish_reason", &x) &&
                                  x.get_string().get(reason) == simdjson::SUCCESS &&
                                  (reason == "tool_calls" || reason == "tool_use"));
      for (const auto& n : names) t.tools += (t.tools.empty() ? "" : "+") + n;
      sg.turns.push_back(std::move(t));
    }
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
  infer_tool_gaps(sessions, total, tools);

  std::vector<Json> rows;
  for (auto& [k, g] : sessions) rows.push_back(summary("session", "session_id", k, g));
  if (null_session.requests + null_session.tool_events > 0)
    rows.push_back(summary("session", "session_id", "", null_session));
  for (auto& [k, g] : workers) rows.push_back(summary("worker", "worker", k, g));
  if (null_worker.requests > 0) rows.push_back(summary("worker", "worker", "", null_worker));
  for (auto& [name, t] : tools) rows.push_back(tool_summary(name, t));
  total.members.clear();
  rows.push_back(summary("total", "total", "", total));
  rows.back().erase("total");

  if (!o.table) {
    for (auto& r : rows) out.line(r.dump());
  } else {
    char b[512];
    std::snprintf(b, sizeof b, "%-8s %-28s %8s %6s %12s %10s %7s %9s %9s %9s %9s %9s %9s %6s %10s", "kind", "id",
                  "requests", "errors", "input_tok", "output_tok", "cached", "ttft_p50", "ttft_p90", "ttft_p99",
                  "lat_p50", "lat_p90", "lat_p99", "tools", "tool_ms");
    out.line(b);
    for (auto& r : rows) {
      std::string idv = r["kind"] == "session"  ? (r["session_id"].is_null() ? "-" : r["session_id"].get<std::string>())
                        : r["kind"] == "worker" ? (r["worker"].is_null() ? "-" : r["worker"].get<std::string>())
                        : r["kind"] == "tool"   ? r["tool"].get<std::string>()
                                                : "all";
      // A tool row: its calls in the tools column, its time in tool_ms, nothing else.
      const bool tool = r["kind"] == "tool";
      const std::string tools_n = fmt_num(tool ? r["calls"] : r["tool_calls"], 0);
      std::string tool_ms = fmt_num(Json(r["tool_ms"].get<double>()), 1);
      if (idv.size() > 28) idv = idv.substr(0, 25) + "...";
      std::string ratio =
          r["cached_ratio"].is_null() ? "-" : fmt_num(Json(100.0 * r["cached_ratio"].get<double>()), 1) + "%";
      std::snprintf(b, sizeof b, "%-8s %-28s %8s %6s %12s %10s %7s %9s %9s %9s %9s %9s %9s %6s %10s",
                    r["kind"].get<std::string>().c_str(), idv.c_str(), fmt_num(r["requests"], 0).c_str(),
                    fmt_num(r["errors"], 0).c_str(), fmt_num(r["input_tokens"], 0).c_str(),
                    fmt_num(r["output_tokens"], 0).c_str(), ratio.c_str(), fmt_num(r["ttft_ms"]["p50"], 1).c_str(),
                    fmt_num(r["ttft_ms"]["p90"], 1).c_str(), fmt_num(r["ttft_ms"]["p99"], 1).c_str(),
                    fmt_num(r["latency_ms"]["p50"], 1).c_str(), fmt_num(r["latency_ms"]["p90"], 1).c_str(),
                    fmt_num(r["latency_ms"]["p99"], 1).c_str(), tools_n.c_str(), tool_ms.c_str());
      out.line(b);
    }
  }
  if (o.strict && (reader.truncated_files() > 0 || reader.malformed() > 0)) return kExitBadData;
  return kExitOk;
}

}  // namespace dyn::trace
