// WEKA agent traces -> workload rows. A conversation is flattened into requests on one clock (the
// root's), sorted by start, then chained per session so replay keeps the recorded gaps.
#include "dyn/trace/weka.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "dyn/base/diag.h"
#include "dyn/io/line_reader.h"
#include "dyn/trace/sessionize.h"

namespace dyn::trace {

namespace {

/// One request of a flattened conversation, times in s on the root's clock.
struct WekaRequest {
  double start = 0, end = 0;
  size_t session = 0;  ///< index into WekaFlat::sessions
  bool tool_stop = false;
  const Json* row = nullptr;
};

struct WekaSession {
  std::string id;
  int64_t parent = -1;  ///< index of the parent session
  double end = 0;       ///< a subagent's recorded end (its marker's t), root clock
};

struct WekaFlat {
  std::vector<WekaSession> sessions;
  std::vector<WekaRequest> requests;
};

Error weka_error(const std::string& path, const std::string& what) { return bad_data(path + ": " + what); }

bool weka_number(const Json& o, const char* key, double* v) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return false;
  *v = it->get<double>();
  return std::isfinite(*v) && *v >= 0;
}

/// Appends the requests of `list` (session `session`, whose t = 0 is `origin` s on the root clock).
std::optional<Error> flatten_weka(const Json& list, const std::string& path, size_t session, double origin,
                                  const engine::PerfProfile* profile, WekaFlat& flat) {
  if (!list.is_array()) return weka_error(path, "'requests' is not an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& r = list[i];
    std::string where = path + "[" + std::to_string(i) + "]";
    if (!r.is_object()) return weka_error(where, "not an object");
    double t = 0;
    if (!weka_number(r, "t", &t)) return weka_error(where, "no numeric 't'");
    if (r.value("type", "") == "subagent") {
      double duration_ms = 0;
      if (!weka_number(r, "duration_ms", &duration_ms)) return weka_error(where, "subagent without 'duration_ms'");
      auto id = r.find("agent_id");
      if (id == r.end() || !id->is_string()) return weka_error(where, "subagent without 'agent_id'");
      flat.sessions.push_back(
          {flat.sessions[session].id + "/" + id->get<std::string>(), static_cast<int64_t>(session), origin + t});
      size_t child = flat.sessions.size() - 1;
      auto sub = r.find("requests");
      if (sub == r.end()) return weka_error(where, "subagent without 'requests'");
      if (auto e = flatten_weka(*sub, where + ".requests", child, origin + t - duration_ms / 1000.0, profile, flat))
        return e;
      continue;
    }
    double in = 0, out = 0, api = 0;
    if (!weka_number(r, "in", &in)) return weka_error(where, "no 'in'");
    if (!weka_number(r, "out", &out)) return weka_error(where, "no 'out'");
    auto ids = r.find("hash_ids");
    if (ids == r.end() || !ids->is_array()) return weka_error(where, "no 'hash_ids' array");
    for (const Json& h : *ids)
      if (!h.is_number_integer() || h.get<int64_t>() < 0)
        return weka_error(where, "a hash id is not a non-negative integer");
    double service =
        weka_number(r, "api_time", &api)
            ? api
            : estimate_service_ms(static_cast<uint64_t>(in), 0, static_cast<uint64_t>(out), profile) / 1000.0;
    flat.requests.push_back({origin + t, origin + t + service, session, r.value("stop", "") == "tool_use", &r});
  }
  return std::nullopt;
}

double weka_ms(double seconds) { return std::max(0.0, std::round(seconds * 1000.0)); }

}  // namespace

