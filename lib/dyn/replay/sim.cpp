// Discrete-event simulation of N SPEC 8 engines behind the router on a virtual clock.
#include "dyn/replay/sim.h"

#include <chrono>
#include <cmath>
#include <map>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/base/random.h"
#include "dyn/engine/engine.h"
#include "dyn/replay/session.h"
#include "dyn/route/admission.h"
#include "dyn/route/router.h"
#include "dyn/tokens/hash.h"
#include "dyn/trace/rows.h"

namespace dyn::replay {
namespace {

// Same-instant order: arrivals, then requests admitted to a freed concurrency slot (both join
// the step that starts at that instant), step ends, kicks, admission ticks (SPEC 9).
enum EventKind : int { kArrival = 0, kAdmit = 1, kStepEnd = 2, kKick = 3, kTick = 4 };

struct Event {
  double t;
  int kind;
  uint64_t seq;
  uint32_t arg;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

struct Req {
  const trace::WorkloadRow* row = nullptr;
  std::string id;
  uint32_t turn = 0;
  int64_t session_prev = -1;  // previous turn of the same session
  int64_t parent_dep = -1;    // parent's turn a child's first turn waits for (outside the fixed schedule)
  bool kept = true;           // replayed (not cut by offsets or the request count)
  std::vector<uint32_t> dependents;
  uint32_t pending = 0;
  double deps_done = 0;  // latest completion among wait_for deps
  bool waited = false;   // waits for some wait_for request (one that is replayed)
  double start = -1, first = -1, end = -1;
  uint64_t cached = 0, generated = 0;
  uint64_t worker = 0;
  route::Placement placement;
  route::BindingOutcome binding = route::BindingOutcome::kNone;
  bool error = false;
  std::string error_message;
  double pause_ms = 0;  // time waited in admission control (SPEC 9)
};

struct Worker {
  std::unique_ptr<engine::Engine> engine;
  engine::StepResult pending;
  bool busy = false;
  bool kicked = false;
};

}  // namespace

SimSummary run_sim(const trace::Workload& wl, const SimOptions& opt, io::Output& out) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (opt.workers == 0) throw Fatal(kExitUsage, "--workers must be at least 1");
  if (opt.engine.block_size != opt.router.block_size)
    throw Fatal(kExitUsage, fmt::format("engine block size {} differs from the router's --kv-cache-block-size {}",
                                        opt.engine.block_size, opt.router.block_size));
  if (auto e = opt.engine.validate(); !e.empty()) throw Fatal(kExitUsage, e);
  FakeClock clock(0, opt.epoch_unix_ms);
  route::Router router(opt.router, clock);
  std::vector<Worker> workers(opt.workers);
  engine::EngineConfig ecfg = opt.engine;
  ecfg.kv_events = opt.router.kv_events;
  for (uint32_t w = 0; w < opt.workers; ++w) {
    workers[w].engine = std::make_unique<engine::Engine>(ecfg);
    if (auto err = router.add_worker({w, ecfg.block_size, ecfg.num_blocks})) throw Fatal(err->exit_code, err->message);
  }

  // Program-aware admission (SPEC 9) on the virtual clock: capacity = block size x KV blocks.
  std::unique_ptr<route::AdmissionController> admission;
  std::map<uint64_t, uint32_t> parked;  // admission ticket -> request waiting for its program's resume
  if (opt.admission.enabled()) {
    std::vector<route::AdmissionWorker> aw;
    for (uint32_t w = 0; w < opt.workers; ++w) aw.push_back({static_cast<int>(w), ecfg.num_blocks * ecfg.block_size});
    admission = std::make_unique<route::AdmissionController>(opt.admission, std::move(aw));
  }
  const double tick_ms = opt.admission.scheduler_interval_s * 1000.0;

  // Load controls (SimOptions::schedule, SPEC 6.3): the defaults reproduce the recorded timing.
  const replay::ScheduleOptions& so = opt.schedule;
  const bool fixed = so.mode == replay::LoadMode::kFixedSchedule;
  const double speed = so.speedup > 0 ? so.speedup : 1;
  if (so.mode == replay::LoadMode::kRequestRate && !(so.request_rate > 0))
    throw Fatal(kExitUsage, "--request-rate must be positive");
  const uint64_t cap = opt.concurrency                             ? opt.concurrency
                       : so.mode == replay::LoadMode::kConcurrency ? 1
                                                                   : 0;  // 0 = no cap
  const double stop_at = opt.duration_s > 0 ? opt.duration_s * 1000.0 : INFINITY;

