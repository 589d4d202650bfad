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
#include "dyn/base/event_queue.h"
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

struct Req {
  const trace::WorkloadRow* row = nullptr;
  std::string id;
  uint32_t turn = 0;
  bool last_turn = false;     // the session's last row (what x-dynamo-session-final marks live)
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
  double pause_ms = 0;               // time waited in admission control (SPEC 9)
  double dispatched = -1;            // --reference: when the engine got it
  std::vector<uint64_t> ref_blocks;  // --reference: the engine blocks it was routed on
};

struct Worker {
  std::unique_ptr<engine::Engine> engine;
  engine::StepResult pending;
  bool busy = false;
  bool kicked = false;
};

// One run of run_sim: the cluster, the requests and their dependency graph, and the handlers of
// the five event kinds, driven by one EventQueue (the virtual-clock loop decide uses too).
class Simulation {
 public:
  Simulation(const trace::Workload& wl, const SimOptions& opt, io::Output& out);
  SimSummary run();
  /// SimOptions::references into `sum`, after run() (outside its wall time).
  void run_references(SimSummary& sum);

 private:
  using Event = EventQueue<uint32_t>::Event;
  // Set-up: ids and turns, which rows run, what each waits for, the first arrivals.
  void index_requests();
  void select_rows();
  void link_dependencies();
  void schedule_arrivals();
  // The event handlers.
  void on_send(const Event& ev);
  void on_tick(const Event& ev);
  void on_kick(const Event& ev);
  void on_step_end(const Event& ev);
  void push(double t, int kind, uint32_t arg);
  void kick(uint32_t w, double t);
  void dispatch(uint32_t i, double t, std::optional<uint64_t> target);
  void complete(uint32_t i, double t);
  void write_row(const Req& r);
  void count_theoretical(uint32_t i, std::span<const uint64_t> seq);

  const trace::Workload& wl_;
  const SimOptions& opt_;
  io::Output& out_;
  engine::EngineConfig ecfg_;
  FakeClock clock_;
  route::Router router_;
  std::vector<Worker> workers_;
  // Program-aware admission (SPEC 9) on the virtual clock: capacity = block size x KV blocks.
  std::unique_ptr<route::AdmissionController> admission_;
  std::map<uint64_t, uint32_t> parked_;  // admission ticket -> request waiting for its program's resume
  double tick_ms_ = 0;
  // Load controls (SimOptions::schedule, SPEC 6.3): the defaults reproduce the recorded timing.
  bool fixed_ = true;
  double speed_ = 1;
  uint64_t cap_ = 0;  // concurrency cap, 0 = none
  double stop_at_ = INFINITY;
  double zero_ = 0;  // time zero of the fixed schedule

  std::vector<Req> reqs_;
  std::vector<int64_t> prev_row_;
  SimSummary sum_;
  // Theoretical hit rate at the engines' block size (SPEC 7, as dyn-bench counts it): input
  // tokens of the kept rows with hash ids that lie in full engine blocks an earlier row had.
  // Counted as rows are dispatched, on the hashes routing computes anyway (kept rows never
  // dispatched are added after the run): the total does not depend on the order rows are added
  // in, since each distinct block misses exactly once and every other occurrence hits.
  tokens::InfiniteCache infinite_;
  uint64_t id_tokens_ = 0, id_hits_ = 0;
  std::vector<bool> counted_;

  EventQueue<uint32_t> q_;
  // Pending arrival times (arrivals, admits, ticks): they bound an engine's fast-forward.
  std::priority_queue<double, std::vector<double>, std::greater<double>> arrivals_;
  // With a concurrency cap any completion can send a waiting request at once, as a dependency can.
  bool has_deps_ = false;
  double first_start_ = -1, last_end_ = 0;
  // Concurrency (SimOptions::concurrency): requests sent and not yet complete, and those whose
  // start has come while every slot was taken, earliest-ready first (then workload order).
  uint64_t in_flight_ = 0;
  std::priority_queue<std::pair<double, uint32_t>, std::vector<std::pair<double, uint32_t>>, std::greater<>> waiting_;
  bool stopped_ = false;  // duration_s ran out: nothing more is sent
  std::string line_;      // one reused buffer for request_end rows
  std::vector<uint64_t> hashes_;
};

