// GET /metrics: the Prometheus text of a frontend, one section per part, in a fixed order.
#include <functional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "dyn/http/prometheus.h"
#include "dyn/serve/admin.h"

namespace dyn::serve {

namespace {

using http::prom_family;
using http::prom_sample;

/// The labels of worker `i`'s samples.
std::string worker_labels(const Fleet& fleet, size_t i) {
  return fmt::format("worker=\"{}\",url=\"{}\"", i, fleet.at(i).url);
}

/// One counter family without labels.
void counter(std::string& o, const char* name, const char* help, uint64_t v) {
  prom_family(o, name, "counter", help);
  prom_sample(o, name, "", static_cast<double>(v));
}

void relay_counters(std::string& o, const RelayStats& s) {
  counter(o, "dyn_frontend_requests_total", "API requests received", s.requests.load());
  counter(o, "dyn_frontend_rejected_total", "requests answered by the frontend with an error before dispatch",
          s.rejected.load());
  counter(o, "dyn_frontend_retries_total",
          "dispatches retried on another worker before the first byte reached the client (connection error, "
          "502/503/504, 429 with Retry-After)",
          s.retries.load());
  counter(o, "dyn_frontend_retries_exhausted_total",
          "requests whose last retryable failure reached the client (no retry left, or no other eligible worker)",
          s.retries_exhausted.load());
  counter(o, "dyn_frontend_migrations_total",
          "streams continued on another worker after theirs died or stalled mid-generation (--migration-limit)",
          s.migrations.load());
  counter(o, "dyn_frontend_migrations_failed_total",
          "streams cut although --migration-limit allowed a migration (no other worker, limit reached, a "
          "continuation that failed, or a stream that cannot be continued)",
          s.migrations_failed.load());
}

/// Calls fn(i) for every worker not removed.
template <class Fn>
void each_worker(const Fleet& fleet, Fn fn) {
  for (size_t i = 0, n = fleet.size(); i < n; ++i)
    if (fleet.at(i).present()) fn(i);
}

void worker_families(std::string& o, const Fleet& fleet) {
  struct F {
    const char* name;
    const char* help;
    std::atomic<uint64_t> WorkerCounters::*m;
  };
  const F fams[] = {
      {"dyn_worker_requests_total", "requests dispatched to the worker", &WorkerCounters::requests},
      {"dyn_worker_errors_total", "dispatched requests that ended in an error", &WorkerCounters::errors},
      {"dyn_worker_cancelled_total", "dispatched requests whose client went away", &WorkerCounters::cancelled},
      {"dyn_worker_input_tokens_total", "input tokens reported by the worker", &WorkerCounters::input_tokens},
      {"dyn_worker_output_tokens_total", "output tokens reported by the worker", &WorkerCounters::output_tokens},
      {"dyn_worker_cached_tokens_total", "cached prompt tokens reported by the worker", &WorkerCounters::cached_tokens},
      {"dyn_worker_retried_total", "dispatches to the worker retried on another one before the first byte",
       &WorkerCounters::retried},
      {"dyn_worker_migrated_total", "streams moved off the worker mid-generation", &WorkerCounters::migrated},
  };
  for (const auto& fam : fams) {
    prom_family(o, fam.name, "counter", fam.help);
    each_worker(fleet, [&](size_t i) {
      prom_sample(o, fam.name, worker_labels(fleet, i), static_cast<double>((fleet.at(i).counters.*fam.m).load()));
    });
  }
  prom_family(o, "dyn_worker_in_flight", "gauge",
              "requests dispatched to the worker and not ended (awaiting its headers or being relayed)");
  each_worker(fleet, [&](size_t i) {
    prom_sample(o, "dyn_worker_in_flight", worker_labels(fleet, i),
                static_cast<double>(fleet.at(i).counters.in_flight.load()));
  });
  prom_family(o, "dyn_worker_healthy", "gauge",
              "1 while the worker is up (SPEC 2.6: its last GET /health answered 200, or it completed "
              "proxied requests since; a failed dispatch marks it down)");
  each_worker(fleet, [&](size_t i) {
    prom_sample(o, "dyn_worker_healthy", worker_labels(fleet, i), fleet.at(i).healthy.load() ? 1 : 0);
  });
  prom_family(o, "dyn_worker_draining", "gauge", "1 while the worker drains (no new sessions)");
  each_worker(fleet, [&](size_t i) {
    prom_sample(o, "dyn_worker_draining", worker_labels(fleet, i),
                fleet.at(i).state.load() == WorkerState::kDraining ? 1 : 0);
  });
  prom_family(o, "dyn_worker_circuit_state", "gauge",
              "the worker's circuit breaker: 0 closed, 1 open (not routed to), 2 half-open (on probation)");
  each_worker(fleet, [&](size_t i) {
    prom_sample(o, "dyn_worker_circuit_state", worker_labels(fleet, i),
                static_cast<double>(static_cast<int>(fleet.at(i).breaker.state())));
  });
  prom_family(o, "dyn_worker_circuit_opens_total", "counter", "times the worker's circuit opened");
  each_worker(fleet, [&](size_t i) {
    prom_sample(o, "dyn_worker_circuit_opens_total", worker_labels(fleet, i),
                static_cast<double>(fleet.at(i).breaker.opens()));
  });
}

void store_families(std::string& o, const SharedBindings& shared) {
  BindingStore::Stats bs = shared.store().stats();
  SharedBindings::Stats ss = shared.stats();
  prom_family(o, "dyn_router_binding_store_up", "gauge",
              "1 while the shared binding store answers (--router-binding-store)");
  prom_sample(o, "dyn_router_binding_store_up", "", shared.store().up() ? 1 : 0);
  const std::tuple<const char*, const char*, uint64_t> fams[] = {
      {"dyn_router_binding_store_outages_total", "times the binding store became unreachable", bs.outages},
      {"dyn_router_binding_store_errors_total", "failed binding store calls", bs.errors},
      {"dyn_router_binding_store_reads_total", "placements that read the binding store (one round trip)",
       ss.round_trips},
      {"dyn_router_binding_store_cached_total", "placements that trusted a copy of the store's binding (no round trip)",
       ss.cached},
      {"dyn_router_binding_store_claims_total", "atomic claims and compare-and-sets sent to the binding store",
       ss.claims},
      {"dyn_router_binding_store_conflicts_total", "claims lost to another replica (the request followed its binding)",
       ss.conflicts},
      {"dyn_router_binding_store_bad_values_total",
       "store bindings naming a worker URL this replica does not have (ignored)", ss.bad_values},
      {"dyn_router_binding_store_removed_values_total",
       "store bindings naming a worker this replica removed (not followed: the session moved)", ss.removed_values},
      {"dyn_router_binding_store_local_only_total", "placements made on the local table alone (store unreachable)",
       ss.local_only},
      {"dyn_router_binding_store_updates_dropped_total",
       "queued TTL refreshes and deletes dropped while the store was unreachable", bs.async_dropped},
      {"dyn_router_binding_store_notifications_total", "binding changes announced by other replicas", bs.notifications},
  };
  for (const auto& [name, help, v] : fams) counter(o, name, help, v);
}

void router_families(std::string& o, const Placer& placer) {
  const route::Router& router = placer.router();
  route::RouterStats s = router.stats();
  prom_family(o, "dyn_router_decisions_total", "counter", "routing decisions per chosen worker");
  for (const auto& [w, n] : s.decisions_per_worker)
    prom_sample(o, "dyn_router_decisions_total", fmt::format("worker=\"{}\"", w), static_cast<double>(n));
  prom_family(o, "dyn_router_bindings_total", "counter", "binding outcomes of routed requests (SPEC 5.1 dyn.binding)");
  const std::pair<const char*, uint64_t> outcomes[] = {{"new", s.binding_new},
                                                       {"hit", s.binding_hit},
                                                       {"rebound", s.binding_rebound},
                                                       {"expired", s.binding_expired},
                                                       {"none", s.binding_none}};
  for (const auto& [k, v] : outcomes)
    prom_sample(o, "dyn_router_bindings_total", fmt::format("outcome=\"{}\"", k), static_cast<double>(v));
  prom_family(o, "dyn_router_bindings_live", "gauge", "live session bindings");
  prom_sample(o, "dyn_router_bindings_live", "", static_cast<double>(s.bindings_live));
  counter(o, "dyn_router_binding_table_full_total", "new bindings refused at the table limit", s.table_full);
  counter(o, "dyn_router_binding_waits_total", "requests that waited for an initializing binding", s.waits);
  if (const SharedBindings* shared = placer.shared()) store_families(o, *shared);
  prom_family(o, "dyn_router_index_blocks", "gauge", "KV blocks the router's index holds for the worker");
  for (const auto& l : router.loads())
    prom_sample(o, "dyn_router_index_blocks", fmt::format("worker=\"{}\"", l.worker),
                static_cast<double>(l.cached_blocks));
}

/// The router queue (SPEC 3.4): depth, waits and rejections per class, and the busy thresholds.
void queue_families(std::string& o, const Placer& placer) {
  const RequestQueue& q = placer.queue();
  const QueueStats st = q.stats();
  auto cls = [](const std::string& name) { return fmt::format("policy_class=\"{}\"", name); };
  prom_family(o, "dyn_router_queue_pending_requests", "gauge", "requests waiting in the router queue, by policy class");
  for (const auto& c : st.classes)
    prom_sample(o, "dyn_router_queue_pending_requests", cls(c.name), static_cast<double>(c.waiting));
  prom_family(o, "dyn_router_queue_deferred_requests", "gauge",
              "requests held by program admission (SPEC 9) before they join the queue");
  prom_sample(o, "dyn_router_queue_deferred_requests", "", static_cast<double>(st.deferred));
  prom_family(o, "dyn_router_queue_requests_total", "counter", "requests that waited in the router queue, by class");
  for (const auto& c : st.classes)
    prom_sample(o, "dyn_router_queue_requests_total", cls(c.name), static_cast<double>(c.queued_total));
  prom_family(o, "dyn_router_queue_wait_seconds", "histogram",
              "time requests waited in the router queue before dispatch, by class");
  for (size_t i = 0; i < st.classes.size(); ++i)
    q.waits()[i]->render(o, "dyn_router_queue_wait_seconds", cls(st.classes[i].name) + ",");
  prom_family(o, "dyn_router_queue_rejected_total", "counter",
              "requests the router queue answered itself: queue_full (429), timeout (503), no_compatible_worker, "
              "shutdown; by the reason they were held");
  for (const auto& [k, n] : st.rejected)
    prom_sample(o, "dyn_router_queue_rejected_total", fmt::format("outcome=\"{}\",reason=\"{}\"", k.first, k.second),
                static_cast<double>(n));
  prom_family(o, "dyn_router_dispatch_slots_in_use", "gauge",
              "requests holding a --max-concurrent-requests slot (dispatched or about to be)");
  prom_sample(o, "dyn_router_dispatch_slots_in_use", "", static_cast<double>(st.dispatched));
  const route::BusyThresholds t = placer.router().busy_thresholds();
  prom_family(o, "dyn_router_busy_threshold", "gauge",
              "busy thresholds in force (POST /v1/busy_threshold changes them); absent = unset");
  const std::pair<const char*, std::optional<double>> ts[] = {
      {"active_decode_blocks", t.active_decode_blocks},
      {"active_prefill_tokens",
       t.active_prefill_tokens ? std::optional<double>(static_cast<double>(*t.active_prefill_tokens)) : std::nullopt},
      {"active_prefill_tokens_frac", t.active_prefill_tokens_frac},
      {"active_requests",
       t.active_requests ? std::optional<double>(static_cast<double>(*t.active_requests)) : std::nullopt}};
  for (const auto& [k, v] : ts)
    if (v) prom_sample(o, "dyn_router_busy_threshold", fmt::format("threshold=\"{}\"", k), *v);
}

void kv_families(std::string& o, const KvFeeds& kv, const Fleet& fleet) {
  using Sub = kvevents::Subscriber::Stats;
  struct S {
    const char* name;
    const char* type;
    const char* help;
    std::function<double(size_t)> v;
  };
  auto sub = [&kv](std::atomic<uint64_t> Sub::*m) {
    return [&kv, m](size_t i) { return static_cast<double>((kv.subscriber(i).*m).load()); };
  };
  const S kvf[] = {
      {"dyn_kv_events_batches_total", "counter", "KV event batches applied (replayed ones included)",
       sub(&Sub::batches)},
      {"dyn_kv_events_replayed_batches_total", "counter", "KV event batches fetched from the replay socket",
       sub(&Sub::replayed_batches)},
      {"dyn_kv_events_gaps_total", "counter", "sequence gaps detected in the worker's KV event stream",
       sub(&Sub::gaps)},
      {"dyn_kv_events_gaps_unrecovered_total", "counter",
       "gaps the replay socket could not fill (the worker's index was cleared)", sub(&Sub::gaps_unrecovered)},
      {"dyn_kv_events_publisher_restarts_total", "counter",
       "publisher restarts or reconnections seen (the worker's index was cleared)", sub(&Sub::restarts)},
      {"dyn_kv_events_index_resets_total", "counter", "times the worker's index was cleared for lost events",
       [&kv](size_t i) { return static_cast<double>(kv.resets(i)); }},
      {"dyn_kv_events_bad_batches_total", "counter", "undecodable KV event messages", sub(&Sub::bad_batches)},
      {"dyn_kv_events_last_seq", "gauge", "sequence number of the last KV event batch applied (-1 = none)",
       [&kv](size_t i) { return static_cast<double>(kv.subscriber(i).last_seq.load()); }},
      {"dyn_kv_events_engine_blocks", "gauge", "engine blocks the event translator knows for the worker",
       [&kv](size_t i) { return static_cast<double>(kv.counts(i).engine_blocks.load()); }},
  };
  // The workers with a feed, removed ones left out.
  auto each_feed = [&](auto fn) {
    each_worker(fleet, [&](size_t i) {
      if (kv.has(i)) fn(i);
    });
  };
  for (const auto& f : kvf) {
    prom_family(o, f.name, f.type, f.help);
    each_feed([&](size_t i) { prom_sample(o, f.name, worker_labels(fleet, i), f.v(i)); });
  }
  using Counts = kvevents::FeedCounts;
  prom_family(o, "dyn_kv_events_total", "counter", "KV events received, by type");
  const std::pair<const char*, std::atomic<uint64_t> Counts::*> types[] = {
      {"BlockStored", &Counts::stored}, {"BlockRemoved", &Counts::removed}, {"AllBlocksCleared", &Counts::cleared}};
  each_feed([&](size_t i) {
    for (const auto& [type, m] : types)
      prom_sample(o, "dyn_kv_events_total", worker_labels(fleet, i) + ",type=\"" + type + "\"",
                  static_cast<double>((kv.counts(i).*m).load()));
  });
  prom_family(o, "dyn_kv_events_skipped_total", "counter",
              "KV events not applied to the worker's index, by reason (never their batch)");
  each_feed([&](size_t i) {
    for (size_t r = 0; r < kvevents::kSkipReasons; ++r)
      prom_sample(o, "dyn_kv_events_skipped_total",
                  worker_labels(fleet, i) + ",reason=\"" + kvevents::skip_name(static_cast<kvevents::Skip>(r)) + "\"",
                  static_cast<double>(kv.counts(i).skipped[r].load()));
  });
}

void latency_families(std::string& o, const RelayStats& s) {
  prom_family(o, "dyn_request_ttft_seconds", "histogram", "time to first token of successful requests");
  s.ttft.render(o, "dyn_request_ttft_seconds", "");
  prom_family(o, "dyn_request_duration_seconds", "histogram", "total time of successful requests");
  s.total.render(o, "dyn_request_duration_seconds", "");
  prom_family(o, "dyn_request_itl_seconds", "histogram", "average inter-token latency per streamed request");
  s.itl.render(o, "dyn_request_itl_seconds", "");
}

}  // namespace

std::string AdminPages::metrics_text() const {
  std::string o;
  const RelayStats& rs = s_.relay.stats();
  relay_counters(o, rs);
  worker_families(o, s_.fleet);
  if (s_.placer) {
    router_families(o, *s_.placer);
    quality_families(o, s_.placer->router().stats().quality, s_.relay.decisions().staleness());
    queue_families(o, *s_.placer);
  }
  if (s_.kv) kv_families(o, *s_.kv, s_.fleet);
  if (s_.tools) s_.tools->append_metrics(o);
  if (const KvPolicyRunner* k = s_.relay.kv_policies()) k->append_metrics(o);
  if (!s_.opt.tokenizer_url.empty())
    counter(o, "dyn_tokenizer_errors_total", "requests hashed from 4-byte tokens because the tokenizer failed",
            rs.tokenizer_errors.load());
  if (s_.placer) {
    prom_family(o, "dyn_worker_block_size", "gauge", "KV block size the worker reported (0 = not known)");
    each_worker(s_.fleet, [&](size_t i) {
      prom_sample(o, "dyn_worker_block_size", worker_labels(s_.fleet, i), s_.fleet.at(i).block_size.load());
    });
  }
  prom_family(o, "dyn_frontend_in_flight_requests", "gauge", "API requests being served (streams until they end)");
  prom_sample(o, "dyn_frontend_in_flight_requests", "", static_cast<double>(rs.in_flight.load()));
  if (auto dropped = s_.trace.dropped_rows())
    counter(o, "dyn_trace_rows_dropped_total", "request_end rows lost to failed trace writes (disk full)", *dropped);
  latency_families(o, rs);
  return o;
}

}  // namespace dyn::serve
