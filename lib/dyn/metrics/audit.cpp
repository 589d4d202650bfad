// dyn-bench audit: reusable, predicted and delivered prefill per run, worker and session, and the
// misses attributed to workload, routing choice and stale index from each one's own evidence.
#include "dyn/metrics/audit.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "dyn/base/error.h"
#include "dyn/records/record.h"
#include "dyn/records/reader.h"
#include "dyn/tokens/hash.h"

namespace dyn::metrics {

// Named (not anonymous): unity builds merge this module's files into one translation unit.
namespace audit_impl {

const Json* at(const Json& j, const char* k) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(k);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}
std::optional<uint64_t> u64(const Json* j, const char* k) {
  const Json* v = j ? at(*j, k) : nullptr;
  if (v && v->is_number_unsigned()) return v->get<uint64_t>();
  if (v && v->is_number_integer() && v->get<int64_t>() >= 0) return static_cast<uint64_t>(v->get<int64_t>());
  return std::nullopt;
}
std::string text(const Json* j, const char* k) {
  const Json* v = j ? at(*j, k) : nullptr;
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return v->dump();
  return "";
}
std::vector<uint64_t> ids(const Json* a) {
  std::vector<uint64_t> out;
  if (!a || !a->is_array()) return out;
  out.reserve(a->size());
  for (const Json& v : *a)
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) out.push_back(v.get<uint64_t>());
  return out;
}

// The cached tokens of the eligible candidate with the most overlap (dyn.explain and dyn.block_size).
std::optional<uint64_t> best_of_candidates(const Json* dyn_obj, uint64_t input) {
  const Json* ex = dyn_obj ? at(*dyn_obj, "explain") : nullptr;
  const Json* ws = ex ? at(*ex, "workers") : nullptr;
  auto bs = u64(dyn_obj, "block_size");
  if (!ws || !ws->is_array() || !bs) return std::nullopt;
  uint64_t best = 0;
  for (const Json& w : *ws) {
    const Json* el = at(w, "eligible");
    if (el && el->is_boolean() && !el->get<bool>()) continue;
    best = std::max(best, u64(&w, "overlap_blocks").value_or(0));
  }
  return std::min(best * *bs, input);
}

struct Gathered {
  std::vector<AuditRequest> requests;
  std::vector<bool> ended;  // has a request_end row
  std::unordered_map<std::string, size_t> by_id;
  std::unordered_set<std::string> failed;  // request ids of rows that did not succeed
};

AuditRequest& slot(Gathered& g, const std::string& id) {
  auto [it, fresh] = g.by_id.try_emplace(id, g.requests.size());
  if (fresh) {
    g.requests.emplace_back();
    g.requests.back().request_id = id;
    g.ended.push_back(false);
  }
  return g.requests[it->second];
}

void add_decision(Gathered& g, const Json& row) {
  const Json* req = at(row, "request");
  const Json* d = at(row, "dyn");
  if (d && at(*d, "error")) return;  // refused: never placed
  AuditRequest& r = slot(g, text(req, "request_id"));
  if (g.ended[g.by_id[r.request_id]]) return;  // the request_end row already said
  r.session_id = text(at(row, "agent_context"), "session_id");
  r.start_ms = static_cast<double>(u64(&row, "event_time_unix_ms").value_or(0));
  r.input_tokens = u64(req, "input_tokens").value_or(0);
  r.worker = text(req ? at(*req, "worker") : nullptr, "decode_worker_id");
  // The last placement of a request is the one that served it (a retry's row comes later).
  r.predicted = u64(req, "cached_tokens");
  if (auto av = u64(d, "avoidable_prefill_tokens"); av && r.predicted) r.best = *r.predicted + *av;
  else r.best = best_of_candidates(d, r.input_tokens);
}