route::RouterConfig checked(const SimOptions& opt) {
  if (opt.workers == 0) throw Fatal(kExitUsage, "--workers must be at least 1");
  if (opt.engine.block_size != opt.router.block_size)
    throw Fatal(kExitUsage, fmt::format("engine block size {} differs from the router's --kv-cache-block-size {}",
                                        opt.engine.block_size, opt.router.block_size));
  if (auto e = opt.engine.validate(); !e.empty()) throw Fatal(kExitUsage, e);
  return opt.router;
}

Simulation::Simulation(const trace::Workload& wl, const SimOptions& opt, io::Output& out)
    : wl_(wl),
      opt_(opt),
      out_(out),
      ecfg_(opt.engine),
      clock_(0, opt.epoch_unix_ms),
      router_(checked(opt), clock_),
      workers_(opt.workers),
      q_(clock_) {
  ecfg_.kv_events = opt.router.kv_events;
  for (uint32_t w = 0; w < opt.workers; ++w) {
    workers_[w].engine = std::make_unique<engine::Engine>(ecfg_);
    if (auto err = router_.add_worker({w, ecfg_.block_size, ecfg_.num_blocks}))
      throw Fatal(err->exit_code, err->message);
  }
  if (opt.admission.enabled()) {
    std::vector<route::AdmissionWorker> aw;
    for (uint32_t w = 0; w < opt.workers; ++w) aw.push_back({static_cast<int>(w), ecfg_.num_blocks * ecfg_.block_size});
    admission_ = std::make_unique<route::AdmissionController>(opt.admission, std::move(aw));
  }
  tick_ms_ = opt.admission.scheduler_interval_s * 1000.0;
  const replay::ScheduleOptions& so = opt.schedule;
  fixed_ = so.mode == replay::LoadMode::kFixedSchedule;
  speed_ = so.speedup > 0 ? so.speedup : 1;
  if (so.mode == replay::LoadMode::kRequestRate && !(so.request_rate > 0))
    throw Fatal(kExitUsage, "--request-rate must be positive");
  cap_ = opt.concurrency ? opt.concurrency : so.mode == replay::LoadMode::kConcurrency ? 1 : 0;
  stop_at_ = opt.duration_s > 0 ? opt.duration_s * 1000.0 : INFINITY;
}

// Ids and turns are those of the whole workload, so a row keeps its request id whatever the
// offsets or the request count cut.
void Simulation::index_requests() {
  const size_t n = wl_.rows.size();
  reqs_.resize(n);
  prev_row_.assign(n, -1);
  counted_.assign(n, false);
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> last_of_session;  // session -> (row, turns)
  for (size_t i = 0; i < n; ++i) {
    Req& r = reqs_[i];
    r.row = &wl_.rows[i];
    if (!r.row->session_id.empty()) {
      auto [it, fresh] = last_of_session.try_emplace(r.row->session_id, static_cast<uint32_t>(i), 0u);
      if (!fresh) {
        prev_row_[i] = it->second.first;
        r.turn = ++it->second.second;
        it->second.first = static_cast<uint32_t>(i);
      }
    }
    r.id = !r.row->request_id.empty()   ? r.row->request_id
           : !r.row->session_id.empty() ? fmt::format("{}:{}", r.row->session_id, r.turn)
                                        : fmt::format("row-{}", r.row->index);
  }
  for (const auto& [sid, last] : last_of_session) reqs_[last.first].last_turn = true;
}

// Which rows run: the fixed schedule's inclusive offsets (a later turn without a timestamp goes
// with its session's first turn), then the first request_count of those.
void Simulation::select_rows() {
  const replay::ScheduleOptions& so = opt_.schedule;
  if (fixed_ && (so.start_offset_ms || so.end_offset_ms)) {
    for (size_t i = 0; i < reqs_.size(); ++i) {
      const auto& ts = reqs_[i].row->timestamp_ms;
      if (!ts && prev_row_[i] >= 0) {
        reqs_[i].kept = reqs_[static_cast<size_t>(prev_row_[i])].kept;
        continue;
      }
      if (ts && ((so.start_offset_ms && *ts < *so.start_offset_ms) || (so.end_offset_ms && *ts > *so.end_offset_ms))) {
        reqs_[i].kept = false;
        ++sum_.outside_offsets;
      }
    }
  }
  if (so.request_count) {
    uint64_t taken = 0;
    for (Req& r : reqs_) {
      if (!r.kept) continue;
      if (taken < so.request_count) ++taken;
      else {
        r.kept = false;
        ++sum_.over_count;
      }
    }
  }
}

