// Discrete-event simulation of N SPEC 8 engines behind the router on a virtual clock.
#include "dyn/replay/sim.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/base/event_queue.h"
#include "dyn/base/random.h"
#include "dyn/engine/engine.h"
#include "dyn/kvevents/translate.h"
#include "dyn/replay/session.h"
#include "dyn/route/admission.h"
#include "dyn/route/priority.h"
#include "dyn/route/queue.h"
#include "dyn/route/router.h"
#include "dyn/tokens/hash.h"
#include "dyn/records/rows.h"

namespace dyn::replay {
namespace {

// A policy's hint (kvpolicy::KvPolicies, its wire form) as the engine takes it; the policies
// write only envelopes that parse, so a failure is a bug.
engine::KvHint policy_hint(const Json& wire) {
  auto h = engine::parse_kv_hint(wire, "kv policy hint");
  if (!h) throw std::logic_error(h.error().message);
  return std::move(*h);
}

// Same-instant order: arrivals, then requests admitted to a freed concurrency slot (both join
// the step that starts at that instant), step ends, kicks, admission ticks (SPEC 9), the end of
// --benchmark-grace-period (a request that ends at that instant still counts, as in AIPerf), the
// router queue's time limits (SPEC 3.4: a request placed at that instant is not timed out).
// demote-prefetch's prefetches (SPEC 6.4) go last: a request that arrives at that instant is
// already back.
enum EventKind : int {
  kArrival = 0,
  kAdmit = 1,
  kStepEnd = 2,
  kKick = 3,
  kTick = 4,
  kGraceEnd = 5,
  kQueueTimeout = 6,
  kPrefetch = 7
};

struct Req {
  const records::WorkloadRow* row = nullptr;
  std::string id;
  uint32_t turn = 0;
  bool last_turn = false;     // the session's last row (what x-dynamo-session-final marks live)
  bool ends_in_tool = false;  // the session's next row follows a tool call (has tool_wait_ms)
  bool demoted = false;       // demote-prefetch sent its kv.demote (a prefetch follows its end)
  int64_t session_prev = -1;  // previous turn of the same session
  int64_t parent_dep = -1;    // parent's turn a child's first turn waits for (outside the fixed schedule)
  bool kept = true;           // replayed (not cut by offsets or the request count)
  std::vector<uint32_t> dependents;
  uint32_t pending = 0;
  double deps_done = 0;  // latest completion among wait_for deps
  bool waited = false;   // waits for some wait_for request (one that is replayed)
  double start = -1, first = -1, end = -1;
  uint64_t cached = 0, generated = 0;
  uint64_t tier_cached[3] = {};  // of `cached`: onboarded from G2, G3, G4 (SPEC 8.7)
  uint64_t worker = 0;
  route::Placement placement;
  route::BindingOutcome binding = route::BindingOutcome::kNone;
  route::RebindReason rebind_reason = route::RebindReason::kNone;
  std::optional<route::DecisionQuality> quality;  // the placement measured (issue 55)
  bool error = false;
  bool cancelled = false;  // still in flight when --benchmark-grace-period ended
  int error_code = 400;    // the HTTP answer a live router would give (400, 429, 503)
  const char* error_type = "invalid_request";
  std::string error_message;
  // The router queue (SPEC 3.4): its priority (resolved at its first dispatch), the worker
  // admission released it to, and its wait.
  route::ResolvedPriority prio;
  bool resolved = false;
  std::optional<uint64_t> target;
  std::optional<uint64_t> lane;  // the queue lane it waits in (a pinned worker), when queued
  double queued_at = -1, queue_deadline = -1, queue_ms = -1;
  uint64_t queue_depth = 0;
  double pause_ms = 0;               // time waited in admission control (SPEC 9)
  double dispatched = -1;            // --reference: when the engine got it
  std::vector<uint64_t> ref_blocks;  // --reference: the engine blocks it was routed on
  uint64_t pos = 0;                  // place in the workload (row order ranks arrivals)
  bool counted = false;              // in the theoretical hit rate
};

// select_rows' rule for one row at a time, in workload order (SPEC 6.3): the fixed schedule's
// inclusive offsets (a later turn without a timestamp goes with its session's previous turn),
// then the first request_count of the rows those keep.
struct RowSelector {
  const replay::ScheduleOptions& so;
  bool fixed;
  uint64_t taken = 0, outside = 0, over = 0;
  /// `prev_in_offsets`: whether the session's previous row passed the offsets (nullopt: no
  /// previous row). Returns {passed the offsets, kept}.
  std::pair<bool, bool> keep(const records::WorkloadRow& row, std::optional<bool> prev_in_offsets) {
    bool in = true;
    if (fixed && (so.start_offset_ms || so.end_offset_ms)) {
      const auto& ts = row.timestamp_ms;
      if (!ts && prev_in_offsets) in = *prev_in_offsets;
      else if (ts &&
               ((so.start_offset_ms && *ts < *so.start_offset_ms) || (so.end_offset_ms && *ts > *so.end_offset_ms))) {
        in = false;
        ++outside;
      }
    }
    if (!in) return {false, false};
    if (so.request_count && taken >= so.request_count) return ++over, std::pair{true, false};
    ++taken;
    return {true, true};
  }
};

// What streaming needs to know of the whole input before the run (run_sim_files' first pass).
// Per row (by workload place), about 13 bytes: what a turn's end needs to schedule the session's
// next turn before that row is read (its arrival must enter the queue then, as when loaded whole).
struct StreamPlan {
  static constexpr uint32_t kNone = 0xffffffffu;
  std::vector<bool> last_turn;  // the last row of its session (false without a session)
  std::vector<bool> kept;       // replayed (RowSelector)
  std::vector<uint32_t> next;   // the session's next row, or kNone
  std::vector<double> gap_ms;   // after the session's previous row: its delay, else the timestamp gap
  bool has_deps = false;        // some kept row waits for its session's previous (kept) turn
  bool streamable = true;       // no wait_for, Dynamo records or rows out of timestamp order
};

// SPEC 6.1: how long after its session's previous turn ends a later turn starts (before
// --speedup): its delay, else the gap between the two turns' timestamps, else 0. Its
// tool_wait_ms comes on top (Simulation::complete and the stream plan add it, as live).
double session_gap_ms(const records::WorkloadRow& x, const std::optional<double>& prev_timestamp_ms) {
  if (x.delay_ms) return *x.delay_ms;
  if (x.timestamp_ms && prev_timestamp_ms) return std::max(0.0, *x.timestamp_ms - *prev_timestamp_ms);
  return 0;
}

// A session's latest row read so far (streaming and its plan).
struct SessionCursor {
  uint64_t pos = 0;   // its place in the workload
  uint32_t slot = 0;  // its request (streaming)
  uint32_t turns = 0;
  bool in_offsets = true, kept = true;
  int64_t next_slot = -1;              // streaming: the next turn's request, scheduled before its row was read
  std::optional<double> timestamp_ms;  // the plan's pass: for the next turn's gap
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
  /// Over a loaded workload (`wl`), or streaming from `in` (rows of block size `block_size`,
  /// `plan` from a first pass over the same input).
  Simulation(const records::Workload* wl, records::WorkloadReader* in, const StreamPlan* plan, uint32_t block_size,
             const SimOptions& opt, io::Output& out);
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
  void on_grace_end(const Event& ev);
  void push(double t, int kind, uint32_t arg);
  void kick(uint32_t w, double t);
  bool dispatch(uint32_t i, double t, bool from_queue = false);
  void policy_hints(Req& r, uint64_t predicted_cached, engine::RequestSpec& spec, double t);
  double copy_ms(const Req& r) const;
  void enqueue(uint32_t i, double t, bool pinned);
  void reject(uint32_t i, double t, int code, const char* type, std::string message);
  void pump(double t);
  void on_queue_timeout(const Event& ev);
  void schedule_prefetch(const Req& r, double t);
  void on_prefetch(const Event& ev);
  void complete(uint32_t i, double t);
  void write_row(const Req& r);
  void count_theoretical(uint32_t i);
  void push_arrival(double t, uint32_t i);
  double schedule_ms(double timestamp_ms) const;
  double fixed_arrival_ms(const Req& r) const;
  // The request in slot i (loaded whole: row i); streaming: reading, and freeing a slot.
  Req& rq(size_t i) { return reqs_[i]; }
  double next_read_ms() const;
  void read_one();
  void ingest(records::WorkloadRow&& row);
  void read_through(double t);
  uint32_t new_slot();
  void free_slot(uint32_t i);