void add_end(Gathered& g, const Json& row) {
  const Json* req = at(row, "request");
  const Json* d = at(row, "dyn");
  const std::string id = text(req, "request_id");
  if (text(d, "status") != "ok" && d && at(*d, "status")) {
    g.failed.insert(id);
    return;
  }
  AuditRequest& r = slot(g, id);
  g.ended[g.by_id[id]] = true;
  r.session_id = text(at(row, "agent_context"), "session_id");
  r.start_ms = static_cast<double>(u64(req, "request_received_ms").value_or(0));
  r.input_tokens = u64(req, "input_tokens").value_or(0);
  r.worker = text(req ? at(*req, "worker") : nullptr, "decode_worker_id");
  r.delivered = u64(req, "cached_tokens");
  if (auto p = u64(d, "predicted_cached_tokens")) {
    r.predicted = p;
    if (auto av = u64(d, "avoidable_prefill_tokens")) r.best = *p + *av;
  }
  if (auto h = ids(d ? at(*d, "hash_ids") : nullptr); !h.empty() && u64(d, "block_size")) {
    r.ids = std::move(h);
    r.ids_block_size = static_cast<uint32_t>(*u64(d, "block_size"));
    r.ids_are_sequence = false;
  } else if (const Json* rp = req ? at(*req, "replay") : nullptr) {
    r.ids = ids(at(*rp, "input_sequence_hashes"));
    r.ids_block_size = static_cast<uint32_t>(u64(rp, "trace_block_size").value_or(0));
    r.ids_are_sequence = true;
    r.ids_tokens = u64(rp, "input_length").value_or(0);
  }
}

uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

Json figures_json(const AuditFigures& f) {
  Json share = nullptr;
  if (f.attributed_requests && f.miss) share = static_cast<double>(f.unexplained) / static_cast<double>(f.miss);
  return Json{{"requests", f.requests},
              {"input_tokens", f.input},
              {"reusable_tokens", f.reusable},
              {"reusable_requests", f.reusable_requests},
              {"predicted_tokens", f.predicted},
              {"predicted_requests", f.predicted_requests},
              {"delivered_tokens", f.delivered},
              {"delivered_requests", f.delivered_requests},
              {"miss_tokens", f.miss},
              {"cold_tokens", f.cold},
              {"routing_tokens", f.routing},
              {"routing_requests", f.routing_requests},
              {"stale_tokens", f.stale},
              {"underpredicted_tokens", f.under},
              {"stale_requests", f.stale_requests},
              {"unexplained_tokens", f.unexplained},
              {"over_attributed_tokens", f.over_attributed},
              {"attributed_requests", f.attributed_requests},
              {"unexplained_share", share}};
}

}  // namespace audit_impl

void AuditFigures::add(const AuditRequest& r, std::optional<uint64_t> reuse) {
  using audit_impl::sub0;
  ++requests;
  input += r.input_tokens;
  if (reuse) {
    ++reusable_requests;
    reusable += *reuse;
    cold += r.input_tokens - *reuse;
  }
  if (r.predicted) {
    ++predicted_requests;
    predicted += *r.predicted;
  }
  if (r.predicted && r.best) {
    ++routing_requests;
    routing += sub0(*r.best, *r.predicted);
  }
  if (r.delivered) {
    ++delivered_requests;
    delivered += *r.delivered;
    miss += sub0(r.input_tokens, *r.delivered);
  }
  if (r.delivered && r.predicted) {
    ++stale_requests;
    stale += sub0(*r.predicted, *r.delivered);
    under += sub0(*r.delivered, *r.predicted);
  }
  if (reuse && r.delivered && r.predicted && r.best) {
    ++attributed_requests;
    const uint64_t explained =
        (r.input_tokens - *reuse) + sub0(*r.best, *r.predicted) + sub0(*r.predicted, *r.delivered);
    const uint64_t m = sub0(r.input_tokens, *r.delivered);
    unexplained += sub0(m, explained);
    over_attributed += sub0(explained, m);
  }
}

AuditRun audit_requests(std::vector<AuditRequest> requests, uint32_t engine_bs) {
  AuditRun run;
  std::stable_sort(requests.begin(), requests.end(),
                   [](const AuditRequest& a, const AuditRequest& b) { return a.start_ms < b.start_ms; });
  tokens::InfiniteCache infinite;
  for (const AuditRequest& r : requests) {
    std::optional<uint64_t> reuse;
    if (!r.ids.empty() && r.ids_block_size > 0)
      reuse = std::min(
          r.input_tokens,
          infinite.add_sequence(tokens::sequence_from_ids(r.ids, r.ids_block_size, r.ids_are_sequence,
                                                          r.ids_tokens ? r.ids_tokens : r.input_tokens, engine_bs),
                                engine_bs));
    run.total.add(r, reuse);
    if (!r.worker.empty()) run.workers[r.worker].add(r, reuse);
    run.sessions[r.session_id.empty() ? "(none)" : r.session_id].add(r, reuse);
  }
  return run;
}