// What each kept row waits for: its session's previous turn, outside the fixed schedule a child
// session's first turn its parent's latest preceding turn, and its wait_for requests.
void Simulation::link_dependencies() {
  const size_t n = reqs_.size();
  auto depend = [&](size_t on, size_t i) {
    reqs_[on].dependents.push_back(static_cast<uint32_t>(i));
    ++reqs_[i].pending;
  };
  for (size_t i = 0; i < n; ++i) {
    Req& r = reqs_[i];
    if (!r.kept) continue;
    if (const int64_t p = prev_row_[i]; p >= 0 && reqs_[static_cast<size_t>(p)].kept) {
      r.session_prev = p;
      depend(static_cast<size_t>(p), i);
    }
  }
  if (!fixed_) {
    // A child session's first turn has no time of its own: it starts after its parent's latest
    // preceding turn (the live plan's rule, replay::build_plan).
    const SessionPlan sp = plan_sessions(wl_.rows);
    for (size_t i = 0; i < n; ++i) {
      Req& r = reqs_[i];
      const int64_t p = sp.parent_row[i];
      if (!r.kept || prev_row_[i] >= 0 || p < 0 || !reqs_[static_cast<size_t>(p)].kept) continue;
      r.parent_dep = p;
      depend(static_cast<size_t>(p), i);
    }
  }
  std::unordered_map<std::string_view, uint32_t> by_id;
  for (size_t i = 0; i < n; ++i) by_id.emplace(reqs_[i].id, static_cast<uint32_t>(i));
  for (size_t i = 0; i < n; ++i) {
    if (!reqs_[i].kept) continue;
    for (const std::string& dep : reqs_[i].row->wait_for) {
      auto it = by_id.find(dep);
      if (it == by_id.end())
        throw Fatal(kExitBadData, fmt::format("{}: wait_for names unknown request id '{}'", reqs_[i].row->where, dep));
      if (!reqs_[it->second].kept) continue;  // cut by offsets or the count: this row keeps its own timing
      depend(it->second, i);
      reqs_[i].waited = true;
    }
  }
  has_deps_ = cap_ > 0;
  for (const Req& r : reqs_)
    if (r.pending) has_deps_ = true;
}