Expected<size_t> weka_to_workload(const Json& trace, uint64_t& next_id, const engine::PerfProfile* profile,
                                  std::vector<records::WorkloadRow>& out, std::vector<double>* starts_ms) {
  if (!trace.is_object()) return bad_data("a WEKA trace is one JSON object");
  auto id = trace.find("id");
  if (id == trace.end() || !id->is_string() || id->get<std::string>().empty()) return bad_data("no string 'id'");
  if (auto b = trace.find("block_size");
      b != trace.end() && (!b->is_number_integer() || b->get<int64_t>() != kWekaBlockSize))
    return bad_data("block_size " + b->dump() + " (the WEKA format's is 64)");
  auto reqs = trace.find("requests");
  if (reqs == trace.end()) return bad_data("no 'requests'");
  WekaFlat flat;
  flat.sessions.push_back({id->get<std::string>(), -1, 0});
  if (auto e = flatten_weka(*reqs, "requests", 0, 0, profile, flat)) return *e;
  std::stable_sort(flat.requests.begin(), flat.requests.end(),
                   [](const WekaRequest& a, const WekaRequest& b) { return a.start < b.start; });

  struct State {
    uint32_t turns = 0;
    double last_end = 0;  ///< end of the latest request so far (s)
    bool tool_stop = false;
    std::string last_request_id;
    std::vector<size_t> pending_children;  ///< subagents started and not yet joined
  };
  std::vector<State> state(flat.sessions.size());
  std::unordered_map<uint64_t, uint64_t> local_ids;  // hash_id_scope "local": one map per trace
  size_t first = out.size();
  for (const WekaRequest& q : flat.requests) {
    const WekaSession& s = flat.sessions[q.session];
    State& st = state[q.session];
    records::WorkloadRow row;
    row.where = "requests";
    row.index = out.size();
    row.session_id = s.id;
    if (s.parent >= 0) row.parent_session_id = flat.sessions[static_cast<size_t>(s.parent)].id;
    row.request_id = s.id + ":" + std::to_string(st.turns);
    if (st.turns == 0) {
      row.timestamp_ms = weka_ms(q.start);
      if (s.parent >= 0) {
        // A subagent: its recorded start for a fixed schedule, and the wait after the parent's
        // turn before it for the other load modes (where its first turn follows that turn).
        State& ps = state[static_cast<size_t>(s.parent)];
        ps.pending_children.push_back(q.session);
        if (ps.turns > 0) row.delay_ms = weka_ms(q.start - ps.last_end);
      }
    } else {
      double ready = st.last_end;
      auto& kids = st.pending_children;
      for (auto it = kids.begin(); it != kids.end();) {
        if (flat.sessions[*it].end <= q.start && state[*it].turns > 0) {
          row.wait_for.push_back(state[*it].last_request_id);
          ready = std::max(ready, state[*it].last_end);
          it = kids.erase(it);
        } else {
          ++it;
        }
      }
      if (st.tool_stop) row.tool_wait_ms = weka_ms(q.start - ready);
      else row.delay_ms = weka_ms(q.start - ready);
    }
    const Json& r = *q.row;
    row.input_length = r["in"].get<uint64_t>();
    row.output_length = r["out"].get<uint64_t>();
    for (const Json& h : r["hash_ids"]) {
      auto [it, fresh] = local_ids.emplace(h.get<uint64_t>(), next_id);
      if (fresh) ++next_id;
      row.hash_ids.push_back(it->second);
    }
    // WEKA hashes full blocks only; the partial tail is the request's own (never a cache hit).
    while (row.hash_ids.size() * kWekaBlockSize < row.input_length) row.hash_ids.push_back(next_id++);
    st.turns++;
    st.last_end = q.end;
    st.tool_stop = q.tool_stop;
    st.last_request_id = row.request_id;
    out.push_back(std::move(row));
    if (starts_ms) starts_ms->push_back(q.start * 1000.0);
  }
  return out.size() - first;
}

records::Workload read_weka(const std::vector<std::string>& inputs, const engine::PerfProfile* profile) {
  records::Workload w;
  w.block_size = kWekaBlockSize;
  w.dataset_type = records::DatasetType::kMooncakeTrace;
  io::LineReader reader(inputs);
  io::Line line;
  std::string text, file;
  uint64_t next_id = 0;
  std::vector<double> starts;
  auto flush = [&] {
    if (file.empty()) return;
    Json doc = Json::parse(text, nullptr, false);
    Expected<size_t> n = doc.is_discarded() ? Expected<size_t>(bad_data("not one JSON document"))
                                            : weka_to_workload(doc, next_id, profile, w.rows, &starts);
    if (!n) {
      w.errors.push_back(file + ": " + n.error().message);
      diag::error(file, n.error().message);
    } else {
      for (size_t k = w.rows.size() - *n; k < w.rows.size(); ++k) w.rows[k].where = file;
    }
    text.clear();
  };
  while (reader.next(line)) {
    if (*line.file != file) {
      flush();
      file = *line.file;
    }
    text.append(line.text).push_back('\n');
  }
  flush();
  // One timeline: every conversation starts at 0, so rows merge by start (each file's rows are in
  // start order already) and the timestamps, of roots and subagents, never go back.
  std::vector<size_t> order(w.rows.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return starts[a] < starts[b]; });
  std::vector<records::WorkloadRow> merged;
  merged.reserve(w.rows.size());
  for (size_t k : order) {
    merged.push_back(std::move(w.rows[k]));
    merged.back().index = merged.size() - 1;
  }
  w.rows = std::move(merged);
  w.has_timestamps = !w.rows.empty() && w.rows.front().timestamp_ms.has_value();
  return w;
}

}  // namespace dyn::trace
