// dyn-bind's analysis: per-key binding summaries, the TTL affinity check, live binding tables.
#include "dyn/metrics/affinity.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "dyn/records/reader.h"
#include "dyn/records/record.h"

namespace dyn::metrics {
namespace {

std::optional<double> number_at(const Json& row, std::string_view path) {
  const Json* v = records::find_path(row, path);
  return v ? records::as_number(*v) : std::nullopt;
}

std::string text_at(const Json& row, std::string_view path) {
  const Json* v = records::find_path(row, path);
  if (!v || v->is_null()) return {};
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// Turns grouped by key, each group ordered by start time then input order.
std::map<std::string, std::vector<const Turn*>> group(const std::vector<Turn>& turns,
                                                      std::string (*key_of)(const Turn&)) {
  std::map<std::string, std::vector<const Turn*>> g;
  for (const Turn& t : turns) {
    std::string k = key_of(t);
    if (!k.empty()) g[k].push_back(&t);
  }
  for (auto& [k, v] : g)
    std::stable_sort(v.begin(), v.end(), [](const Turn* a, const Turn* b) {
      const double sa = a->start_ms.value_or(0), sb = b->start_ms.value_or(0);
      return sa != sb ? sa < sb : a->order < b->order;
    });
  return g;
}

std::string session_key(const Turn& t) { return t.session_id.empty() ? "" : "session:" + t.session_id; }
std::string group_key(const Turn& t) { return t.parent_session_id.empty() ? "" : "parent:" + t.parent_session_id; }

Json opt_json(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

Json turn_json(const Turn& t) {
  return Json{{"request_id", t.request_id},
              {"session_id", t.session_id},
              {"worker", t.worker},
              {"start_unix_ms", opt_json(t.start_ms)},
              {"end_unix_ms", opt_json(t.end_ms)},
              {"where", t.where}};
}

std::string cell(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

std::optional<Turn> parse_turn(const Json& row, std::string where, uint64_t order) {
  const std::string et = text_at(row, "event_type");
  if (et != "request_end" && et != "route_decision") return std::nullopt;
  if (const Json* w = records::find_path(row, "dyn.warmup"); w && w->is_boolean() && w->get<bool>())
    return std::nullopt;
  Turn t;
  t.where = std::move(where);
  t.order = order;
  t.event_type = et;
  t.request_id = text_at(row, "request.request_id");
  t.session_id = records::session_of(row);
  t.parent_session_id = records::parent_of(row);
  t.worker = records::worker_of(row);
  t.binding = text_at(row, "dyn.binding");
  t.rebind_reason = text_at(row, "dyn.rebind_reason");
  const std::string status = text_at(row, "dyn.status");
  t.error = status == "error" || status == "cancelled";
  t.input_tokens = number_at(row, "request.input_tokens");
  t.cached_tokens = number_at(row, "request.cached_tokens");
  const auto event = number_at(row, "event_time_unix_ms");
  if (et == "route_decision") {
    t.start_ms = event;  // arrival: decisions have no response, so gaps are between arrivals
    t.end_ms = event;
    return t;
  }
  const auto total = number_at(row, "request.total_time_ms");
  t.start_ms = number_at(row, "request.request_received_ms");
  if (!t.start_ms && event && total) t.start_ms = *event - *total;
  if (t.start_ms && total) t.end_ms = *t.start_ms + *total;
  else t.end_ms = event;
  return t;
}

TurnSet load_turns(const std::vector<std::string>& paths) {
  TurnSet set;
  records::RowReader reader(paths);
  Json row;
  std::string where;
  uint64_t order = 0;
  while (reader.next(row, &where)) {
    if (auto t = parse_turn(row, where, order++)) {
      if (t->session_id.empty()) ++set.no_session;
      set.turns.push_back(std::move(*t));
    } else if (const Json* w = records::find_path(row, "dyn.warmup"); w && w->is_boolean() && w->get<bool>()) {
      ++set.warmup_rows;
    } else {
      ++set.skipped_rows;
    }
  }
  reader.summarize();
  return set;
}

std::string affinity_key(const Turn& t) {
  if (!t.parent_session_id.empty()) return group_key(t);
  return session_key(t);
}

std::vector<BindingSummary> summarize_bindings(const std::vector<Turn>& turns) {
  std::vector<BindingSummary> out;
  auto summarize = [&](const std::string& key, const std::vector<const Turn*>& v, const char* kind) {
    BindingSummary s;
    s.key = key;
    s.kind = kind;
    s.id = key.substr(key.find(':') + 1);
    double in = 0, cached = 0;
    bool known = false;
    std::string prev;
    for (const Turn* t : v) {
      ++s.turns;
      if (t->start_ms && (!s.first_ms || *t->start_ms < *s.first_ms)) s.first_ms = t->start_ms;
      const auto end = t->end_ms ? t->end_ms : t->start_ms;
      if (end && (!s.last_ms || *end > *s.last_ms)) s.last_ms = end;
      if (t->error) {
        ++s.errors;
        continue;
      }
      if (!t->worker.empty()) {
        if (std::find(s.workers.begin(), s.workers.end(), t->worker) == s.workers.end()) s.workers.push_back(t->worker);
        if (!prev.empty() && prev != t->worker) ++s.rebinds;
        prev = t->worker;
      }
      if (t->input_tokens && t->cached_tokens) {
        known = true;
        in += *t->input_tokens;
        cached += *t->cached_tokens;
      }
    }
    if (known && in > 0) s.cached_ratio = cached / in;
    out.push_back(std::move(s));
  };
  for (const auto& [k, v] : group(turns, session_key)) summarize(k, v, "session");
  for (const auto& [k, v] : group(turns, group_key)) summarize(k, v, "group");
  std::stable_sort(out.begin(), out.end(), [](const BindingSummary& a, const BindingSummary& b) {
    return a.first_ms.value_or(0) < b.first_ms.value_or(0);
  });
  return out;
}

Json binding_summary_json(const BindingSummary& s) {
  return Json{{"key", s.key},
              {"kind", s.kind},
              {"id", s.id},
              {"turns", s.turns},
              {"errors", s.errors},
              {"workers", s.workers},
              {"rebinds", s.rebinds},
              {"first_unix_ms", opt_json(s.first_ms)},
              {"last_unix_ms", opt_json(s.last_ms)},
              {"cached_ratio", opt_json(s.cached_ratio)}};
}

CheckResult check_affinity(const std::vector<Turn>& turns, const CheckOptions& opt) {
  CheckResult res;
  const double ttl_ms = opt.ttl_secs * 1000.0;
  auto listed = [](const std::vector<std::string>& v, const std::string& r) {
    return !r.empty() && std::find(v.begin(), v.end(), r) != v.end();
  };
  // Why a move to `t` was not a violation ("" when it was one).
  auto excuse = [&](const Turn& t, bool failed_since) -> std::string {
    if (listed(opt.forced_reasons, t.rebind_reason)) return t.rebind_reason;
    if (opt.soft && listed(opt.soft_reasons, t.rebind_reason)) return t.rebind_reason;
    if (opt.soft && t.binding == "rebound" && t.rebind_reason.empty()) return "soft";
    if (failed_since) return "previous_turn_failed";
    return "";
  };
  std::map<std::string, std::vector<const Turn*>> g;
  for (const Turn& t : turns)
    if (auto k = affinity_key(t); !k.empty()) g[k].push_back(&t);
  for (auto& [key, v] : g) {
    std::stable_sort(v.begin(), v.end(), [](const Turn* a, const Turn* b) {
      const double sa = a->start_ms.value_or(0), sb = b->start_ms.value_or(0);
      return sa != sb ? sa < sb : a->order < b->order;
    });
    ++res.keys;
    const Turn* prev = nullptr;
    bool failed_since = false;  // the previous worker failed a turn of this key since `prev`
    for (const Turn* t : v) {
      if (t->error) {
        if (prev && t->worker == prev->worker) failed_since = true;
        continue;
      }
      if (t->worker.empty()) continue;
      ++res.turns_checked;
      if (prev && prev->worker != t->worker) {
        double gap;
        if (prev->end_ms && t->start_ms) gap = *t->start_ms - *prev->end_ms;
        else gap = t->start_ms.value_or(0) - prev->start_ms.value_or(0);
        if (gap <= ttl_ms) {
          std::string why = excuse(*t, failed_since);
          (why.empty() ? res.violations : res.moves).push_back({key, prev, t, gap, std::move(why)});
        }
      }
      prev = t;
      failed_since = false;
    }
  }
  auto by_time = [](const Violation& a, const Violation& b) {
    return a.next->start_ms.value_or(0) < b.next->start_ms.value_or(0);
  };
  std::stable_sort(res.violations.begin(), res.violations.end(), by_time);
  std::stable_sort(res.moves.begin(), res.moves.end(), by_time);
  return res;
}

Json violation_json(const Violation& v, double ttl_secs) {
  Json j{{"key", v.key},
         {"previous", turn_json(*v.previous)},
         {"next", turn_json(*v.next)},
         {"gap_ms", v.gap_ms},
         {"ttl_secs", ttl_secs}};
  if (!v.reason.empty()) j["reason"] = v.reason;
  return j;
}

std::string run_config_beside(const std::string& trace_path) {
  if (trace_path.empty() || trace_path == "-") return "";
  std::string prefix = trace_path;
  // PREFIX.NNNNNN.jsonl.gz or PREFIX.NNNNNN.jsonl: six digits between the prefix and ".jsonl".
  for (const char* ext : {".jsonl.gz", ".jsonl"}) {
    const std::string e = ext;
    if (prefix.size() > e.size() + 7 && prefix.compare(prefix.size() - e.size(), e.size(), e) == 0) {
      const std::string digits = prefix.substr(prefix.size() - e.size() - 6, 6);
      if (prefix[prefix.size() - e.size() - 7] == '.' &&
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        prefix.resize(prefix.size() - e.size() - 7);
        break;
      }
    }
  }
  const std::string cfg = prefix + ".run-config.json";
  std::ifstream in(cfg);
  return in.good() ? cfg : "";
}

Expected<RouterAffinity> read_router_affinity(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot read the run-config", kExitIo};
  Json j = Json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("options") || !j["options"].is_object())
    return bad_data(path + ": not a run-config (no \"options\" object)");
  RouterAffinity a;
  a.path = path;
  const Json& o = j["options"];
  if (auto t = o.find("--router-session-affinity-ttl-secs"); t != o.end() && !t->is_null()) {
    const std::string v = t->is_string() ? t->get<std::string>() : t->dump();
    char* end = nullptr;
    const double ttl = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end) return bad_data(path + ": --router-session-affinity-ttl-secs is not a number: " + v);
    a.ttl_secs = ttl;
  }
  if (auto m = o.find("--router-session-affinity-mode"); m != o.end() && m->is_string()) a.soft = *m == "soft";
  return a;
}

Expected<std::vector<Json>> parse_bindings(const Json& body) {
  const Json* list = &body;
  if (body.is_object() && body.contains("bindings")) list = &body["bindings"];
  if (!list->is_array()) return bad_data("bindings: expected a JSON array of objects or {\"bindings\": [...]}");
  std::vector<Json> out;
  for (const Json& e : *list) {
    if (!e.is_object()) return bad_data("bindings: an entry is not a JSON object");
    out.push_back(e);
  }
  return out;
}

std::string text_table(const std::vector<std::vector<std::string>>& rows, std::size_t left) {
  if (rows.empty()) return {};
  std::vector<std::size_t> w;
  for (const auto& r : rows) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  std::string out;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (std::size_t i = 0; i < rows[k].size(); ++i) {
      if (i) line += "  ";
      line += i < left ? fmt::format("{:<{}}", rows[k][i], w[i]) : fmt::format("{:>{}}", rows[k][i], w[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (k == 0) out += std::string(line.size(), '-') + "\n";
  }
  return out;
}

std::string bindings_table(const std::vector<Json>& entries) {
  std::vector<std::string> cols;
  for (const Json& e : entries)
    for (const auto& [k, v] : e.items())
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
  if (cols.empty()) return "no live bindings\n";
  std::vector<std::vector<std::string>> rows{cols};
  for (const Json& e : entries) {
    std::vector<std::string> r;
    for (const auto& c : cols) r.push_back(e.contains(c) ? cell(e[c]) : "-");
    rows.push_back(std::move(r));
  }
  return text_table(rows);
}

}  // namespace dyn::metrics