// The rows with nothing to wait for arrive by the load mode: at their (offset, sped-up)
// timestamps, at the arrivals of the request-rate process, or all at 0 (concurrency).
void Simulation::schedule_arrivals() {
  const replay::ScheduleOptions& so = opt_.schedule;
  if (fixed_ && so.start_offset_ms) zero_ = *so.start_offset_ms;
  else if (fixed_ && so.auto_offset)
    for (const Req& r : reqs_)
      if (r.kept && r.row->timestamp_ms) {
        zero_ = *r.row->timestamp_ms;
        break;
      }
  Rng rng(so.seed);
  double arrival = 0;
  bool first_arrival = true;
  for (size_t i = 0; i < reqs_.size(); ++i) {
    if (!reqs_[i].kept || reqs_[i].pending) continue;
    double at = 0;
    switch (so.mode) {
      case replay::LoadMode::kFixedSchedule: {
        const auto& ts = reqs_[i].row->timestamp_ms;
        if (!ts)
          throw Fatal(kExitBadData,
                      fmt::format("{}: missing timestamp (needed to schedule this request)", reqs_[i].row->where));
        at = (*ts - zero_) / speed_;
        if (zero_ != 0) at = std::max(0.0, at);
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
}

void Simulation::push(double t, int kind, uint32_t arg) {
  q_.push(t, kind, arg);
  // A tick can release paused requests into an engine, so it bounds fast-forwarding like an arrival.
  if (kind == kArrival || kind == kAdmit || kind == kTick) arrivals_.push(t);
}

void Simulation::count_theoretical(uint32_t i, std::span<const uint64_t> seq) {
  const auto& row = *reqs_[i].row;
  if (row.hash_ids.empty() || counted_[i]) return;
  counted_[i] = true;
  id_tokens_ += row.input_length;
  id_hits_ += infinite_.add_sequence(seq, ecfg_.block_size);
}

// trace::append_request_end writes without building Json objects.
void Simulation::write_row(const Req& r) {
  const auto& row = *r.row;
  trace::RequestEnd e;
  e.event_time_unix_ms = opt_.epoch_unix_ms + static_cast<uint64_t>(std::llround(std::max(r.end, r.start)));
  e.event_source = "simulator";
  e.agent_context.session_id = row.session_id;
  e.agent_context.parent_session_id = row.parent_session_id;
  e.request_id = r.id;
  e.model = opt_.model;
  e.input_tokens = row.input_length;
  e.request_received_ms = opt_.epoch_unix_ms + static_cast<uint64_t>(std::llround(r.start));
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
    e.block_size = wl_.block_size;
  }
  if (!row.session_id.empty()) e.turn = r.turn;
  e.binding = route::binding_name(r.binding);
  if (admission_) e.pause_ms = r.pause_ms;
  line_.clear();
  trace::append_request_end(line_, e);
  out_.line(line_);
}

// Request i ended at t: its row, admission's bookkeeping, its concurrency slot, and the requests
// that waited for it (SPEC 6.1: a later turn starts at this end plus its delay or recorded gap).
void Simulation::complete(uint32_t i, double t) {
  Req& r = reqs_[i];
  r.end = t;
  last_end_ = std::max(last_end_, t);
  ++sum_.requests;
  if (r.error) ++sum_.errors;
  else {
    sum_.input_tokens += r.row->input_length;
    sum_.cached_tokens += r.cached;
    sum_.output_tokens += r.generated;
  }
  write_row(r);
  if (admission_ && !r.row->session_id.empty()) {
    if (r.error) admission_->on_request_failed(r.row->session_id, t);
    else admission_->on_response(r.row->session_id, r.row->input_length, r.generated, t);
    // The session's last turn ends its program (TERMINATED), as x-dynamo-session-final does live.
    if (r.last_turn) admission_->release_program(r.row->session_id, t);
  }
  // Its concurrency slot goes to the request that has waited longest for one.
  --in_flight_;
  if (!waiting_.empty()) {
    const uint32_t w = waiting_.top().second;
    waiting_.pop();
    ++in_flight_;
    push(t, kAdmit, w);
  }
  for (uint32_t d : r.dependents) {
    Req& x = reqs_[d];
    const auto self = static_cast<int64_t>(i);
    if (self != x.session_prev && self != x.parent_dep) x.deps_done = std::max(x.deps_done, t);
    if (--x.pending > 0) continue;
    double start = 0;
    if (x.session_prev >= 0) {
      const Req& p = reqs_[x.session_prev];
      double gap = 0;
      if (x.row->delay_ms) gap = *x.row->delay_ms;
      else if (x.row->timestamp_ms && p.row->timestamp_ms)
        gap = std::max(0.0, *x.row->timestamp_ms - *p.row->timestamp_ms);
      start = p.end + gap / speed_;
    } else if (x.parent_dep >= 0) {
      start = reqs_[x.parent_dep].end + x.row->delay_ms.value_or(0.0) / speed_;
    } else if (fixed_ && x.row->timestamp_ms) {
      start = (*x.row->timestamp_ms - zero_) / speed_;
    }
    if (x.waited) start = std::max(start, x.deps_done + x.row->tool_wait_ms.value_or(0.0) / speed_);
    push(std::max(start, t), kArrival, d);
  }
}

void Simulation::kick(uint32_t w, double t) {
  Worker& wk = workers_[w];
  if (wk.busy || wk.kicked || !wk.engine->has_work()) return;
  wk.kicked = true;
  push(t, kKick, w);
}

// Routes request i at time t (to `target` when admission placed its program) and hands it to
// the engine.
void Simulation::dispatch(uint32_t i, double t, std::optional<uint64_t> target) {
  Req& r = reqs_[i];
  const auto& row = *r.row;
  const uint32_t bs = ecfg_.block_size;
  if (row.text_input && row.hash_ids.empty()) {
    auto toks = tokens::text_to_tokens(*row.text_input);
    hashes_ = tokens::sequence_hashes(tokens::block_hashes(toks, bs));
  } else {
    hashes_ = tokens::sequence_from_ids(row.hash_ids, wl_.block_size, false, row.input_length, bs);
    count_theoretical(i, hashes_);
  }
  route::RouteRequest rr;
  rr.session_id = row.session_id;
  rr.parent_session_id = row.parent_session_id;
  rr.sequence_hashes = hashes_;
  rr.tokens = row.input_length;
  rr.wait_for_initializing = false;
  rr.worker = target;
  auto placed = router_.place(rr);
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
  if (!opt_.references.empty()) {
    r.dispatched = t;
    r.ref_blocks = hashes_;
  }
  spec.block_hashes = std::move(hashes_);  // the router keeps its own copy; the span is no longer read
  spec.max_output_tokens = std::max<uint64_t>(1, row.output_length.value_or(1));
  if (!row.session_id.empty()) spec.session = std::hash<std::string>{}(row.session_id) | 1;
  spec.session_final = r.last_turn;
  auto added = workers_[r.worker].engine->add(std::move(spec));
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
}

// A request's start has come (kArrival) or it got a freed concurrency slot (kAdmit): it is sent,
// unless the duration ran out, every slot is taken, or admission pauses its program.
void Simulation::on_send(const Event& ev) {
  arrivals_.pop();
  if (stopped_ || ev.t_ms >= stop_at_) {  // --benchmark-duration: sent nothing from here on
    stopped_ = true;
    if (ev.kind == kAdmit) --in_flight_;
    return;
  }
  if (ev.kind == kArrival) {  // a kAdmit request holds the slot its predecessor freed
    if (cap_ && in_flight_ >= cap_) {
      waiting_.emplace(ev.t_ms, ev.arg);
      return;
    }
    ++in_flight_;
  }
  Req& r = reqs_[ev.arg];
  r.start = ev.t_ms;
  if (first_start_ < 0) first_start_ = ev.t_ms;
  std::optional<uint64_t> target;
  if (admission_ && !r.row->session_id.empty()) {
    auto d = admission_->admit(r.row->session_id, r.row->parent_session_id, r.row->input_length, ev.t_ms);
    if (!d.admitted) {  // paused program: released by a later tick
      parked_.emplace(d.ticket, ev.arg);
      return;
    }
    if (d.worker >= 0) target = static_cast<uint64_t>(d.worker);
  }
  dispatch(ev.arg, ev.t_ms, target);
}

// Admission's scheduler tick (SPEC 9): released programs' parked requests are dispatched.
void Simulation::on_tick(const Event& ev) {
  arrivals_.pop();
  auto report = admission_->tick(ev.t_ms);
  for (const auto& rel : report.released) {
    auto it = parked_.find(rel.ticket);
    if (it == parked_.end()) continue;
    uint32_t i = it->second;
    parked_.erase(it);
    reqs_[i].pause_ms = rel.waited_ms;
    dispatch(i, ev.t_ms, rel.worker >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(rel.worker)) : std::nullopt);
  }
  if (!q_.empty() || !parked_.empty()) push(ev.t_ms + tick_ms_, kTick, 0);
}

// An idle engine with work starts a step.
void Simulation::on_kick(const Event& ev) {
  Worker& wk = workers_[ev.arg];
  wk.kicked = false;
  if (wk.busy || !wk.engine->has_work()) return;
  // Fast-forward runs of identical decode steps (same batch, same KV use, no token anyone waits
  // for) up to the next event that could change this engine's batch: an arrival (any event when
  // requests depend on others, since a completion elsewhere can release one at once).
  if (uint64_t k = wk.engine->steady_decode_steps(); k >= 2) {
    const double d = wk.engine->decode_step_ms();
    double bound = has_deps_ ? q_.next_ms() : (arrivals_.empty() ? INFINITY : arrivals_.top());
    uint64_t m = k;
    if (std::isfinite(bound)) m = std::min<uint64_t>(k, static_cast<uint64_t>(std::floor((bound - ev.t_ms) / d)));
    if (m >= 2) {
      const double span = wk.engine->fast_forward(m);
      wk.pending.clear();
      wk.busy = true;
      push(ev.t_ms + span, kStepEnd, ev.arg);
      return;
    }
  }
  wk.engine->step(wk.pending);
  wk.busy = true;
  push(ev.t_ms + wk.pending.duration_ms, kStepEnd, ev.arg);
}

// A step's outputs become visible: KV events to the router's index, tokens to their requests.
void Simulation::on_step_end(const Event& ev) {
  Worker& wk = workers_[ev.arg];
  wk.busy = false;
  if (opt_.router.kv_events) {
    for (auto& e : wk.engine->take_kv_events()) {
      route::KvEvent re;
      re.kind = e.kind == engine::KvEvent::Kind::kStored    ? route::KvEvent::Kind::kStored
                : e.kind == engine::KvEvent::Kind::kRemoved ? route::KvEvent::Kind::kRemoved
                                                            : route::KvEvent::Kind::kCleared;
      re.block_hashes = std::move(e.block_hashes);
      re.parent_hash = e.parent_hash;
      router_.apply_kv_event(ev.arg, re);
    }
  }
  for (const engine::TokenOutput& o : wk.pending.outputs) {
    Req& r = reqs_[o.id];
    r.generated = o.generated;
    r.cached = o.cached_tokens;
    if (r.first < 0) {
      r.first = ev.t_ms;
      r.placement.first_token();
    }
    if (o.finished) {
      r.placement.finish();
      complete(static_cast<uint32_t>(o.id), ev.t_ms);
    }
  }
  sum_.preemptions += wk.pending.preempted;
  // Start the next step now (after arrivals at this instant, which sort before kicks).
  kick(ev.arg, ev.t_ms);
}

SimSummary Simulation::run() {
  index_requests();
  select_rows();
  link_dependencies();
  schedule_arrivals();
  if (admission_) push(tick_ms_, kTick, 0);
  while (!q_.empty()) {
    const Event ev = q_.pop();
    switch (ev.kind) {
      case kArrival:
      case kAdmit: on_send(ev); break;
      case kTick: on_tick(ev); break;
      case kKick: on_kick(ev); break;
      default: on_step_end(ev); break;
    }
  }
  const uint32_t bs = ecfg_.block_size;
  for (size_t i = 0; i < reqs_.size(); ++i) {
    if (!reqs_[i].kept || counted_[i] || reqs_[i].row->hash_ids.empty()) continue;
    const auto& row = *reqs_[i].row;
    count_theoretical(static_cast<uint32_t>(i),
                      tokens::sequence_from_ids(row.hash_ids, wl_.block_size, false, row.input_length, bs));
  }
  sum_.theoretical_hit = id_tokens_ ? static_cast<double>(id_hits_) / static_cast<double>(id_tokens_) : 0.0;
  for (const Req& r : reqs_) {
    if (!r.kept || r.end >= 0) continue;
    if (stopped_) ++sum_.not_sent;  // its start came after duration_s, or it waited for one that did
    else throw Fatal(kExitBadData, fmt::format("{}: request never ran (dependency cycle?)", r.row->where));
  }
  sum_.simulated_ms = first_start_ < 0 ? 0 : last_end_ - first_start_;
  return sum_;
}

// The same requests, timing and engine blocks through one cache of the whole cluster's KV.
void Simulation::run_references(SimSummary& sum) {
  if (opt_.references.empty()) return;
  std::vector<tokens::ReferenceRequest> v;
  uint64_t input = 0, cached = 0;
  for (Req& r : reqs_) {
    if (r.error || r.dispatched < 0 || r.end < 0) continue;
    v.push_back({r.dispatched, r.end, r.row->input_length, std::move(r.ref_blocks)});
    input += r.row->input_length;
    cached += r.cached;
  }
  sum.reference_blocks = static_cast<uint64_t>(opt_.workers) * ecfg_.num_blocks;
  auto share = [&](uint64_t tokens) { return input ? static_cast<double>(tokens) / static_cast<double>(input) : 0.0; };
  sum.reference_run_hit = share(cached);
  for (tokens::ReferencePolicy p : opt_.references)
    sum.references.push_back({p, share(tokens::reference_hit_tokens(v, sum.reference_blocks, ecfg_.block_size, p))});
}

}  // namespace

SimSummary run_sim(const trace::Workload& wl, const SimOptions& opt, io::Output& out) {
  const auto wall0 = std::chrono::steady_clock::now();
  Simulation sim(wl, opt, out);
  SimSummary sum = sim.run();
  sum.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  sim.run_references(sum);  // yardsticks, not the simulator's speed
  return sum;
}

}  // namespace dyn::replay