AuditRun audit_trace(const std::string& path, uint32_t engine_bs) {
  using namespace audit_impl;
  records::RowReader reader({path});
  audit_impl::Gathered g;
  Json row;
  std::string where, source;
  uint64_t decisions = 0, ends = 0;
  while (reader.next(row, &where)) {
    const std::string type = text(&row, "event_type");
    const bool end = type == records::event::kRequestEnd, decision = type == records::event::kRouteDecision;
    if (!end && !decision) continue;
    if (const Json* d = at(row, "dyn"); d && at(*d, "warmup")) continue;
    const std::string s = text(&row, "event_source");
    source = source.empty() || source == s ? s : "mixed";
    if (end) {
      ++ends;
      add_end(g, row);
    } else {
      ++decisions;
      add_decision(g, row);
    }
  }
  reader.summarize();
  if (!ends && !decisions)
    throw Fatal(kExitBadData, path + ": no request_end or route_decision rows (nothing to audit)");
  std::vector<AuditRequest> kept;
  for (size_t i = 0; i < g.requests.size(); ++i) {
    // With request_end rows, they say which requests ran; a decision alone (decide) is one itself.
    if (ends && !g.ended[i]) continue;
    if (g.failed.count(g.requests[i].request_id)) continue;
    kept.push_back(std::move(g.requests[i]));
  }
  AuditRun run = audit_requests(std::move(kept), engine_bs);
  run.file = path;
  run.event_source = source;
  run.decision_rows = decisions;
  run.request_end_rows = ends;
  run.malformed = reader.malformed();
  return run;
}

Json audit_json(const std::vector<AuditRun>& runs, uint32_t engine_bs) {
  using audit_impl::figures_json;
  Json out = Json::array();
  for (const AuditRun& r : runs) {
    Json workers = Json::object(), sessions = Json::object();
    for (const auto& [k, f] : r.workers) workers[k] = figures_json(f);
    for (const auto& [k, f] : r.sessions) sessions[k] = figures_json(f);
    out.push_back(Json{{"file", r.file},
                       {"event_source", r.event_source},
                       {"request_end_rows", r.request_end_rows},
                       {"route_decision_rows", r.decision_rows},
                       {"malformed_lines", r.malformed},
                       {"total", figures_json(r.total)},
                       {"workers", workers},
                       {"sessions", sessions}});
  }
  return Json{{"engine_block_size", engine_bs}, {"runs", out}};
}

namespace audit_impl {

// A token count, or "n/a" when no request had the evidence.
std::string cell(uint64_t v, uint64_t with) { return with ? std::to_string(v) : "n/a"; }

std::string table_row(const std::string& scope, const AuditFigures& f) {
  std::string share =
      f.attributed_requests && f.miss
          ? fmt::format("{:.1f}", 100.0 * static_cast<double>(f.unexplained) / static_cast<double>(f.miss))
          : "n/a";
  return fmt::format("{:<24} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>7}\n", scope,
                     f.requests, f.input, cell(f.reusable, f.reusable_requests),
                     cell(f.predicted, f.predicted_requests), cell(f.delivered, f.delivered_requests),
                     cell(f.miss, f.delivered_requests), cell(f.cold, f.reusable_requests),
                     cell(f.routing, f.routing_requests), cell(f.stale, f.stale_requests),
                     cell(f.unexplained, f.attributed_requests), share);
}

}  // namespace audit_impl

std::string audit_table(const std::vector<AuditRun>& runs, uint32_t engine_bs) {
  using audit_impl::table_row;
  std::string o;
  for (const AuditRun& r : runs) {
    o += fmt::format("{} ({}; {} request_end, {} route_decision rows; engine block size {})\n", r.file,
                     r.event_source.empty() ? "source not recorded" : r.event_source, r.request_end_rows,
                     r.decision_rows, engine_bs);
    o += fmt::format("{:<24} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>7}\n", "scope",
                     "requests", "input", "reusable", "predicted", "delivered", "miss", "cold", "routing", "stale",
                     "unexplained", "unexp%");
    o += table_row("run", r.total);
    for (const auto& [k, f] : r.workers) o += table_row("worker " + k, f);
    for (const auto& [k, f] : r.sessions) o += table_row("session " + k, f);
    if (r.total.over_attributed)
      o += fmt::format("causes overlapped on {} tokens (over-attributed)\n", r.total.over_attributed);
    if (r.total.stale_requests && r.total.under)
      o +=
          fmt::format("the engines held {} cached tokens the router did not predict (underpredicted)\n", r.total.under);
  }
  return o;
}

}  // namespace dyn::metrics