  const records::Workload* wl_;
  uint32_t wl_block_;
  const SimOptions& opt_;
  io::Output& out_;
  engine::EngineConfig ecfg_;
  FakeClock clock_;
  route::Router router_;
  std::vector<Worker> workers_;
  std::vector<kvevents::IndexUpdate> kv_updates_;  // one step's KV events (reused)
  // Program-aware admission (SPEC 9) on the virtual clock: capacity = block size x KV blocks.
  std::unique_ptr<route::AdmissionController> admission_;
  // The router queue of dyn-route serve (SPEC 3.4), on while a busy threshold is set: items are
  // request slots. Priorities resolve as serve resolves them (the workload's `priority` is the
  // body's nvext.agent_hints.priority), with or without the queue.
  route::PriorityResolver resolver_;
  std::optional<route::PolicyQueue> queue_;
  bool uses_las_ = false;
  std::map<uint64_t, uint32_t> parked_;  // admission ticket -> request waiting for its program's resume
  double tick_ms_ = 0;
  // Load controls (SimOptions::schedule, SPEC 6.3): the defaults reproduce the recorded timing.
  bool fixed_ = true;
  double speed_ = 1;
  uint64_t cap_ = 0;  // concurrency cap, 0 = none
  double stop_at_ = INFINITY;
  double grace_end_ = INFINITY;  // stop_at_ + the grace period: requests still in flight are cancelled
  double zero_ = 0;              // time zero of the fixed schedule

  std::deque<Req> reqs_;
  std::vector<int64_t> prev_row_;
  SimSummary sum_;
  // Theoretical hit rate at the engines' block size (SPEC 7, as dyn-bench counts it): input
  // tokens of the kept rows with hash ids that lie in full engine blocks an earlier row had.
  // Counted as rows are dispatched, from their ids (kept rows never dispatched are added after
  // the run): the total does not depend on the order rows are added in, since each distinct
  // block misses exactly once and every other occurrence hits.
  tokens::InfiniteCache infinite_;
  uint64_t id_tokens_ = 0, id_hits_ = 0;
  // SimOptions::references: each completed request's timing and blocks, with its row and cached
  // tokens (kept aside so streaming can drop the request).
  struct RefRow {
    uint64_t i;  // workload place
    uint64_t cached;
    tokens::ReferenceRequest req;
  };
  std::vector<RefRow> refs_;

