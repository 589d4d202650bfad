// The ThunderAgent program scheduler (SPEC 9): working-set accounting per worker, pause at tool
// boundaries, best-fit-decreasing resume, forced resume, and the blocking wait of the live server.
#include "dyn/route/admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>

#include "dyn/base/error.h"

namespace dyn::route {

const char* to_string(AdmissionMode m) { return name_in(kAdmissionModes, m); }
const char* to_string(ProgramStatus s) { return s == ProgramStatus::kReasoning ? "reasoning" : "acting"; }
const char* to_string(ProgramLifecycle l) {
  switch (l) {
    case ProgramLifecycle::kActive: return "active";
    case ProgramLifecycle::kPaused: return "paused";
    default: return "terminated";
  }
}

std::optional<AdmissionMode> parse_admission_mode(const std::string& s) { return parse_in(kAdmissionModes, s); }

std::string AdmissionConfig::validate() const {
  auto frac = [](double v) { return std::isfinite(v) && v >= 0.0 && v <= 1.0; };
  auto got = [](double v) { return fmt::format(", got {}", v); };  // the value the user gave
  if (!frac(pause_threshold)) return "--pause-threshold must be in [0, 1]" + got(pause_threshold);
  if (!frac(pause_target) || pause_target > pause_threshold)
    return "--pause-target must be in [0, --pause-threshold]" + got(pause_target);
  if (!frac(soft_demote_threshold) || soft_demote_threshold > pause_threshold)
    return "--soft-demote-threshold must be in [0, --pause-threshold]" + got(soft_demote_threshold);
  if (!frac(resume_hysteresis) || resume_hysteresis > pause_threshold)
    return "--resume-hysteresis must be in [0, --pause-threshold]" + got(resume_hysteresis);
  if (!(acting_token_weight > 0) || !std::isfinite(acting_token_weight))
    return "--acting-token-weight must be > 0" + got(acting_token_weight);
  if (!(acting_decay_tau_s > 0) || !std::isfinite(acting_decay_tau_s))
    return "--acting-decay-tau-seconds must be > 0" + got(acting_decay_tau_s);
  if (!(scheduler_interval_s > 0) || !std::isfinite(scheduler_interval_s))
    return "--scheduler-interval-seconds must be > 0" + got(scheduler_interval_s);
  if (!(resume_timeout_s > 0) || !std::isfinite(resume_timeout_s))
    return "--resume-timeout-seconds must be > 0" + got(resume_timeout_s);
  if (!std::isfinite(soft_demote_priority_jump_s) || !std::isfinite(resume_priority_boost_s))
    return "priority jumps must be finite";
  return "";
}

AdmissionController::AdmissionController(AdmissionConfig config, std::vector<AdmissionWorker> workers)
    : config_(config) {
  if (auto e = config_.validate(); !e.empty()) throw Fatal(kExitUsage, e);
  set_workers(std::move(workers));
}

AdmissionController::~AdmissionController() { shutdown(); }

void AdmissionController::set_workers(std::vector<AdmissionWorker> workers) {
  std::sort(workers.begin(), workers.end(), [](auto& a, auto& b) { return a.id < b.id; });
  std::lock_guard lk(mu_);
  workers_ = std::move(workers);
}

bool AdmissionController::worker_live(int id) const {
  return std::any_of(workers_.begin(), workers_.end(), [&](auto& w) { return w.id == id; });
}

uint64_t AdmissionController::capacity(int id) const {
  for (auto& w : workers_)
    if (w.id == id) return w.capacity_tokens;
  return 0;
}

// Pause side (SPEC 9): REASONING tokens count fully, ACTING tokens x acting_token_weight, plus a
// decode buffer per program.
double AdmissionController::pause_side_used(int id, double /*now_ms*/) const {
  double used = 0;
  for (auto& [_, p] : programs_) {
    if (p.lifecycle != ProgramLifecycle::kActive || p.worker != id) continue;
    double t = static_cast<double>(p.token_total);
    if (p.status == ProgramStatus::kActing) t *= config_.acting_token_weight;
    used += t + static_cast<double>(config_.buffer_tokens_per_program);
  }
  return used;
}

// Resume side: an ACTING program's tokens decay as 2^(-t/tau) with t the seconds since it turned
// ACTING -- the longer a tool runs, the likelier the engine has already evicted its blocks, so
// resuming others onto that space is optimistic but usually right (ThunderAgent).
double AdmissionController::program_weight_resume(const Program& p, double now_ms) const {
  double t = static_cast<double>(p.token_total);
  if (p.status == ProgramStatus::kActing) {
    double idle_s = std::max(0.0, (now_ms - p.acting_since_ms) / 1000.0);
    t *= std::exp2(-idle_s / config_.acting_decay_tau_s);
  }
  return t + static_cast<double>(config_.buffer_tokens_per_program);
}

double AdmissionController::resume_side_used(int id, double now_ms) const {
  double used = 0;
  for (auto& [_, p] : programs_)
    if (p.lifecycle == ProgramLifecycle::kActive && p.worker == id) used += program_weight_resume(p, now_ms);
  return used;
}

bool AdmissionController::any_waiting_paused() const {
  for (auto& [_, p] : programs_)
    if (p.lifecycle == ProgramLifecycle::kPaused && !p.waiting.empty()) return true;
  return false;
}

int AdmissionController::least_used_with_room(uint64_t tokens, double now_ms) const {
  int best = -1;
  double best_util = std::numeric_limits<double>::infinity();
  double need = static_cast<double>(tokens + config_.buffer_tokens_per_program);
  double bound = config_.pause_threshold - config_.resume_hysteresis;
  for (auto& w : workers_) {
    if (w.capacity_tokens == 0) continue;
    double cap = static_cast<double>(w.capacity_tokens);
    double used = resume_side_used(w.id, now_ms);
    if (used + need > bound * cap) continue;
    double util = used / cap;
    if (util < best_util) best = w.id, best_util = util;
  }
  return best;
}

int AdmissionController::most_headroom(double now_ms) const {
  int best = -1;
  double best_room = -std::numeric_limits<double>::infinity();
  for (auto& w : workers_) {
    double room = static_cast<double>(w.capacity_tokens) - resume_side_used(w.id, now_ms);
    if (room > best_room) best = w.id, best_room = room;
  }
  return best;
}

void AdmissionController::pause(Program& p, double now_ms) {
  p.lifecycle = ProgramLifecycle::kPaused;
  if (p.worker) p.last_worker = p.worker;
  p.worker.reset();
  p.marked_for_pause = false;
  p.soft_demoted = false;
  p.paused_since_ms = now_ms;
  p.pause_order = next_pause_order_++;
  ++p.pause_count;
  ++stats_.pauses;
}

void AdmissionController::activate(Program& p, int worker, double now_ms, bool forced, TickReport* report) {
  bool was_paused = p.lifecycle == ProgramLifecycle::kPaused;
  if (was_paused) p.paused_ms_total += now_ms - p.paused_since_ms;
  p.lifecycle = ProgramLifecycle::kActive;
  p.worker = worker;
  p.last_worker = worker;
  if (was_paused) {
    ++stats_.resumes;
    p.resume_boost = true;
    if (report) report->resumed.push_back(p.id);
  }
  if (!p.waiting.empty()) p.status = ProgramStatus::kReasoning;
  for (auto& [ticket, since] : p.waiting) {
    AdmissionRelease r{ticket, p.id, worker, now_ms - since, forced, jump_for(p)};
    ++p.inflight;
    ++stats_.released;
    stats_.wait_ms_total += r.waited_ms;
    if (forced) ++stats_.forced;
    if (blocking_.count(ticket)) done_[ticket] = r;
    if (report) report->released.push_back(r);
  }
  p.waiting.clear();
}

double AdmissionController::jump_for(Program& p) {
  if (p.resume_boost) {
    p.resume_boost = false;
    return config_.resume_priority_boost_s;
  }
  return p.soft_demoted ? config_.soft_demote_priority_jump_s : 0.0;
}

AdmitDecision AdmissionController::admit(const std::string& program, const std::string& parent, uint64_t prompt_tokens,
                                         double now_ms) {
  AdmitDecision d;
  if (!config_.enabled()) {
    d.admitted = true;
    d.reason = "disabled";
    return d;
  }
  std::lock_guard lk(mu_);
  return admit_locked(program, parent, prompt_tokens, now_ms);
}

AdmitDecision AdmissionController::admit_locked(const std::string& program, const std::string& parent,
                                                uint64_t prompt_tokens, double now_ms) {
  AdmitDecision d;
  auto [it, fresh] = programs_.try_emplace(program);
  Program& p = it->second;
  if (fresh) p.id = program;
  if (!parent.empty()) p.parent = parent;
  ++p.step_count;
  p.status = ProgramStatus::kReasoning;
  p.tools_running = 0;  // a new request means its tools returned, whatever events were lost
  p.token_total = std::max(p.token_total, prompt_tokens);

  auto wait = [&](const char* reason) {
    if (p.lifecycle != ProgramLifecycle::kPaused) {
      p.lifecycle = ProgramLifecycle::kPaused;
      p.paused_since_ms = now_ms;
      p.pause_order = next_pause_order_++;
    }
    d.ticket = next_ticket_++;
    p.waiting.emplace_back(d.ticket, now_ms);
    ++stats_.waited;
    d.reason = reason;
    return d;
  };

  if (workers_.empty()) {  // nothing to account against: let the router decide
    ++p.inflight;
    d.admitted = true;
    d.reason = "no_workers";
    return d;
  }
  if (!fresh && p.lifecycle == ProgramLifecycle::kPaused) return wait("paused");
  if (!fresh && p.lifecycle == ProgramLifecycle::kActive && p.worker) {
    if (!worker_live(*p.worker)) {
      // Stale assignment (worker gone or unhealthy): re-place, never fail (SPEC 9).
      p.worker = most_headroom(now_ms);
      p.last_worker = p.worker;
      d.reassigned = true;
      ++stats_.reassigned;
    }
    ++p.inflight;
    ++stats_.admitted_immediately;
    d.admitted = true;
    d.worker = *p.worker;
    d.priority_jump_s = jump_for(p);
    d.reason = d.reassigned ? "reassigned" : "active";
    return d;
  }
  // A new program (or an ACTIVE one that never got a worker).
  if (any_waiting_paused()) return wait("behind_paused");
  int w = least_used_with_room(p.token_total, now_ms);
  if (w < 0) return wait("no_room");
  p.lifecycle = ProgramLifecycle::kActive;
  p.worker = w;
  p.last_worker = w;
  ++p.inflight;
  ++stats_.admitted_immediately;
  d.admitted = true;
  d.worker = w;
  d.priority_jump_s = jump_for(p);
  d.reason = "new";
  return d;
}

void AdmissionController::on_response(const std::string& program, uint64_t prompt_tokens, uint64_t completion_tokens,
                                      double now_ms) {
  if (!config_.enabled()) return;
  std::lock_guard lk(mu_);
  auto it = programs_.find(program);
  if (it == programs_.end()) return;  // released (session_final) while in flight
  Program& p = it->second;
  if (prompt_tokens + completion_tokens > 0) p.token_total = prompt_tokens + completion_tokens;
  if (p.inflight > 0) --p.inflight;
  if (p.inflight > 0 || p.lifecycle != ProgramLifecycle::kActive) return;
  p.status = ProgramStatus::kActing;
  p.acting_since_ms = now_ms;
  if (p.marked_for_pause) pause(p, now_ms);  // the tool boundary it was marked for
}

void AdmissionController::on_request_failed(const std::string& program, double now_ms) {
  on_response(program, 0, 0, now_ms);
}

bool AdmissionController::on_tool_event(const std::string& program, bool running, double now_ms) {
  if (!config_.enabled()) return false;
  std::lock_guard lk(mu_);
  auto it = programs_.find(program);
  if (it == programs_.end() || it->second.lifecycle == ProgramLifecycle::kTerminated) return false;
  Program& p = it->second;
  if (running) {
    ++p.tools_running;
    if (p.inflight > 0) return true;  // a late event: the next request is already under way
    if (p.status != ProgramStatus::kActing) {
      p.status = ProgramStatus::kActing;
      p.acting_since_ms = now_ms;
    }
    if (p.marked_for_pause && p.lifecycle == ProgramLifecycle::kActive) pause(p, now_ms);
    return true;
  }
  if (p.tools_running > 0) --p.tools_running;
  if (p.tools_running == 0 && p.inflight == 0) p.status = ProgramStatus::kReasoning;
  return true;
}

std::vector<AdmissionRelease> AdmissionController::release_program(const std::string& program, double now_ms) {
  if (!config_.enabled()) return {};
  std::lock_guard lk(mu_);
  auto it = programs_.find(program);
  if (it == programs_.end()) return {};
  Program& p = it->second;
  TickReport r;
  if (!p.waiting.empty()) {
    int w = p.last_worker && worker_live(*p.last_worker) ? *p.last_worker : most_headroom(now_ms);
    activate(p, w, now_ms, false, &r);
    cv_.notify_all();
  }
  programs_.erase(it);
  return std::move(r.released);
}

bool AdmissionController::withdraw(const std::string& program, uint64_t ticket, double now_ms) {
  std::lock_guard lk(mu_);
  auto it = programs_.find(program);
  if (it == programs_.end()) return false;
  Program& p = it->second;
  auto w = std::find_if(p.waiting.begin(), p.waiting.end(), [&](const auto& t) { return t.first == ticket; });
  if (w == p.waiting.end()) return false;
  p.waiting.erase(w);
  if (p.waiting.empty() && p.inflight == 0) {
    p.status = ProgramStatus::kActing;
    p.acting_since_ms = now_ms;
  }
  return true;
}

TickReport AdmissionController::tick(double now_ms) {
  TickReport report;
  report.now_ms = now_ms;
  if (!config_.enabled()) return report;
  std::lock_guard lk(mu_);
  ++stats_.ticks;
  const double buffer = static_cast<double>(config_.buffer_tokens_per_program);

  // Forced resume: a request that waited resume_timeout_s goes to the worker with most headroom,
  // whatever the pressure (bounds starvation, SPEC 9).
  if (!workers_.empty()) {
    for (auto& [_, p] : programs_) {
      if (p.lifecycle != ProgramLifecycle::kPaused || p.waiting.empty()) continue;
      double oldest = p.waiting.front().second;
      if (now_ms - oldest >= config_.resume_timeout_s * 1000.0)
        activate(p, most_headroom(now_ms), now_ms, true, &report);
    }
  }

  // (1) Soft demotion: programs on workers in [soft_demote_threshold, pause_threshold).
  for (auto& w : workers_) {
    if (w.capacity_tokens == 0) continue;
    double util = pause_side_used(w.id, now_ms) / static_cast<double>(w.capacity_tokens);
    bool band = util >= config_.soft_demote_threshold && util < config_.pause_threshold;
    for (auto& [id, p] : programs_) {
      if (p.lifecycle != ProgramLifecycle::kActive || p.worker != w.id) continue;
      p.soft_demoted = band;
      if (band) report.demoted.push_back(id);
    }
  }

  // (2) Resume: waiting REASONING programs with more than one step first, then new programs,
  // then paused ACTING ones; smallest first within a class, oldest pause on ties. Selection stops
  // at the first program that does not fit the total headroom (no overtaking), then the selected
  // set is packed best-fit-decreasing into per-worker headroom below
  // (pause_threshold - resume_hysteresis) x capacity.
  if (!workers_.empty()) {
    std::vector<std::tuple<int, uint64_t, uint64_t, Program*>> cand;
    for (auto& [_, p] : programs_) {
      if (p.lifecycle != ProgramLifecycle::kPaused) continue;
      int cls = p.waiting.empty() ? 2 : (p.step_count > 1 ? 0 : 1);
      cand.emplace_back(cls, p.token_total, p.pause_order, &p);
    }
    std::sort(cand.begin(), cand.end(), [](auto& a, auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    std::vector<std::pair<int, double>> room;  // (worker, headroom tokens)
    std::map<int, double> pause_room;          // pause-side room below pause_threshold
    double total = 0;
    double bound = config_.pause_threshold - config_.resume_hysteresis;
    for (auto& w : workers_) {
      double cap = static_cast<double>(w.capacity_tokens);
      double h = std::max(0.0, bound * cap - resume_side_used(w.id, now_ms));
      room.emplace_back(w.id, h);
      pause_room[w.id] = config_.pause_threshold * cap - pause_side_used(w.id, now_ms);
      total += h;
    }
    std::vector<Program*> selected;
    for (auto& c : cand) {
      Program* p = std::get<3>(c);
      double need = static_cast<double>(p->token_total) + buffer;
      if (need > total) break;
      total -= need;
      selected.push_back(p);
    }
    std::stable_sort(selected.begin(), selected.end(), [](Program* a, Program* b) {
      return a->token_total != b->token_total ? a->token_total > b->token_total : a->pause_order < b->pause_order;
    });
    for (Program* p : selected) {
      double need = static_cast<double>(p->token_total) + buffer;
      // A paused ACTING program has no request waiting: resume it only where it also fits below
      // pause_threshold on the pause side, or step (3) would pause it (or a neighbour) again at
      // once -- churn that helps nobody.
      bool idle = p->waiting.empty();
      double pause_need = static_cast<double>(p->token_total) * (idle ? config_.acting_token_weight : 1.0) + buffer;
      // Its previous worker first when it fits (blocks it left there may still be cached),
      // else the tightest worker that fits (best fit).
      int pick = -1;
      double pick_room = std::numeric_limits<double>::infinity();
      for (auto& [id, h] : room) {
        if (h < need) continue;
        if (idle && pause_room[id] < pause_need) continue;
        if (p->last_worker == id) {
          pick = id;
          break;
        }
        if (h < pick_room) pick = id, pick_room = h;
      }
      if (pick < 0) continue;  // stays paused until a later tick
      for (auto& [id, h] : room)
        if (id == pick) h -= need;
      pause_room[pick] -= pause_need;
      activate(*p, pick, now_ms, false, &report);
    }
  }

  // (3) Pause: on each worker above pause_threshold, pause the smallest ACTING programs until at
  // or below pause_target; if ACTING ones do not suffice, mark the smallest REASONING programs to
  // pause at their next tool boundary. Already-marked programs count as leaving.
  for (auto& w : workers_) {
    if (w.capacity_tokens == 0) continue;
    double cap = static_cast<double>(w.capacity_tokens);
    std::vector<Program*> acting, reasoning;
    double used = 0;
    for (auto& [_, p] : programs_) {
      if (p.lifecycle != ProgramLifecycle::kActive || p.worker != w.id) continue;
      double t = static_cast<double>(p.token_total);
      if (p.status == ProgramStatus::kActing) t *= config_.acting_token_weight;
      if (p.marked_for_pause) continue;
      used += t + buffer;
      (p.status == ProgramStatus::kActing ? acting : reasoning).push_back(&p);
    }
    if (used <= config_.pause_threshold * cap) continue;
    auto smallest = [](Program* a, Program* b) {
      return a->token_total != b->token_total ? a->token_total < b->token_total : a->id < b->id;
    };
    std::sort(acting.begin(), acting.end(), smallest);
    std::sort(reasoning.begin(), reasoning.end(), smallest);
    double target = config_.pause_target * cap;
    for (Program* p : acting) {
      if (used <= target) break;
      used -= static_cast<double>(p->token_total) * config_.acting_token_weight + buffer;
      pause(*p, now_ms);
      report.paused.push_back(p->id);
    }
    for (Program* p : reasoning) {
      if (used <= target) break;
      used -= static_cast<double>(p->token_total) + buffer;
      p->marked_for_pause = true;
      ++stats_.marks;
      report.marked.push_back(p->id);
    }
  }
  std::sort(report.demoted.begin(), report.demoted.end());
  std::sort(report.resumed.begin(), report.resumed.end());
  std::sort(report.paused.begin(), report.paused.end());
  std::sort(report.marked.begin(), report.marked.end());
  if (!report.released.empty()) cv_.notify_all();
  return report;
}

AdmitDecision AdmissionController::admit_blocking(const std::string& program, const std::string& parent,
                                                  uint64_t prompt_tokens, const Clock& clock, double* waited_ms) {
  if (waited_ms) *waited_ms = 0;
  if (!config_.enabled()) return admit(program, parent, prompt_tokens, clock.now_ms());
  std::unique_lock lk(mu_);
  if (shutdown_) return AdmitDecision{};
  // admit and registration of the waiter happen under one lock, so no tick can release the
  // ticket in between.
  AdmitDecision d = admit_locked(program, parent, prompt_tokens, clock.now_ms());
  if (d.admitted) return d;
  uint64_t ticket = d.ticket;
  blocking_.insert(ticket);
  cv_.wait(lk, [&] { return done_.count(ticket) > 0 || shutdown_; });
  blocking_.erase(ticket);
  auto it = done_.find(ticket);
  if (it == done_.end()) return d;  // shutdown
  d.admitted = true;
  d.worker = it->second.worker;
  d.priority_jump_s = it->second.priority_jump_s;
  d.reason = it->second.forced ? "forced" : "resumed";
  if (waited_ms) *waited_ms = it->second.waited_ms;
  done_.erase(it);
  return d;
}

void AdmissionController::shutdown() {
  {
    std::lock_guard lk(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

std::vector<ProgramView> AdmissionController::programs(double now_ms) const {
  std::lock_guard lk(mu_);
  std::vector<ProgramView> out;
  for (auto& [id, p] : programs_) {
    ProgramView v;
    v.program_id = id;
    v.parent_session_id = p.parent;
    v.lifecycle = p.lifecycle;
    v.status = p.status;
    v.worker = p.lifecycle == ProgramLifecycle::kActive ? p.worker : p.last_worker;
    v.token_total = p.token_total;
    v.step_count = p.step_count;
    v.waiting_requests = p.waiting.size();
    v.pause_count = p.pause_count;
    v.marked_for_pause = p.marked_for_pause;
    v.soft_demoted = p.soft_demoted;
    v.tools_running = p.tools_running;
    v.paused_for_ms = p.lifecycle == ProgramLifecycle::kPaused ? now_ms - p.paused_since_ms : 0.0;
    v.paused_ms_total = p.paused_ms_total + v.paused_for_ms;
    out.push_back(std::move(v));
  }
  return out;
}

AdmissionStats AdmissionController::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

double AdmissionController::utilization(int worker_id, double now_ms) const {
  std::lock_guard lk(mu_);
  uint64_t cap = capacity(worker_id);
  return cap ? pause_side_used(worker_id, now_ms) / static_cast<double>(cap) : 0.0;
}

Json AdmissionController::snapshot_json(double now_ms) const {
  auto views = programs(now_ms);
  std::lock_guard lk(mu_);
  Json out;
  out["admission"] = to_string(config_.mode);
  out["now_ms"] = now_ms;
  Json workers = Json::array();
  for (auto& w : workers_) {
    uint64_t n = 0;
    for (auto& [_, p] : programs_)
      if (p.lifecycle == ProgramLifecycle::kActive && p.worker == w.id) ++n;
    double used = pause_side_used(w.id, now_ms);
    Json j;
    j["worker"] = w.id;
    j["capacity_tokens"] = w.capacity_tokens;
    j["used_tokens"] = static_cast<uint64_t>(std::llround(used));
    j["utilization"] = w.capacity_tokens ? used / static_cast<double>(w.capacity_tokens) : 0.0;
    j["resume_used_tokens"] = static_cast<uint64_t>(std::llround(resume_side_used(w.id, now_ms)));
    j["programs"] = n;
    workers.push_back(std::move(j));
  }
  out["workers"] = std::move(workers);
  Json programs = Json::array();
  for (auto& v : views) {
    Json j;
    j["program_id"] = v.program_id;
    if (!v.parent_session_id.empty()) j["parent_session_id"] = v.parent_session_id;
    j["state"] = to_string(v.lifecycle);
    j["status"] = to_string(v.status);
    j["worker"] = v.worker ? Json(*v.worker) : Json(nullptr);
    j["token_total"] = v.token_total;
    j["step_count"] = v.step_count;
    j["waiting_requests"] = v.waiting_requests;
    j["marked_for_pause"] = v.marked_for_pause;
    j["soft_demoted"] = v.soft_demoted;
    j["tools_running"] = v.tools_running;
    j["pause_count"] = v.pause_count;
    j["paused_for_ms"] = v.paused_for_ms;
    j["paused_ms_total"] = v.paused_ms_total;
    programs.push_back(std::move(j));
  }
  out["programs"] = std::move(programs);
  Json s;
  s["ticks"] = stats_.ticks;
  s["admitted_immediately"] = stats_.admitted_immediately;
  s["waited"] = stats_.waited;
  s["released"] = stats_.released;
  s["forced"] = stats_.forced;
  s["pauses"] = stats_.pauses;
  s["marks"] = stats_.marks;
  s["resumes"] = stats_.resumes;
  s["reassigned"] = stats_.reassigned;
  s["wait_ms_total"] = stats_.wait_ms_total;
  out["stats"] = std::move(s);
  return out;
}

AdmissionTicker::AdmissionTicker(AdmissionController& controller, const Clock& clock,
                                 std::function<void(const TickReport&)> on_tick)
    : controller_(controller), clock_(clock), on_tick_(std::move(on_tick)) {
  thread_ = std::thread([this] {
    auto period = std::chrono::duration<double>(controller_.config().scheduler_interval_s);
    std::unique_lock lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, period, [&] { return stop_; });
      if (stop_) break;
      lk.unlock();
      TickReport r = controller_.tick(clock_.now_ms());
      if (on_tick_) on_tick_(r);
      lk.lock();
    }
  });
}

AdmissionTicker::~AdmissionTicker() { stop(); }

void AdmissionTicker::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dyn::route
