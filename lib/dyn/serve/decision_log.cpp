// The decision log: route_decision rows of sampled live placements, and the quality counters.
#include "dyn/serve/decision_log.h"

#include <vector>

#include "dyn/http/prometheus.h"
#include "dyn/records/rows.h"
#include "dyn/serve/exchange.h"
#include "dyn/serve/request_trace.h"

namespace dyn::serve {

bool decision_sampled(std::string_view id, double rate) {
  if (rate >= 1) return true;
  if (rate <= 0) return false;
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  // The top 53 bits as a fraction in [0, 1): exact in a double.
  return static_cast<double>(h >> 11) * 0x1.0p-53 < rate;
}

bool DecisionLog::wants(const Exchange& ex) const {
  return rate_ && trace_.on() && decision_sampled(ex.x_request_id.empty() ? ex.request_id : ex.x_request_id, *rate_);
}

void DecisionLog::placed(Exchange& ex, const route::Placement& p) {
  ex.quality = p.quality();
  if (!wants(ex)) return;
  const route::DecisionQuality& q = p.quality();
  records::RouteDecision d;
  d.event_time_unix_ms = ex.received_unix_ms;
  if (ex.ctx) d.agent_context = records::ContextRef::of(*ex.ctx);
  d.request_id = ex.request_id;
  d.x_request_id = ex.x_request_id;
  d.input_tokens = ex.input_length;
  d.cached_tokens = p.cached_tokens();
  d.kv_hit_rate = ex.input_length ? static_cast<double>(p.cached_tokens()) / static_cast<double>(ex.input_length) : 0;
  d.worker = static_cast<int64_t>(p.worker());
  d.binding = route::binding_name(p.binding());
  d.rebind_reason = route::rebind_reason_name(p.rebind_reason());
  d.request_blocks = p.request_blocks();
  records::RouteDecision::Quality rq;
  rq.block_size = block_size_;
  rq.margin = q.margin;
  rq.ties = q.ties;
  rq.avoidable_prefill_tokens = q.avoidable_prefill_tokens;
  rq.non_max_cause = route::non_max_cause_name(q.cause);
  if (ex.queued) rq.router_queue_ms = ex.router_queue_ms.value_or(0);
  rq.pause_ms = ex.pause_ms;
  rq.attempt = ex.failed.size();
  d.quality = rq;
  std::vector<records::RouteDecision::Candidate> cands;
  cands.reserve(p.explain().size());
  for (const route::WorkerScore& w : p.explain())
    cands.push_back({w.worker, w.overlap_blocks, w.prefill_blocks, w.decode_blocks, w.cost, w.eligible, w.host_blocks,
                     w.disk_blocks, w.shared_blocks});
  d.explain = true;
  d.candidates = cands;
  std::string line;
  line.reserve(512 + cands.size() * 160);
  records::append_route_decision(line, d);
  trace_.write_line(line);
  std::lock_guard lk(mu_);
  ++rows_;
}

void DecisionLog::ended(const Exchange& ex, const ResponseFacts* f) {
  if (!ex.quality || !f || !f->cached_tokens) return;
  std::lock_guard lk(mu_);
  staleness_.add(ex.quality->predicted_cached_tokens, *f->cached_tokens);
}

route::StalenessTotals DecisionLog::staleness() const {
  std::lock_guard lk(mu_);
  return staleness_;
}

uint64_t DecisionLog::rows() const {
  std::lock_guard lk(mu_);
  return rows_;
}

void quality_families(std::string& o, const route::QualityTotals& q, const route::StalenessTotals& s) {
  using http::prom_family;
  using http::prom_sample;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    prom_family(o, name, "counter", help);
    prom_sample(o, name, "", static_cast<double>(v));
  };
  counter("dyn_router_kv_optimal_decisions_total",
          "placements on an eligible worker with the most predicted overlap (kv-optimal; share = this / "
          "dyn_router_decisions_total)",
          q.kv_optimal);
  prom_family(o, "dyn_router_non_max_overlap_selections_total", "counter",
              "placements that did not take the eligible worker with the most predicted overlap, by cause");
  for (size_t i = 0; i < std::size(route::kNonMaxCauses); ++i)
    prom_sample(o, "dyn_router_non_max_overlap_selections_total",
                std::string("cause=\"") + route::kNonMaxCauses[i].name + "\"", static_cast<double>(q.non_max[i]));
  counter("dyn_router_avoidable_prefill_tokens_total",
          "prefill tokens a higher-overlap eligible worker would have saved (ai-dynamo/dynamo PR 13987)",
          q.avoidable_prefill_tokens);
  counter("dyn_router_predicted_cached_tokens_total", "cached tokens the router predicted on the chosen workers",
          q.predicted_cached_tokens);
  counter("dyn_router_usage_requests_total", "routed requests whose engine reported cached tokens (usage)", s.requests);
  counter("dyn_router_usage_predicted_cached_tokens_total",
          "the router's predicted cached tokens of the requests in dyn_router_usage_requests_total",
          s.predicted_tokens);
  counter("dyn_router_usage_cached_tokens_total", "cached tokens the engines reported for those requests",
          s.delivered_tokens);
  counter("dyn_router_stale_overpredicted_requests_total",
          "requests whose predicted cached tokens exceeded the engine's (a stale index)", s.over_requests);
  counter("dyn_router_stale_overpredicted_tokens_total", "predicted minus delivered cached tokens, where positive",
          s.over_tokens);
  counter("dyn_router_underpredicted_requests_total",
          "requests whose engine reported more cached tokens than the router predicted", s.under_requests);
  counter("dyn_router_underpredicted_tokens_total", "delivered minus predicted cached tokens, where positive",
          s.under_tokens);
}

}  // namespace dyn::serve