  // Requests, ids, sessions and dependencies. Ids and turns are those of the whole workload, so
  // a row keeps its request id whatever the offsets or the request count cut.
  const size_t n = wl.rows.size();
  std::vector<Req> reqs(n);
  std::unordered_map<std::string, uint32_t> by_id;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> last_of_session;  // session -> (row, turns)
  std::vector<int64_t> prev_row(n, -1);
  SimSummary sum;
  for (size_t i = 0; i < n; ++i) {
    Req& r = reqs[i];
    r.row = &wl.rows[i];
    if (!r.row->session_id.empty()) {
      auto [it, fresh] = last_of_session.try_emplace(r.row->session_id, static_cast<uint32_t>(i), 0u);
      if (!fresh) {
        prev_row[i] = it->second.first;
        r.turn = ++it->second.second;
        it->second.first = static_cast<uint32_t>(i);
      }
    }
    r.id = !r.row->request_id.empty()   ? r.row->request_id
           : !r.row->session_id.empty() ? fmt::format("{}:{}", r.row->session_id, r.turn)
                                        : fmt::format("row-{}", r.row->index);
    by_id.emplace(r.id, static_cast<uint32_t>(i));
  }
  // Which rows run: the fixed schedule's inclusive offsets (a later turn without a timestamp
  // goes with its session's first turn), then the first request_count of those.
  if (fixed && (so.start_offset_ms || so.end_offset_ms)) {
    for (size_t i = 0; i < n; ++i) {
      const auto& ts = reqs[i].row->timestamp_ms;
      if (!ts && prev_row[i] >= 0) {
        reqs[i].kept = reqs[static_cast<size_t>(prev_row[i])].kept;
        continue;
      }
      if (ts && ((so.start_offset_ms && *ts < *so.start_offset_ms) || (so.end_offset_ms && *ts > *so.end_offset_ms))) {
        reqs[i].kept = false;
        ++sum.outside_offsets;
      }
    }
  }
  if (so.request_count) {
    uint64_t taken = 0;
    for (Req& r : reqs) {
      if (!r.kept) continue;
      if (taken < so.request_count) ++taken;
      else {
        r.kept = false;
        ++sum.over_count;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    Req& r = reqs[i];
    if (!r.kept) continue;
    if (const int64_t p = prev_row[i]; p >= 0 && reqs[static_cast<size_t>(p)].kept) {
      r.session_prev = p;
      reqs[static_cast<size_t>(p)].dependents.push_back(static_cast<uint32_t>(i));
      ++r.pending;
    }
  }
  // Theoretical hit rate at the engines' block size (SPEC 7, as dyn-bench counts it): input
  // tokens of the kept rows with hash ids that lie in full engine blocks an earlier row had.
  // Counted as rows are dispatched, on the hashes routing computes anyway (kept rows never
  // dispatched are added after the run): the total does not depend on the order rows are added
  // in, since each distinct block misses exactly once and every other occurrence hits.
  tokens::InfiniteCache infinite;
  uint64_t id_tokens = 0, id_hits = 0;
  std::vector<bool> counted(n, false);
  auto count_theoretical = [&](uint32_t i, std::span<const uint64_t> seq) {
    const auto& row = *reqs[i].row;
    if (row.hash_ids.empty() || counted[i]) return;
    counted[i] = true;
    id_tokens += row.input_length;
    id_hits += infinite.add_sequence(seq, ecfg.block_size);
  };
  if (!fixed) {
    // Outside the fixed schedule a child session's first turn has no time of its own: it starts
    // after its parent's latest preceding turn (the live plan's rule, replay::build_plan).
    const SessionPlan sp = plan_sessions(wl.rows);
    for (size_t i = 0; i < n; ++i) {
      Req& r = reqs[i];
      const int64_t p = sp.parent_row[i];
      if (!r.kept || prev_row[i] >= 0 || p < 0 || !reqs[static_cast<size_t>(p)].kept) continue;
      r.parent_dep = p;
      reqs[static_cast<size_t>(p)].dependents.push_back(static_cast<uint32_t>(i));
      ++r.pending;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!reqs[i].kept) continue;
    for (const std::string& dep : reqs[i].row->wait_for) {
      auto it = by_id.find(dep);
      if (it == by_id.end())
        throw Fatal(kExitBadData, fmt::format("{}: wait_for names unknown request id '{}'", reqs[i].row->where, dep));
      if (!reqs[it->second].kept) continue;  // cut by offsets or the count: this row keeps its own timing
      reqs[it->second].dependents.push_back(static_cast<uint32_t>(i));
      ++reqs[i].pending;
      reqs[i].waited = true;
    }
  }

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q;
  uint64_t seq = 0;
  std::priority_queue<double, std::vector<double>, std::greater<double>> arrivals;  // pending arrival times
  auto push = [&](double t, int kind, uint32_t arg) {
    q.push(Event{t, kind, seq++, arg});
    // A tick can release paused requests into an engine, so it bounds fast-forwarding like an arrival.
    if (kind == kArrival || kind == kAdmit || kind == kTick) arrivals.push(t);
  };
  // With a concurrency cap any completion can send a waiting request at once, as a dependency can.
  bool has_deps = cap > 0;
  for (const Req& r : reqs)
    if (r.pending) has_deps = true;
  // Time zero of the fixed schedule.
  double zero = 0;
  if (fixed && so.start_offset_ms) zero = *so.start_offset_ms;
  else if (fixed && so.auto_offset)
    for (const Req& r : reqs)
      if (r.kept && r.row->timestamp_ms) {
        zero = *r.row->timestamp_ms;
        break;
      }
  Rng rng(so.seed);
  double arrival = 0;
  bool first_arrival = true;
  for (size_t i = 0; i < n; ++i) {
    if (!reqs[i].kept || reqs[i].pending) continue;
    double at = 0;
    switch (so.mode) {
      case replay::LoadMode::kFixedSchedule: {
        const auto& ts = reqs[i].row->timestamp_ms;
        if (!ts)
          throw Fatal(kExitBadData,
                      fmt::format("{}: missing timestamp (needed to schedule this request)", reqs[i].row->where));
        at = (*ts - zero) / speed;
        if (zero != 0) at = std::max(0.0, at);
        break;
      }
      case replay::LoadMode::kRequestRate:
        // The live plan's arrival process (replay::build_plan): the same draws from the same seed.
        if (!first_arrival) {
          const double mean = 1000.0 / so.request_rate;
          if (so.rate_mode == replay::RateMode::kConstant) arrival += mean;
          else if (so.rate_mode == replay::RateMode::kPoisson) arrival += rng.exponential(mean);
          else arrival += rng.gamma(so.gamma_shape, mean / so.gamma_shape);
        }
        first_arrival = false;
        at = arrival;
        break;
      case replay::LoadMode::kConcurrency: at = 0; break;
    }
    push(at, kArrival, static_cast<uint32_t>(i));
  }

  const uint32_t bs = ecfg.block_size;
  double first_start = -1, last_end = 0;
  // Concurrency (SimOptions::concurrency): requests sent and not yet complete, and those whose
  // start has come while every slot was taken, earliest-ready first (then workload order).
  uint64_t in_flight = 0;
  std::priority_queue<std::pair<double, uint32_t>, std::vector<std::pair<double, uint32_t>>, std::greater<>> waiting;
  bool stopped = false;  // duration_s ran out: nothing more is sent

  // One reused buffer; trace::append_request_end writes without building Json objects.
  std::string line;
  line.reserve(1024);
  auto write_row = [&](Req& r) {
    const auto& row = *r.row;
    trace::RequestEnd e;
    e.event_time_unix_ms = opt.epoch_unix_ms + static_cast<uint64_t>(std::llround(std::max(r.end, r.start)));
    e.event_source = "simulator";
    e.agent_context.session_id = row.session_id;
    e.agent_context.parent_session_id = row.parent_session_id;
    e.request_id = r.id;
    e.model = opt.model;
    e.input_tokens = row.input_length;
    e.request_received_ms = opt.epoch_unix_ms + static_cast<uint64_t>(std::llround(r.start));
    if (!r.error) {
      e.output_tokens = r.generated;
      e.cached_tokens = r.cached;
      const double ttft = r.first - r.start, total = r.end - r.start;
      e.ttft_ms = ttft;
      e.total_time_ms = total;
      if (r.generated >= 2) e.avg_itl_ms = (total - ttft) / static_cast<double>(r.generated - 1);
      e.kv_hit_rate = row.input_length ? static_cast<double>(r.cached) / static_cast<double>(row.input_length) : 0.0;
      e.worker = static_cast<int64_t>(r.worker);
      e.status = "ok";
    } else {
      e.status = "error";
      e.error = trace::RequestEnd::Failure{400, "invalid_request", r.error_message};
    }
    if (!row.hash_ids.empty()) {
      e.hash_ids = row.hash_ids;
      e.block_size = wl.block_size;
    }
    if (!row.session_id.empty()) e.turn = r.turn;
    e.binding = route::binding_name(r.binding);
    if (admission) e.pause_ms = r.pause_ms;
    line.clear();
    trace::append_request_end(line, e);
    out.line(line);
  };

  auto complete = [&](uint32_t i, double t) {
    Req& r = reqs[i];
    r.end = t;
    last_end = std::max(last_end, t);
    ++sum.requests;
    if (r.error) ++sum.errors;
    else {
      sum.input_tokens += r.row->input_length;
      sum.cached_tokens += r.cached;
      sum.output_tokens += r.generated;
    }
    write_row(r);
    if (admission && !r.row->session_id.empty()) {
      if (r.error) admission->on_request_failed(r.row->session_id, t);
      else admission->on_response(r.row->session_id, r.row->input_length, r.generated, t);
    }
    // Its concurrency slot goes to the request that has waited longest for one.
    --in_flight;
    if (!waiting.empty()) {
      const uint32_t w = waiting.top().second;
      waiting.pop();
      ++in_flight;
      push(t, kAdmit, w);
    }
    for (uint32_t d : r.dependents) {
      Req& x = reqs[d];
      const auto self = static_cast<int64_t>(i);
      if (self != x.session_prev && self != x.parent_dep) x.deps_done = std::max(x.deps_done, t);
      if (--x.pending > 0) continue;
      double start = 0;
      if (x.session_prev >= 0) {
        const Req& p = reqs[x.session_prev];
        double gap = 0;
        if (x.row->delay_ms) gap = *x.row->delay_ms;
        else if (x.row->timestamp_ms && p.row->timestamp_ms)
          gap = std::max(0.0, *x.row->timestamp_ms - *p.row->timestamp_ms);
        start = p.end + gap / speed;
      } else if (x.parent_dep >= 0) {
        start = reqs[x.parent_dep].end + x.row->delay_ms.value_or(0.0) / speed;
      } else if (fixed && x.row->timestamp_ms) {
        start = (*x.row->timestamp_ms - zero) / speed;
      }
      if (x.waited) start = std::max(start, x.deps_done + x.row->tool_wait_ms.value_or(0.0) / speed);
      push(std::max(start, t), kArrival, d);
    }
  };

  auto kick = [&](uint32_t w, double t) {
    Worker& wk = workers[w];
    if (wk.busy || wk.kicked || !wk.engine->has_work()) return;
    wk.kicked = true;
    push(t, kKick, w);
  };

  // Routes request i at time t (to `target` when admission placed its program) and hands it to
  // the engine.
  std::vector<uint64_t> hashes;
  auto dispatch = [&](uint32_t i, double t, std::optional<uint64_t> target) {
    Req& r = reqs[i];
    const auto& row = *r.row;
    if (row.text_input && row.hash_ids.empty()) {
      auto toks = tokens::text_to_tokens(*row.text_input);
      hashes = tokens::sequence_hashes(tokens::block_hashes(toks, bs));
    } else {
      hashes = tokens::sequence_from_ids(row.hash_ids, wl.block_size, false, row.input_length, bs);
      count_theoretical(i, hashes);
    }
    route::RouteRequest rr;
    rr.session_id = row.session_id;
    rr.parent_session_id = row.parent_session_id;
    rr.sequence_hashes = hashes;
    rr.tokens = row.input_length;
    rr.wait_for_initializing = false;
    rr.worker = target;
    auto placed = router.place(rr);
    if (!placed) {
      r.error = true;
      r.error_message = placed.error().message;
      complete(i, t);
      return;
    }
    r.worker = placed->worker();
    r.binding = placed->binding();
    engine::RequestSpec spec;
    spec.id = i;
    spec.prompt_tokens = row.input_length;
    spec.block_hashes = std::move(hashes);  // the router keeps its own copy; the span is no longer read
    spec.max_output_tokens = std::max<uint64_t>(1, row.output_length.value_or(1));
    auto added = workers[r.worker].engine->add(std::move(spec));
    if (!added) {
      placed->fail();
      r.error = true;
      r.error_message = added.error().message;
      complete(i, t);
      return;
    }
    placed->commit();
    r.placement = std::move(*placed);
    kick(static_cast<uint32_t>(r.worker), t);
  };

  if (admission) push(tick_ms, kTick, 0);
  while (!q.empty()) {
    const Event ev = q.top();
    q.pop();
    clock.set(ev.t);
    if (ev.kind == kArrival || ev.kind == kAdmit) {
      arrivals.pop();
      if (stopped || ev.t >= stop_at) {  // --benchmark-duration: sent nothing from here on
        stopped = true;
        if (ev.kind == kAdmit) --in_flight;
        continue;
      }
      if (ev.kind == kArrival) {  // a kAdmit request holds the slot its predecessor freed
        if (cap && in_flight >= cap) {
          waiting.emplace(ev.t, ev.arg);
          continue;
        }
        ++in_flight;
      }
      Req& r = reqs[ev.arg];
      r.start = ev.t;
      if (first_start < 0) first_start = ev.t;
      std::optional<uint64_t> target;
      if (admission && !r.row->session_id.empty()) {
        auto d = admission->admit(r.row->session_id, r.row->parent_session_id, r.row->input_length, ev.t);
        if (!d.admitted) {  // paused program: released by a later tick
          parked.emplace(d.ticket, ev.arg);
          continue;
        }
        if (d.worker >= 0) target = static_cast<uint64_t>(d.worker);
      }
      dispatch(ev.arg, ev.t, target);
    } else if (ev.kind == kTick) {
      arrivals.pop();
      auto report = admission->tick(ev.t);
      for (const auto& rel : report.released) {
        auto it = parked.find(rel.ticket);
        if (it == parked.end()) continue;
        uint32_t i = it->second;
        parked.erase(it);
        reqs[i].pause_ms = rel.waited_ms;
        dispatch(i, ev.t, rel.worker >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(rel.worker)) : std::nullopt);
      }
      if (!q.empty() || !parked.empty()) push(ev.t + tick_ms, kTick, 0);
    } else if (ev.kind == kKick) {
      Worker& wk = workers[ev.arg];
      wk.kicked = false;
      if (wk.busy || !wk.engine->has_work()) continue;
      // Fast-forward runs of identical decode steps (same batch, same KV use, no token anyone
      // waits for) up to the next event that could change this engine's batch: an arrival
      // (any arrival when requests depend on others, since a completion elsewhere can release
      // one at once).
      if (uint64_t k = wk.engine->steady_decode_steps(); k >= 2) {
        const double d = wk.engine->decode_step_ms();
        double bound = has_deps ? (q.empty() ? INFINITY : q.top().t) : (arrivals.empty() ? INFINITY : arrivals.top());
        uint64_t m = k;
        if (std::isfinite(bound)) m = std::min<uint64_t>(k, static_cast<uint64_t>(std::floor((bound - ev.t) / d)));
        if (m >= 2) {
          const double span = wk.engine->fast_forward(m);
          wk.pending.clear();
          wk.busy = true;
          push(ev.t + span, kStepEnd, ev.arg);
          continue;
        }
      }
      wk.engine->step(wk.pending);
      wk.busy = true;
      push(ev.t + wk.pending.duration_ms, kStepEnd, ev.arg);
    } else {  // kStepEnd
      Worker& wk = workers[ev.arg];
      wk.busy = false;
      if (opt.router.kv_events) {
        for (auto& e : wk.engine->take_kv_events()) {
          route::KvEvent re;
          re.kind = e.kind == engine::KvEvent::Kind::kStored    ? route::KvEvent::Kind::kStored
                    : e.kind == engine::KvEvent::Kind::kRemoved ? route::KvEvent::Kind::kRemoved
                                                                : route::KvEvent::Kind::kCleared;
          re.block_hashes = std::move(e.block_hashes);
          re.parent_hash = e.parent_hash;
          router.apply_kv_event(ev.arg, re);
        }
      }
      for (const engine::TokenOutput& o : wk.pending.outputs) {
        Req& r = reqs[o.id];
        r.generated = o.generated;
        r.cached = o.cached_tokens;
        if (r.first < 0) {
          r.first = ev.t;
          r.placement.first_token();
        }
        if (o.finished) {
          r.placement.finish();
          complete(static_cast<uint32_t>(o.id), ev.t);
        }
      }
      sum.preemptions += wk.pending.preempted;
      // Start the next step now (after arrivals at this instant, which sort before kicks).
      kick(ev.arg, ev.t);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!reqs[i].kept || counted[i] || reqs[i].row->hash_ids.empty()) continue;
    const auto& row = *reqs[i].row;
    count_theoretical(static_cast<uint32_t>(i),
                      tokens::sequence_from_ids(row.hash_ids, wl.block_size, false, row.input_length, bs));
  }
  sum.theoretical_hit = id_tokens ? static_cast<double>(id_hits) / static_cast<double>(id_tokens) : 0.0;
  for (const Req& r : reqs) {
    if (!r.kept || r.end >= 0) continue;
    if (stopped) ++sum.not_sent;  // its start came after duration_s, or it waited for one that did
    else throw Fatal(kExitBadData, fmt::format("{}: request never ran (dependency cycle?)", r.row->where));
  }
  sum.simulated_ms = first_start < 0 ? 0 : last_end - first_start;
  sum.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return sum;
}

}  // namespace dyn::replay