  EventQueue<uint32_t> q_;
  // Pending arrival times (arrivals, admits, ticks): they bound an engine's fast-forward.
  std::priority_queue<double, std::vector<double>, std::greater<double>> arrivals_;
  // With a concurrency cap any completion can send a waiting request at once, as a dependency can.
  bool has_deps_ = false;
  double first_start_ = -1, last_end_ = 0;
  // Concurrency (SimOptions::concurrency): requests sent and not yet complete, and those whose
  // start has come while every slot was taken, earliest-ready first (then workload order).
  uint64_t in_flight_ = 0;
  // (ready time, workload place, slot)
  using Waiting = std::tuple<double, uint64_t, uint32_t>;
  std::priority_queue<Waiting, std::vector<Waiting>, std::greater<>> waiting_;
  bool stopped_ = false;  // duration_s ran out: nothing more is sent
  std::string line_;      // one reused buffer for request_end rows
  std::vector<uint64_t> hashes_;
  // Streaming (run_sim_files): rows are read as the virtual clock reaches their timestamps, one
  // row ahead in `ahead_`; a request's slot (in reqs_ and rows_) is freed for a later row once
  // it completes.
  records::WorkloadReader* in_ = nullptr;
  const StreamPlan* plan_ = nullptr;
  records::WorkloadRow ahead_;
  bool more_ = false;
  bool zero_known_ = true;
  std::deque<records::WorkloadRow> rows_;
  std::vector<uint32_t> free_slots_;
  uint64_t read_ = 0;  // rows read
  std::unordered_map<std::string, SessionCursor> sessions_;
  RowSelector sel_;
  // SimOptions::kv_policy (SPEC 6.4): per live session, the worker of its latest turn (where a
  // subagent's spawn finds its parent's blocks) and the blocks its first turn shared with others.
  std::optional<kvpolicy::KvPolicies> policies_;
  struct PolicySession {
    uint64_t worker = 0, shared_blocks = 0;
    uint32_t turns = 0;  // dispatched so far
  };
  std::unordered_map<std::string, PolicySession> policy_sessions_;
  // demote-prefetch: the prefetches planned (a kPrefetch event's arg is the index), each for a
  // session whose `turns`-th turn ended in a tool call.
  struct PlannedPrefetch {
    std::string session;
    uint64_t worker = 0;
    uint32_t turns = 0;
  };
  std::vector<PlannedPrefetch> prefetches_;
};

route::RouterConfig checked(const SimOptions& opt) {
  if (opt.workers == 0) throw Fatal(kExitUsage, "--workers must be at least 1");
  if (opt.engine.block_size != opt.router.block_size)
    throw Fatal(kExitUsage, fmt::format("engine block size {} differs from the router's --kv-cache-block-size {}",
                                        opt.engine.block_size, opt.router.block_size));
  if (auto e = opt.engine.validate(); !e.empty()) throw Fatal(kExitUsage, e);
  return opt.router;
}

Simulation::Simulation(const records::Workload* wl, records::WorkloadReader* in, const StreamPlan* plan,
                       uint32_t block_size, const SimOptions& opt, io::Output& out)
    : wl_(wl),
      wl_block_(block_size),
      opt_(opt),
      out_(out),
      ecfg_(opt.engine),
      clock_(0, opt.epoch_unix_ms),
      router_(checked(opt), clock_),
      workers_(opt.workers),
      resolver_(opt.queue),
      q_(clock_),
      in_(in),
      plan_(plan),
      sel_{opt.schedule, opt.schedule.mode == replay::LoadMode::kFixedSchedule} {
  ecfg_.kv_events = opt.router.kv_events;
  if (opt.kv_policy.demote_prefetch && !ecfg_.tiers.enabled())
    throw Fatal(kExitUsage, "--kv-policy demote-prefetch needs KV tiers to demote to (--num-g2-blocks)");
  if (opt.kv_policy.any()) {
    ecfg_.kv_hints.enabled = true;
    kvpolicy::KvPolicyConfig k = opt.kv_policy;  // demote-prefetch's copy time: the engine's link
    k.g2_to_g1_gbps = ecfg_.tiers.g2_to_g1_gbps;
    k.kv_bytes_per_token = ecfg_.kv_bytes_per_token;
    k.speedup_ratio = ecfg_.speedup_ratio;
    policies_.emplace(k);
  }
  // G4 is one pool for the whole simulated cluster (SPEC 8.7: shared by a process's engines).
  if (ecfg_.tiers.enabled() && ecfg_.tiers.g4_blocks)
    ecfg_.shared_g4 = std::make_shared<engine::SharedTier>(ecfg_.tiers);
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
  sum_.kv_state_blocks = static_cast<uint64_t>(opt.workers) * ecfg_.num_blocks;
  sum_.kv_state_bytes_per_block = engine::KvPool::kBytesPerBlock + route::Router::kIndexBytesPerBlock;
  if (auto err = opt.queue.validate()) throw Fatal(err->exit_code, err->message);
  if (router_.busy_thresholds().any()) queue_.emplace(opt.queue.classes, opt.queue.timeout_ms);
  for (const route::PolicyClass& c : opt.queue.classes)
    uses_las_ = uses_las_ || (queue_ && c.policy == route::QueuePolicy::kSessionLas);
  const replay::ScheduleOptions& so = opt.schedule;
  fixed_ = so.mode == replay::LoadMode::kFixedSchedule;
  speed_ = so.speedup > 0 ? so.speedup : 1;
  if (so.mode == replay::LoadMode::kRequestRate && !(so.request_rate > 0))
    throw Fatal(kExitUsage, "--request-rate must be positive");
  cap_ = opt.concurrency ? opt.concurrency : so.mode == replay::LoadMode::kConcurrency ? 1 : 0;
  stop_at_ = opt.duration_s > 0 ? opt.duration_s * 1000.0 : INFINITY;
  grace_end_ = stop_at_ + opt.grace_s * 1000.0;
}

// Ids and turns are those of the whole workload, so a row keeps its request id whatever the
// offsets or the request count cut.
void Simulation::index_requests() {
  const size_t n = wl_->rows.size();
  reqs_.resize(n);
  prev_row_.assign(n, -1);
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> last_of_session;  // session -> (row, turns)
  for (size_t i = 0; i < n; ++i) {
    Req& r = rq(i);
    r.row = &wl_->rows[i];
    r.pos = i;
    if (!r.row->session_id.empty()) {
      auto [it, fresh] = last_of_session.try_emplace(r.row->session_id, static_cast<uint32_t>(i), 0u);
      if (!fresh) {
        prev_row_[i] = it->second.first;
        if (r.row->tool_wait_ms) rq(it->second.first).ends_in_tool = true;
        r.turn = ++it->second.second;
        it->second.first = static_cast<uint32_t>(i);
      }
    }
    r.id = request_id_for(*r.row, r.turn, r.row->index);
  }
  for (const auto& [sid, last] : last_of_session) rq(last.first).last_turn = true;
}

// Which rows run: the fixed schedule's inclusive offsets (a later turn without a timestamp goes
// with its session's first turn), then the first request_count of those.
void Simulation::select_rows() {
  RowSelector sel{opt_.schedule, fixed_};
  std::vector<bool> in_offsets(reqs_.size());
  for (size_t i = 0; i < reqs_.size(); ++i) {
    std::optional<bool> prev;
    if (prev_row_[i] >= 0) prev = in_offsets[static_cast<size_t>(prev_row_[i])];
    const auto [in, kept] = sel.keep(*rq(i).row, prev);
    in_offsets[i] = in;
    rq(i).kept = kept;
  }
  sum_.outside_offsets = sel.outside;
  sum_.over_count = sel.over;
}

// What each kept row waits for: its session's previous turn, outside the fixed schedule a child
// session's first turn its parent's latest preceding turn, and its wait_for requests.
void Simulation::link_dependencies() {
  const size_t n = reqs_.size();
  auto depend = [&](size_t on, size_t i) {
    rq(on).dependents.push_back(static_cast<uint32_t>(i));
    ++rq(i).pending;
  };
  for (size_t i = 0; i < n; ++i) {
    Req& r = rq(i);
    if (!r.kept) continue;
    if (const int64_t p = prev_row_[i]; p >= 0 && rq(static_cast<size_t>(p)).kept) {
      r.session_prev = p;
      depend(static_cast<size_t>(p), i);
    }
  }
  if (!fixed_) {
    // A child session's first turn has no time of its own: it starts after its parent's latest
    // preceding turn (the live plan's rule, replay::build_plan).
    const SessionPlan sp = plan_sessions(wl_->rows);
    for (size_t i = 0; i < n; ++i) {
      Req& r = rq(i);
      const int64_t p = sp.parent_row[i];
      if (!r.kept || prev_row_[i] >= 0 || p < 0 || !rq(static_cast<size_t>(p)).kept) continue;
      r.parent_dep = p;
      depend(static_cast<size_t>(p), i);
    }
  }
  std::unordered_map<std::string_view, uint32_t> by_id;
  for (size_t i = 0; i < n; ++i) by_id.emplace(rq(i).id, static_cast<uint32_t>(i));
  for (size_t i = 0; i < n; ++i) {
    if (!rq(i).kept) continue;
    for (const std::string& dep : rq(i).row->wait_for) {
      auto it = by_id.find(dep);
      if (it == by_id.end())
        throw Fatal(kExitBadData, fmt::format("{}: wait_for names unknown request id '{}'", rq(i).row->where, dep));
      if (!rq(it->second).kept) continue;  // cut by offsets or the count: this row keeps its own timing
      depend(it->second, i);
      rq(i).waited = true;
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
    if (!rq(i).kept || rq(i).pending) continue;
    double at = 0;
    switch (so.mode) {
      case replay::LoadMode::kFixedSchedule: at = fixed_arrival_ms(rq(i)); break;
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
      case replay::LoadMode::kConcurrency:
        // All sent at once: the first starts the idle engine, the rest reach it a client latency
        // later (SimOptions::client_latency_ms; 0: all in its first step).
        at = first_arrival ? 0 : opt_.client_latency_ms;
        first_arrival = false;
        break;
    }
    push_arrival(at, static_cast<uint32_t>(i));
  }
}

// A timestamp's place on the fixed schedule: offset and sped up.
double Simulation::schedule_ms(double timestamp_ms) const {
  const double at = (timestamp_ms - zero_) / speed_;
  return zero_ != 0 ? std::max(0.0, at) : at;
}

// A row with nothing to wait for, on the fixed schedule.
double Simulation::fixed_arrival_ms(const Req& r) const {
  const auto& ts = r.row->timestamp_ms;
  if (!ts)
    throw Fatal(kExitBadData, fmt::format("{}: missing timestamp (needed to schedule this request)", r.row->where));
  return schedule_ms(*ts);
}

// A workload arrival ranks by row before every event pushed during the run at the same instant,
// whether it was pushed at the start or, streaming, when its row was read: the same order.
void Simulation::push_arrival(double t, uint32_t i) {
  q_.push_first(t, kArrival, i, rq(i).pos);
  arrivals_.push(t);
}

// The next unread row's schedule time: -inf when it must be read now (no timestamp: a later turn
// that waits for its session; or time zero still unknown), +inf at the end of the input.
double Simulation::next_read_ms() const {
  if (!more_) return INFINITY;
  if (!zero_known_ || !ahead_.timestamp_ms) return -INFINITY;
  return schedule_ms(*ahead_.timestamp_ms);
}

void Simulation::read_one() {
  ingest(std::move(ahead_));
  more_ = in_->next(ahead_);
}

// Reads every row whose schedule time has come by t, so each arrival of a row with nothing to wait
// for is pushed before the clock passes it (rows are in timestamp order; a later turn's arrival is
// pushed by its previous turn's end, read or not: complete()).
void Simulation::read_through(double t) {
  while (more_ && next_read_ms() <= t) read_one();
}

// One streamed row: index_requests, select_rows, link_dependencies and schedule_arrivals for it.
void Simulation::ingest(records::WorkloadRow&& row) {
  auto it = sessions_.end();
  bool first_turn = true;
  if (!row.session_id.empty()) std::tie(it, first_turn) = sessions_.try_emplace(row.session_id);
  const int64_t reserved = first_turn ? -1 : it->second.next_slot;  // the request complete() scheduled
  const uint32_t i = reserved >= 0 ? static_cast<uint32_t>(reserved) : new_slot();
  rows_[i] = std::move(row);
  Req& r = rq(i);
  r.row = &rows_[i];
  const records::WorkloadRow& w = *r.row;
  if (reserved >= 0 && r.pos != read_)
    throw Fatal(kExitBadData, w.where + ": the input changed while it was simulated");
  r.pos = read_++;
  std::optional<bool> prev_in;
  std::optional<SessionCursor> prev;
  if (it != sessions_.end()) {
    if (!first_turn) {
      prev = it->second;
      r.turn = ++it->second.turns;
      prev_in = prev->in_offsets;
    }
    r.last_turn = plan_->last_turn[r.pos];
  }
  r.id = request_id_for(w, r.turn, w.index);
  const auto [in, kept] = sel_.keep(w, prev_in);
  r.kept = kept;
  if (it != sessions_.end()) {
    if (r.last_turn) sessions_.erase(it);
    else it->second = {r.pos, i, r.turn, in, kept, -1, std::nullopt};
  }
  if (reserved >= 0) {  // its arrival is in the queue already
    if (!kept) throw Fatal(kExitBadData, w.where + ": the input changed while it was simulated");
    return;
  }
  if (!kept) {
    free_slot(i);
    return;
  }
  if (!zero_known_ && w.timestamp_ms) {  // auto offset: the first kept row's timestamp
    zero_ = *w.timestamp_ms;
    zero_known_ = true;
  }
  if (prev && prev->kept) {  // held: its turn's end is passed on only once this row is linked
    Req& p = rq(prev->slot);
    if (p.pos != prev->pos)
      throw Fatal(kExitBadData, w.where +
                                    ": the input changed while it was simulated (a turn appeared after its "
                                    "session's last)");
    r.session_prev = prev->slot;
    p.dependents.push_back(i);
    ++r.pending;
  } else {
    push_arrival(fixed_arrival_ms(r), i);
  }
}

// Streaming: a fresh request slot (a freed one first).
uint32_t Simulation::new_slot() {
  uint32_t i;
  if (!free_slots_.empty()) {
    i = free_slots_.back();
    free_slots_.pop_back();
    reqs_[i] = Req{};
  } else {
    i = static_cast<uint32_t>(reqs_.size());
    rows_.emplace_back();
    reqs_.emplace_back();
  }
  sum_.held_peak = std::max<uint64_t>(sum_.held_peak, reqs_.size() - free_slots_.size());
  return i;
}

// Streaming: a released request's slot, and its row's memory, go to a later row.
void Simulation::free_slot(uint32_t i) {
  rows_[i] = {};
  reqs_[i] = Req{};
  reqs_[i].kept = false;      // skipped by the end-of-run checks until reused
  reqs_[i].pos = UINT64_MAX;  // no row's: a turn linking to it finds the input changed
  free_slots_.push_back(i);
}

void Simulation::push(double t, int kind, uint32_t arg) {
  q_.push(t, kind, arg);
  // A tick can release paused requests into an engine, and the grace period's end cancels what
  // runs: both bound fast-forwarding like an arrival.
  if (kind == kArrival || kind == kAdmit || kind == kTick || kind == kGraceEnd) arrivals_.push(t);
}

void Simulation::count_theoretical(uint32_t i) {
  const auto& row = *rq(i).row;
  if (row.hash_ids.empty() || rq(i).counted) return;
  rq(i).counted = true;
  id_tokens_ += row.input_length;
  id_hits_ += infinite_.add(row.hash_ids, wl_block_, row.input_length, ecfg_.block_size);
}

// records::append_request_end writes without building Json objects.
void Simulation::write_row(const Req& r) {
  const auto& row = *r.row;
  records::RequestEnd e;
  e.event_time_unix_ms = opt_.epoch_unix_ms + static_cast<uint64_t>(std::llround(std::max(r.end, r.start)));
  e.event_source = "simulator";
  e.agent_context.session_id = row.session_id;
  e.agent_context.parent_session_id = row.parent_session_id;
  e.request_id = r.id;
  e.model = opt_.model;
  e.input_tokens = row.input_length;
  e.request_received_ms = opt_.epoch_unix_ms + static_cast<uint64_t>(std::llround(r.start));
  if (r.cancelled) {
    // As the live replay writes a request it cancelled: what had arrived, status cancelled.
    e.output_tokens = r.generated;
    if (r.first >= 0) e.ttft_ms = r.first - r.start;
    e.worker = static_cast<int64_t>(r.worker);
    e.total_time_ms = r.end - r.start;
    e.status = "cancelled";
    e.error = records::RequestEnd::Failure{499, "cancelled", r.error_message};
  } else if (!r.error) {
    e.output_tokens = r.generated;
    e.cached_tokens = r.cached;
    const double ttft = r.first - r.start, total = r.end - r.start;
    e.ttft_ms = ttft;
    e.total_time_ms = total;
    if (r.generated >= 2) e.avg_itl_ms = (total - ttft) / static_cast<double>(r.generated - 1);
    e.kv_hit_rate = row.input_length ? static_cast<double>(r.cached) / static_cast<double>(row.input_length) : 0.0;
    if (ecfg_.tiers.enabled()) {
      const uint64_t lower = r.tier_cached[0] + r.tier_cached[1] + r.tier_cached[2];
      e.cached_tokens_by_tier = std::array<uint64_t, 4>{r.cached - std::min(lower, r.cached), r.tier_cached[0],
                                                        r.tier_cached[1], r.tier_cached[2]};
    }
    e.worker = static_cast<int64_t>(r.worker);
    e.status = "ok";
    if (r.quality)
      e.quality = records::RequestEnd::Quality{r.quality->predicted_cached_tokens, r.quality->avoidable_prefill_tokens,
                                               route::non_max_cause_name(r.quality->cause)};
  } else {
    e.status = "error";
    e.error = records::RequestEnd::Failure{r.error_code, r.error_type, r.error_message};
  }
  if (r.queued_at >= 0) {  // as dyn-route serve writes a request its queue held
    e.router_queue_ms = r.queue_ms;
    e.queue_depth = r.queue_depth;
    e.policy_class = opt_.queue.classes[r.prio.class_index].name;
  }
  if (r.resolved && r.prio.source != route::PrioritySource::kDefault) {
    e.agent_context.priority = r.prio.priority;
    e.agent_context.strict_priority = r.prio.strict_priority;
    e.priority_source = route::priority_source_name(r.prio.source);
  }
  if (!row.hash_ids.empty()) {
    e.hash_ids = row.hash_ids;
    e.block_size = wl_block_;
  }
  if (!row.session_id.empty()) e.turn = r.turn;
  e.binding = route::binding_name(r.binding);
  if (r.rebind_reason != route::RebindReason::kNone) e.rebind_reason = route::rebind_reason_name(r.rebind_reason);
  if (admission_) e.pause_ms = r.pause_ms;
  line_.clear();
  records::append_request_end(line_, e);
  out_.line(line_);
  if (opt_.on_row) opt_.on_row(line_);
}

// Request i ended at t: its row, admission's bookkeeping, its concurrency slot, and the requests
// that waited for it (SPEC 6.1: a later turn starts at this end plus its delay or recorded gap).
void Simulation::complete(uint32_t i, double t) {
  Req& r = rq(i);
  r.end = t;
  last_end_ = std::max(last_end_, t);
  ++sum_.requests;
  if (r.error) ++sum_.errors;
  else {
    sum_.input_tokens += r.row->input_length;
    sum_.cached_tokens += r.cached;
    sum_.output_tokens += r.generated;
    if (r.quality) sum_.staleness.add(r.quality->predicted_cached_tokens, r.cached);
  }
  if (r.demoted && !r.error) schedule_prefetch(r, t);
  if (opt_.write_rows) write_row(r);
  if (opt_.on_request) {
    SimRequest done{r.start, r.first, t, r.generated, r.error};
    opt_.on_request(done);
  }
  if (!opt_.references.empty() && !r.error && r.dispatched >= 0)
    refs_.push_back({r.pos, r.cached, {r.dispatched, t, r.row->input_length, std::move(r.ref_blocks)}});
  if (admission_ && !r.row->session_id.empty()) {
    if (r.error) admission_->on_request_failed(r.row->session_id, t);
    else admission_->on_response(r.row->session_id, r.row->input_length, r.generated, t);
    // The session's last turn ends its program (TERMINATED), as x-dynamo-session-final does live.
    if (r.last_turn) admission_->release_program(r.row->session_id, t);
  }
  // Its concurrency slot goes to the request that has waited longest for one.
  --in_flight_;
  if (!waiting_.empty()) {
    const uint32_t w = std::get<2>(waiting_.top());
    waiting_.pop();
    ++in_flight_;
    push(t + opt_.client_latency_ms, kAdmit, w);
  }
  for (uint32_t d : r.dependents) {
    Req& x = rq(d);
    const auto self = static_cast<int64_t>(i);
    if (self != x.session_prev && self != x.parent_dep) x.deps_done = std::max(x.deps_done, t);
    if (--x.pending > 0) continue;
    // As the live schedule (SPEC 6.1, 6.2.1): after the last of its dependencies ends (the session's
    // previous turn, a parent's request, wait_for requests), the turn's gap (its delay or recorded
    // gap), plus its tool_wait_ms: a tool wait follows a session's previous turn with or without
    // wait_for (before, --sim added it only with wait_for: WEKA tool waits were skipped).
    // A row with dependencies keeps no timestamp of its own, as live.
    double after = x.deps_done, gap = 0;
    if (x.session_prev >= 0) {
      const Req& p = rq(x.session_prev);
      after = std::max(after, p.end);
      gap = session_gap_ms(*x.row, p.row->timestamp_ms);
    } else if (x.parent_dep >= 0) {
      after = std::max(after, rq(x.parent_dep).end);
      gap = x.row->delay_ms.value_or(0.0);
    }
    push(std::max(after + (gap + x.row->tool_wait_ms.value_or(0.0)) / speed_, t), kArrival, d);
  }
  if (in_ && !r.last_turn && !r.row->session_id.empty()) {
    // Streaming, the session's next turn not read yet: its request is scheduled now, as the loop
    // above does for a read one (same rule, from the plan), and takes its row when read.
    auto it = sessions_.find(r.row->session_id);
    const uint32_t next = plan_->next[r.pos];
    if (it != sessions_.end() && it->second.pos == r.pos && next != StreamPlan::kNone && plan_->kept[next]) {
      const uint32_t x = new_slot();
      Req& xr = rq(x);
      xr.pos = next;
      it->second.next_slot = x;
      push(std::max(t + plan_->gap_ms[next] / speed_, t), kArrival, x);
    }
  }
  if (in_) free_slot(i);
}

void Simulation::kick(uint32_t w, double t) {
  Worker& wk = workers_[w];
  if (wk.busy || wk.kicked || !wk.engine->has_work()) return;
  wk.kicked = true;
  push(t, kKick, w);
}

// Routes request i at time t (to r.target when admission placed its program) and hands it to
// the engine. With the router queue (SPEC 3.4, as dyn-route serve): a fresh request waits while
// others do, or when its placement finds every eligible worker (or its pinned one) busy;
// `from_queue`: the queue sends it, and false means its worker was busy after all (r.lane says
// which lane it goes back to).
bool Simulation::dispatch(uint32_t i, double t, bool from_queue) {
  Req& r = rq(i);
  const auto& row = *r.row;
  const uint32_t bs = ecfg_.block_size;
  if (row.text_input && row.hash_ids.empty()) {
    auto toks = tokens::text_to_tokens(*row.text_input);
    hashes_ = tokens::sequence_hashes(tokens::block_hashes(toks, bs));
  } else {
    tokens::sequence_from_ids(row.hash_ids, wl_block_, false, row.input_length, bs, hashes_);
    count_theoretical(i);
  }
  if (!r.resolved) {
    // The workload's priority is what a harness puts in nvext.agent_hints.priority (SPEC 3.4).
    route::PriorityHints body;
    body.priority = row.priority;
    r.prio = resolver_.resolve({}, body, row.session_id, row.parent_session_id, r.last_turn);
    r.resolved = true;
  }
  if (queue_ && !from_queue && !queue_->empty()) {  // nobody overtakes the queue
    r.lane = r.target;
    enqueue(i, t, false);
    return true;
  }
  route::RouteRequest rr;
  rr.session_id = row.session_id;
  rr.parent_session_id = row.parent_session_id;
  rr.sequence_hashes = hashes_;
  rr.tokens = row.input_length;
  rr.wait_for_initializing = false;
  rr.worker = r.target;
  rr.worker_from_admission = r.target.has_value();
  uint64_t busy_worker = 0;
  rr.refuse_busy = queue_.has_value();
  rr.busy_worker = &busy_worker;
  auto placed = router_.place(rr);
  if (!placed) {
    const int code = placed.error().exit_code;
    if (code == route::kPlaceAllBusy || code == route::kPlacePinnedBusy) {
      const bool pinned = code == route::kPlacePinnedBusy;
      r.lane = pinned ? std::optional<uint64_t>(busy_worker) : r.target;
      if (from_queue) return false;
      enqueue(i, t, pinned);
      return true;
    }
    r.error = true;
    r.error_message = placed.error().message;
    complete(i, t);
    return true;
  }
  if (r.queued_at >= 0) r.queue_ms = t - r.queued_at;
  if (uses_las_ && !row.session_id.empty())
    queue_->record_service(row.session_id, row.input_length - std::min(placed->cached_tokens(), row.input_length));
  r.worker = placed->worker();
  r.binding = placed->binding();
  r.rebind_reason = placed->rebind_reason();
  r.quality = placed->quality();
  engine::RequestSpec spec;
  spec.id = i;
  spec.prompt_tokens = row.input_length;
  if (!opt_.references.empty()) {
    r.dispatched = t;
    r.ref_blocks = hashes_;
  }
  spec.block_hashes = std::move(hashes_);  // the router keeps its own copy; the span is no longer read
  spec.max_output_tokens = std::max<uint64_t>(1, row.output_length.value_or(1));
  if (!row.session_id.empty()) spec.session = engine::session_tag(row.session_id);
  spec.session_final = r.last_turn;
  if (policies_) policy_hints(r, placed->cached_tokens(), spec, t);
  // The resolved priority is Dynamo's (higher is more important); as Dynamo does for each
  // engine, it is converted to the engine's polarity (SPEC 8).
  if (r.prio.priority != 0) {
    const int64_t p = r.prio.priority;
    spec.priority = workers_[r.worker].engine->config().low_priority_values_first ? -p : p;
  }
  auto added = workers_[r.worker].engine->add(std::move(spec));
  if (!added) {
    placed->fail();
    r.error = true;
    r.error_message = added.error().message;
    complete(i, t);
    return true;
  }
  placed->commit();
  r.placement = std::move(*placed);
  kick(static_cast<uint32_t>(r.worker), t);
  return true;
}

// The KV policies' hints for request r, placed on r.worker at t with `predicted_cached` tokens
// the router expects cached (SPEC 6.4): its own hint in `spec`, a spawn's to the parent's worker.
void Simulation::policy_hints(Req& r, uint64_t predicted_cached, engine::RequestSpec& spec, double t) {
  const records::WorkloadRow& row = *r.row;
  if (row.session_id.empty()) return;
  if (row.tool_wait_ms) policies_->observe_tool_wait(row.session_id, *row.tool_wait_ms / speed_ / 1000.0);
  PolicySession& ps = policy_sessions_[row.session_id];
  if (r.turn == 0) {
    ps.shared_blocks = predicted_cached / ecfg_.block_size;
    auto parent = policy_sessions_.find(row.parent_session_id);
    if (parent != policy_sessions_.end())
      if (auto h = policies_->spawn_hint(row.parent_session_id))
        workers_[parent->second.worker].engine->apply_hint(policy_hint(*h), t);
  }
  ps.worker = r.worker;
  ++ps.turns;
  const uint64_t demotes = policies_->counts().tool_demotes;
  if (auto h = policies_->request_hint(row.session_id, r.last_turn, r.ends_in_tool, ps.shared_blocks,
                                       opt_.kv_policy.demote_prefetch ? copy_ms(r) / 1000.0 : 0))
    spec.hint = std::make_shared<const engine::KvHint>(policy_hint(*h));
  r.demoted = policies_->counts().tool_demotes > demotes;
  if (r.last_turn) policy_sessions_.erase(row.session_id);
}

// demote-prefetch: the time r's prompt blocks take alone on the G2 -> G1 link (ms; SPEC 8.7).
double Simulation::copy_ms(const Req& r) const { return policies_->copy_ms(r.row->input_length, ecfg_.block_size); }

// demote-prefetch (SPEC 6.4): r ended in a tool call at t and its blocks went to G2; they come
// back to G1 before the session's predicted return, its expected tool wait from t, less twice
// their copy time (the copy lands before the return).
void Simulation::schedule_prefetch(const Req& r, double t) {
  const std::string& s = r.row->session_id;
  auto ps = policy_sessions_.find(s);
  if (ps == policy_sessions_.end()) return;
  const double wait_ms = policies_->expected_tool_wait_s(s) * 1000.0;
  prefetches_.push_back({s, ps->second.worker, ps->second.turns});
  push(t + kvpolicy::KvPolicies::prefetch_delay_ms(wait_ms, copy_ms(r)), kPrefetch,
       static_cast<uint32_t>(prefetches_.size() - 1));
}

// A planned prefetch is sent unless the session came back first (or ended).
void Simulation::on_prefetch(const Event& ev) {
  const PlannedPrefetch& p = prefetches_[ev.arg];
  auto ps = policy_sessions_.find(p.session);
  if (ps == policy_sessions_.end() || ps->second.turns != p.turns) return;
  // An idle engine lands the copy at its next step, before it admits the returning request.
  if (auto h = policies_->prefetch_hint(p.session)) workers_[p.worker].engine->apply_hint(policy_hint(*h), ev.t_ms);
}

// Request i waits in the router queue from t (its lane in r.lane): 429 when the queue is full,
// else 503 at the time limit unless the queue sends it first. Its cost is fixed now (SPEC 3.4).
void Simulation::enqueue(uint32_t i, double t, bool pinned) {
  Req& r = rq(i);
  const char* type = pinned ? "pinned_worker_overloaded" : "all_workers_overloaded";
  if (queue_->size() >= opt_.queue.max_requests) {
    reject(i, t, 429, type,
           fmt::format("the router queue is full ({} requests waiting, --queue-size {})", queue_->size(),
                       opt_.queue.max_requests));
    return;
  }
  route::QueueItem item;
  item.id = i;
  item.class_index = r.prio.class_index;
  item.strict_priority = r.prio.strict_priority;
  item.priority = r.prio.priority;
  const uint64_t tokens = r.row->input_length;
  item.cost = std::max<uint64_t>(1, tokens - std::min(router_.predicted_cached_tokens(hashes_, tokens), tokens));
  item.arrival_ms = t;
  if (uses_las_) item.session = r.row->session_id;
  item.worker = r.lane;
  r.queued_at = t;
  r.queue_depth = queue_->size() + 1;
  r.queue_deadline = t + opt_.queue.timeout_ms;
  queue_->push(item);
  push(r.queue_deadline, kQueueTimeout, i);
}

// Request i ends with the router's answer `code` (it never reached a worker).
void Simulation::reject(uint32_t i, double t, int code, const char* type, std::string message) {
  Req& r = rq(i);
  r.error = true;
  r.error_code = code;
  r.error_type = type;
  r.error_message = std::move(message);
  if (r.queued_at >= 0) r.queue_ms = t - r.queued_at;
  complete(i, t);
}

// Sends waiting requests in policy order while workers can take them (after every step's end:
// first tokens and finished requests are what lowers a worker's load).
void Simulation::pump(double t) {
  if (!queue_) return;
  for (size_t guard = queue_->size() + 1; guard > 0 && !queue_->empty(); --guard) {
    const route::Availability avail = router_.availability();
    auto item = queue_->pop([&](std::optional<uint64_t> w) { return w ? avail.can_take(*w) : avail.any(); });
    if (!item) break;
    if (dispatch(static_cast<uint32_t>(item->id), t, true)) continue;
    // Its worker was busy after all: back to its place; a pinned one's lane is skipped from now.
    Req& r = rq(item->id);
    queue_->requeue(*item, r.lane);
    if (r.lane == item->worker) break;
  }
}

// A queued request's time limit (SPEC 3.4): 503 unless it was sent.
void Simulation::on_queue_timeout(const Event& ev) {
  Req& r = rq(ev.arg);
  if (r.queue_deadline != ev.t_ms || !queue_->remove(ev.arg)) return;  // sent (or its slot reused)
  const bool pinned = r.lane && !router_.availability().can_take(*r.lane);
  reject(ev.arg, ev.t_ms, 503, pinned ? "pinned_worker_overloaded" : "all_workers_overloaded",
         fmt::format("waited {:.1f} s in the router queue (--queue-timeout-secs {:g}): {}",
                     (ev.t_ms - r.queued_at) / 1000.0, opt_.queue.timeout_ms / 1000.0,
                     pinned ? fmt::format("its worker {} is over a busy threshold", *r.lane)
                            : std::string("every eligible worker is over a busy threshold")));
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
  while (more_ && !rq(ev.arg).row) read_one();  // streaming: a turn scheduled before its row was read
  if (ev.kind == kArrival) {                    // a kAdmit request holds the slot its predecessor freed
    if (cap_ && in_flight_ >= cap_) {
      waiting_.emplace(ev.t_ms, rq(ev.arg).pos, ev.arg);
      return;
    }
    ++in_flight_;
  }
  Req& r = rq(ev.arg);
  r.start = ev.t_ms;
  if (first_start_ < 0) first_start_ = ev.t_ms;
  if (admission_ && !r.row->session_id.empty()) {
    auto d = admission_->admit(r.row->session_id, r.row->parent_session_id, r.row->input_length, ev.t_ms);
    if (!d.admitted) {  // paused program: released by a later tick
      parked_.emplace(d.ticket, ev.arg);
      return;
    }
    if (d.worker >= 0) r.target = static_cast<uint64_t>(d.worker);
  }
  dispatch(ev.arg, ev.t_ms);
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
    rq(i).pause_ms = rel.waited_ms;
    if (rel.worker >= 0) rq(i).target = static_cast<uint64_t>(rel.worker);
    dispatch(i, ev.t_ms);
  }
  while (more_ && q_.empty()) read_one();  // streaming: whether any request is still to come
  if (!q_.empty() || !parked_.empty()) push(ev.t_ms + tick_ms_, kTick, 0);
}

// --benchmark-grace-period is over (AIPerf): nothing more is sent, and every request still in
// flight (in an engine, or paused by admission control) is cancelled and written as cancelled;
// it counts apart from the requests and errors and does not stretch the simulated duration.
void Simulation::on_grace_end(const Event& ev) {
  arrivals_.pop();
  stopped_ = true;
  for (size_t i = 0; i < reqs_.size(); ++i) {
    Req& r = rq(i);
    if (!r.kept || r.start < 0 || r.end >= 0 || r.cancelled) continue;
    bool parked = false;
    for (auto it = parked_.begin(); it != parked_.end(); ++it)
      if (it->second == i) {
        parked_.erase(it);
        parked = true;
        break;
      }
    if (!parked && !(queue_ && queue_->remove(i))) workers_[r.worker].engine->cancel(i);
    r.placement.finish();  // committed: its load and lease end; otherwise a cancelled dispatch
    r.cancelled = true;
    r.end = ev.t_ms;
    r.error_message =
        fmt::format("not finished {:g} s after --benchmark-duration (--benchmark-grace-period)", opt_.grace_s);
    ++sum_.cancelled;
    write_row(r);
  }
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
    auto next_change = [&] { return has_deps_ ? q_.next_ms() : (arrivals_.empty() ? INFINITY : arrivals_.top()); };
    double bound = next_change();
    // Streaming: the rows due by then are read first, so the bound is the one the whole workload gives.
    while (more_ && next_read_ms() <= bound) {
      read_one();
      bound = next_change();
    }
    uint64_t m = k;
    if (std::isfinite(bound)) m = wk.engine->decode_steps_within(k, bound - ev.t_ms);
    if (m >= 2) {
      const double span = wk.engine->fast_forward(m);
      wk.pending.clear();
      wk.busy = true;
      push(ev.t_ms + span, kStepEnd, ev.arg);
      return;
    }
  }
  wk.engine->step(wk.pending, ev.t_ms);
  wk.busy = true;
  push(ev.t_ms + wk.pending.duration_ms, kStepEnd, ev.arg);
}

// A step's outputs become visible: KV events to the router's index, tokens to their requests.
void Simulation::on_step_end(const Event& ev) {
  Worker& wk = workers_[ev.arg];
  wk.busy = false;
  if (opt_.router.kv_events) {
    // The simulated engine's blocks are router sequence hashes on the device tier already: they
    // enter the index through the feed that translated events take in serve and decide.
    kv_updates_.clear();
    for (auto& e : wk.engine->take_kv_events()) {
      using K = kvevents::IndexUpdate::Kind;
      kv_updates_.push_back(kvevents::IndexUpdate{e.kind == engine::KvEvent::Kind::kStored    ? K::kStored
                                                  : e.kind == engine::KvEvent::Kind::kRemoved ? K::kRemoved
                                                                                              : K::kCleared,
                                                  std::string(engine::tier_medium(e.tier)), std::move(e.block_hashes)});
    }
    kvevents::WorkerFeed::apply_updates(
        kv_updates_, [&](std::span<const route::KvEvent> es) { router_.apply_kv_events(ev.arg, es); });
  }
  for (const engine::TokenOutput& o : wk.pending.outputs) {
    Req& r = rq(o.id);
    if (r.cancelled) continue;  // cancelled while this step ran: its tokens reach nobody
    r.generated = o.generated;
    r.cached = o.cached_tokens;
    r.tier_cached[0] = o.g2_tokens;
    r.tier_cached[1] = o.g3_tokens;
    r.tier_cached[2] = o.g4_tokens;
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
  pump(ev.t_ms);
  // Start the next step now (after arrivals at this instant, which sort before kicks).
  kick(ev.arg, ev.t_ms);
}

SimSummary Simulation::run() {
  if (in_) {
    has_deps_ = cap_ > 0 || plan_->has_deps;
    const replay::ScheduleOptions& so = opt_.schedule;
    if (so.start_offset_ms) zero_ = *so.start_offset_ms;
    else zero_known_ = !so.auto_offset;
    more_ = in_->next(ahead_);
  } else {
    index_requests();
    select_rows();
    link_dependencies();
    schedule_arrivals();
  }
  if (admission_) push(tick_ms_, kTick, 0);
  if (std::isfinite(grace_end_)) push(grace_end_, kGraceEnd, 0);
  for (;;) {
    if (more_) {  // streaming: the rows due by the next event first
      if (q_.empty()) {
        read_one();
        continue;
      }
      read_through(q_.next_ms());
    }
    if (q_.empty()) break;
    const Event ev = q_.pop();
    switch (ev.kind) {
      case kArrival:
      case kAdmit: on_send(ev); break;
      case kTick: on_tick(ev); break;
      case kGraceEnd: on_grace_end(ev); break;
      case kQueueTimeout: on_queue_timeout(ev); break;
      case kKick: on_kick(ev); break;
      case kPrefetch: on_prefetch(ev); break;
      default: on_step_end(ev); break;
    }
  }
  if (in_) {
    sum_.streamed = true;
    sum_.outside_offsets = sel_.outside;
    sum_.over_count = sel_.over;
  }
  // Requests still held (all of them unless streaming): the kept rows never dispatched.
  for (size_t i = 0; i < reqs_.size(); ++i)
    if (rq(i).kept) count_theoretical(static_cast<uint32_t>(i));
  sum_.quality = router_.stats().quality;
  if (policies_) sum_.kv_policy = policies_->counts();
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
  std::sort(refs_.begin(), refs_.end(), [](const RefRow& a, const RefRow& b) { return a.i < b.i; });  // row order
  std::vector<tokens::ReferenceRequest> v;
  uint64_t input = 0, cached = 0;
  for (RefRow& r : refs_) {
    input += r.req.input_tokens;
    cached += r.cached;
    v.push_back(std::move(r.req));
  }
  sum.reference_blocks = static_cast<uint64_t>(opt_.workers) * ecfg_.num_blocks;
  auto share = [&](uint64_t tokens) { return input ? static_cast<double>(tokens) / static_cast<double>(input) : 0.0; };
  sum.reference_run_hit = share(cached);
  for (tokens::ReferencePolicy p : opt_.references)
    sum.references.push_back({p, share(tokens::reference_hit_tokens(v, sum.reference_blocks, ecfg_.block_size, p))});
}

// The first pass of run_sim_files: last turns, whether any row waits for its session, and
// whether the input can stream; the reader reports every bad row on the way.
StreamPlan plan_stream(records::WorkloadReader& in, const SimOptions& opt) {
  RowSelector sel{opt.schedule, true};
  std::unordered_map<std::string, SessionCursor> sessions;
  StreamPlan p;
  records::WorkloadRow row;
  while (in.next(row)) {
    const auto i = static_cast<uint32_t>(p.last_turn.size());
    p.last_turn.push_back(false);
    p.next.push_back(StreamPlan::kNone);
    if (!row.wait_for.empty()) p.streamable = false;
    std::optional<bool> prev_in;
    bool prev_kept = false;
    double gap = 0;
    SessionCursor* cur = nullptr;
    if (!row.session_id.empty()) {
      auto [it, fresh] = sessions.try_emplace(row.session_id);
      cur = &it->second;
      if (!fresh) {
        prev_in = cur->in_offsets;
        prev_kept = cur->kept;
        p.last_turn[cur->pos] = false;
        p.next[cur->pos] = i;
        gap = session_gap_ms(row, cur->timestamp_ms) + row.tool_wait_ms.value_or(0.0);  // as Simulation::complete
      }
      p.last_turn[i] = true;
    }
    p.gap_ms.push_back(gap);
    const auto [in_offsets, kept] = sel.keep(row, prev_in);
    p.kept.push_back(kept);
    if (prev_in && prev_kept && kept) p.has_deps = true;
    if (cur) *cur = {i, 0, 0, in_offsets, kept, -1, row.timestamp_ms};
  }
  if (!in.dynamo().empty() || !in.in_time_order()) p.streamable = false;
  return p;
}

// One timed run; the yardsticks after it (not the simulator's speed).
SimSummary simulate(const records::Workload* wl, records::WorkloadReader* in, const StreamPlan* plan,
                    uint32_t block_size, const SimOptions& opt, io::Output& out) {
  const auto wall0 = std::chrono::steady_clock::now();
  Simulation sim(wl, in, plan, block_size, opt, out);
  SimSummary sum = sim.run();
  sum.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  sim.run_references(sum);
  return sum;
}

// A loaded workload the simulator can run: Fatal(kExitBadData) for a rejected one, or zero usable
// rows out of a non-empty input (the wrong format, not an empty run: issue 21.8).
void check_workload(const records::Workload& wl, size_t rows, const std::vector<std::string>& paths) {
  if (!wl.ok())
    throw Fatal(kExitBadData, fmt::format("workload rejected ({} errors); nothing simulated", wl.errors.size()));
  if (wl.dataset_type == records::DatasetType::kMultiTurn) throw Fatal(kExitUsage, kMultiTurnSim);
  if (rows == 0 && wl.skipped_rows > 0) throw Fatal(kExitBadData, records::no_workload_rows_message(paths));
}

}  // namespace

SimSummary run_sim_files(const std::vector<std::string>& paths, const records::WorkloadOptions& wo,
                         const SimOptions& opt, io::Output& out) {
  const bool files = !paths.empty() && std::none_of(paths.begin(), paths.end(), [](auto& p) { return p == "-"; });
  records::WorkloadOptions quiet = wo;
  // A random pool is drawn from as a whole (load_workload), never streamed.
  if (files && opt.schedule.mode == replay::LoadMode::kFixedSchedule &&
      wo.dataset_type != records::DatasetType::kRandomPool) {
    std::optional<records::WorkloadReader> first(std::in_place, paths, wo);
    const StreamPlan plan = plan_stream(*first, opt);
    if (plan.streamable) {
      check_workload(first->meta(), plan.last_turn.size(), paths);
      const uint32_t block_size = first->meta().block_size;
      // The first pass's session checks and read buffers grow with the trace's sessions (12 of
      // the 36 MB peak on 16 copies of the sessionized Mooncake trace): gone before the run.
      first.reset();
      records::WorkloadReader in(paths, wo, /*second_pass=*/true);
      return simulate(nullptr, &in, &plan, block_size, opt, out);
    }
    quiet.quiet = true;  // the first pass printed what the reader finds; the load adds the rest
  }
  const records::Workload wl = records::load_workload(paths.empty() ? std::vector<std::string>{"-"} : paths, quiet);
  check_workload(wl, wl.rows.size(), paths);
  return run_sim(wl, opt, out);
}

SimSummary run_sim(const records::Workload& wl, const SimOptions& opt, io::Output& out) {
  return simulate(&wl, nullptr, nullptr, wl.block_size, opt, out);
}

}  // namespace dyn::replay
