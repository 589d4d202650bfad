// The one queue of a live frontend: holding, pumping in policy order, time limits and answers.
#include "dyn/serve/queue.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

namespace dyn::serve {

using Verdicts = std::vector<std::pair<std::function<void(QueueVerdict)>, QueueVerdict>>;

const char* hold_reason_type(HoldReason r) {
  switch (r) {
    case HoldReason::kConcurrency: return "concurrency_limit";
    case HoldReason::kAllBusy: return "all_workers_overloaded";
    case HoldReason::kPinnedBusy: return "pinned_worker_overloaded";
    case HoldReason::kAdmission: return "admission_paused";
    case HoldReason::kNoWorker: return "no_compatible_worker";
  }
  return "all_workers_overloaded";
}

namespace {

/// Why a request was held, in words, for the message of its 429 or 503.
std::string reason_text(HoldReason r, size_t cap, const std::optional<uint64_t>& worker) {
  switch (r) {
    case HoldReason::kConcurrency: return fmt::format("{} requests in flight (--max-concurrent-requests)", cap);
    case HoldReason::kPinnedBusy:
      return fmt::format(
          "its worker {} (named by the request, its admission program or a hard session binding) is "
          "over a busy threshold",
          worker.value_or(0));
    case HoldReason::kAdmission: return "its session is paused by program admission";
    case HoldReason::kNoWorker: return "no healthy worker";
    case HoldReason::kAllBusy: break;
  }
  return "every eligible worker is over a busy threshold";
}

}  // namespace

RequestQueue::RequestQueue(const route::QueueConfig& config, size_t max_concurrent, route::Router& router,
                           const Clock& clock, std::function<void(std::function<void()>)> post,
                           route::AdmissionController* admission)
    : cfg_(config),
      max_concurrent_(max_concurrent),
      router_(router),
      clock_(clock),
      post_(std::move(post)),
      admission_(admission),
      resolver_(config),
      queue_(config.classes, config.timeout_ms),
      queued_total_(config.classes.size(), 0) {
  for (size_t i = 0; i < config.classes.size(); ++i) wait_hist_.push_back(std::make_unique<http::LatencyHistogram>());
  for (const route::PolicyClass& c : config.classes)
    uses_las_ = uses_las_ || c.policy == route::QueuePolicy::kSessionLas;
  active_ = max_concurrent_ > 0 || admission_ != nullptr || router_.busy_thresholds().any();
  timer_ = std::thread([this] { timer_loop(); });
}

RequestQueue::~RequestQueue() {
  {
    std::lock_guard lk(mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void RequestQueue::thresholds_changed() {
  active_ = max_concurrent_ > 0 || admission_ != nullptr || router_.busy_thresholds().any();
  pump();
}

Entered RequestQueue::enter(QueuedRequest r, std::optional<HoldReason> why, std::optional<uint64_t> lane) {
  Entered e;
  Verdicts out;
  {
    std::unique_lock lk(mu_);
    if (shutdown_) {
      e.rejected = QueueVerdict{QueueVerdict::Kind::kReject, 503, "service_unavailable", "the router is shutting down"};
      return e;
    }
    if (why && dispatched_ > 0) --dispatched_;  // the slot of its go, given back
    const bool cap_full = max_concurrent_ && dispatched_ >= max_concurrent_;
    if (!why) {
      // A fresh request goes while a slot is free and nobody waits before it.
      if (queue_.empty() && !cap_full) {
        ++dispatched_;
        e.go = true;
        return e;
      }
      why = cap_full ? HoldReason::kConcurrency : HoldReason::kAllBusy;
    }
    const uint64_t id = next_id_++;
    r.item.id = id;
    r.item.worker = lane;
    Held h{std::move(r), clock_.now_ms(), true, *why};
    if (queue_.size() >= cfg_.max_requests) {
      if (cap_full) h.why = HoldReason::kConcurrency;
      e.rejected =
          reject(h, "queue_full", 429,
                 fmt::format("the router queue is full ({} requests waiting, --queue-size {}): {}", queue_.size(),
                             cfg_.max_requests, reason_text(h.why, max_concurrent_, h.req.item.worker)));
      return e;
    }
    ++queued_total_[h.req.item.class_index < queued_total_.size() ? h.req.item.class_index : 0];
    h.req.item.cost = cost_of(h.req);
    e.depth = h.depth = queue_.size() + 1;
    e.id = id;
    queue_.push(h.req.item);
    deadlines_.emplace(h.since_ms + cfg_.timeout_ms, id);
    held_.emplace(id, std::move(h));
    ++waiting_;
    e.queued = true;
    pump_locked(out);
  }
  timer_cv_.notify_all();
  deliver(out);
  return e;
}

uint64_t RequestQueue::defer(uint64_t ticket, QueuedRequest r) {
  Verdicts out;
  uint64_t id = 0;
  {
    std::lock_guard lk(mu_);
    if (shutdown_) {
      out.emplace_back(std::move(r.resume), QueueVerdict{QueueVerdict::Kind::kReject, 503, "service_unavailable",
                                                         "the router is shutting down"});
    } else {
      id = next_id_++;
      r.item.id = id;
      Held h{std::move(r), clock_.now_ms(), false, HoldReason::kAdmission};
      h.ticket = ticket;
      held_.emplace(id, std::move(h));
      deferred_.emplace(ticket, id);
    }
  }
  deliver(out);
  // A tick may have released the ticket before it was deferred here.
  std::vector<route::AdmissionRelease> early;
  {
    std::lock_guard lk(mu_);
    if (auto it = early_.find(ticket); it != early_.end()) {
      early.push_back(it->second);
      early_.erase(it);
    }
  }
  if (!early.empty()) admission_released(early);
  return id;
}

bool RequestQueue::cancel(uint64_t id) {
  Verdicts out;
  {
    std::lock_guard lk(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) return false;
    Held& h = it->second;
    QueueVerdict v{QueueVerdict::Kind::kCancelled, 499, "cancelled",
                   h.ready ? "while it waited in the router queue" : "while program admission paused its session"};
    const double held = clock_.now_ms() - h.since_ms;
    v.depth = h.depth;
    if (h.ready) {
      queue_.remove(id);
      erase_deadline(h);
      --waiting_;
      v.waited_ms = held;
      v.paused_ms = h.paused_ms;
    } else {
      deferred_.erase(h.ticket);
      v.paused_ms = held;
      v.admission_withdrawn = admission_->withdraw(h.req.item.session, h.ticket, clock_.now_ms());
      if (!v.admission_withdrawn) withdrawn_.insert(h.ticket);  // its release is on the way
    }
    out.emplace_back(std::move(h.req.resume), std::move(v));
    held_.erase(it);
    pump_locked(out);
  }
  deliver(out);
  return true;
}

void RequestQueue::admission_released(const std::vector<route::AdmissionRelease>& released) {
  Verdicts out;
  {
    std::lock_guard lk(mu_);
    for (const route::AdmissionRelease& rel : released) {
      if (withdrawn_.erase(rel.ticket)) continue;  // its request was cancelled meanwhile
      auto d = deferred_.find(rel.ticket);
      if (d == deferred_.end()) {
        if (!shutdown_) early_.emplace(rel.ticket, rel);
        continue;
      }
      Held& h = held_.at(d->second);
      deferred_.erase(d);
      h.ready = true;
      h.paused_ms = rel.waited_ms;
      h.admitted_worker = rel.worker;
      h.since_ms = clock_.now_ms();  // the queue's time limit starts now
      h.req.item.worker = rel.worker >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(rel.worker)) : std::nullopt;
      h.why = HoldReason::kAllBusy;
      ++queued_total_[h.req.item.class_index < queued_total_.size() ? h.req.item.class_index : 0];
      h.req.item.cost = cost_of(h.req);
      queue_.push(h.req.item);
      deadlines_.emplace(h.since_ms + cfg_.timeout_ms, h.req.item.id);
      ++waiting_;
    }
    pump_locked(out);
  }
  timer_cv_.notify_all();
  deliver(out);
}

void RequestQueue::release_slot() {
  Verdicts out;
  {
    std::lock_guard lk(mu_);
    if (dispatched_ > 0) --dispatched_;
    if (!queue_.empty()) pump_locked(out);
  }
  deliver(out);
}

void RequestQueue::pump() {
  Verdicts out;
  {
    std::lock_guard lk(mu_);
    pump_locked(out);
  }
  deliver(out);
}

void RequestQueue::pump_locked(Verdicts& out) {
  // Bounded: an item whose placement finds its worker busy goes back to that worker's lane,
  // which the next availability then skips.
  for (size_t guard = queue_.size() + 1; guard > 0 && !queue_.empty() && !shutdown_; --guard) {
    if (max_concurrent_ && dispatched_ >= max_concurrent_) break;
    const route::Availability avail = router_.availability();
    auto item = queue_.pop([&](std::optional<uint64_t> w) { return w ? avail.can_take(*w) : avail.any(); });
    if (!item) break;
    auto it = held_.find(item->id);
    Held& h = it->second;
    const PlaceOutcome o = h.req.place(h.admitted_worker);
    if (o.kind == PlaceOutcome::Kind::kAllBusy || o.kind == PlaceOutcome::Kind::kPinnedBusy) {
      const bool pinned = o.kind == PlaceOutcome::Kind::kPinnedBusy;
      h.why = pinned ? HoldReason::kPinnedBusy : HoldReason::kAllBusy;
      h.req.item = *item;
      h.req.item.worker = pinned ? std::optional<uint64_t>(o.worker) : item->worker;
      queue_.requeue(*item, h.req.item.worker);
      if (!pinned) break;  // the snapshot said a worker was free: do not spin on it
      continue;
    }
    const double now = clock_.now_ms();
    QueueVerdict v;
    v.waited_ms = now - h.since_ms;
    v.paused_ms = h.paused_ms;
    v.depth = h.depth;
    bool stop = false;
    switch (o.kind) {
      case PlaceOutcome::Kind::kPlaced: v.kind = QueueVerdict::Kind::kPlaced; break;
      case PlaceOutcome::Kind::kBlocking:
        // Its placement may block (it runs on the pool): the next items wait for its load.
        v.kind = QueueVerdict::Kind::kPlace;
        stop = true;
        break;
      default:
        v = reject(h, "no_compatible_worker", o.status, o.message);
        v.type = o.type;
        v.waited_ms = now - h.since_ms;
        break;
    }
    if (v.kind != QueueVerdict::Kind::kReject) {
      ++dispatched_;
      observe_wait(item->class_index, v.waited_ms);
    }
    erase_deadline(h);
    --waiting_;
    out.emplace_back(std::move(h.req.resume), std::move(v));
    held_.erase(it);
    if (stop) break;
  }
}

void RequestQueue::erase_deadline(const Held& h) {
  for (auto d = deadlines_.lower_bound(h.since_ms + cfg_.timeout_ms); d != deadlines_.end(); ++d) {
    if (d->second != h.req.item.id) continue;
    deadlines_.erase(d);
    return;
  }
}

void RequestQueue::deliver(Verdicts& out) {
  for (auto& [resume, v] : out)
    post_([resume = std::move(resume), v = std::move(v)]() mutable { resume(std::move(v)); });
  out.clear();
}

uint64_t RequestQueue::cost_of(const QueuedRequest& r) const {
  const uint64_t cached = router_.predicted_cached_tokens(r.sequence_hashes, r.tokens);
  return std::max<uint64_t>(1, r.tokens - std::min(cached, r.tokens));
}

HoldReason RequestQueue::reason_now(const Held& h) const {
  if (!h.ready) return HoldReason::kAdmission;
  if (max_concurrent_ && dispatched_ >= max_concurrent_) return HoldReason::kConcurrency;
  const route::Availability a = router_.availability();
  if (h.req.item.worker) return a.can_take(*h.req.item.worker) ? h.why : HoldReason::kPinnedBusy;
  if (!a.any_usable()) return HoldReason::kNoWorker;
  return a.any() ? h.why : HoldReason::kAllBusy;
}

QueueVerdict RequestQueue::reject(const Held& h, const char* outcome, int status, const std::string& message) {
  QueueVerdict v{QueueVerdict::Kind::kReject, status, hold_reason_type(h.why), message};
  // A request still held by admission (shutdown) was paused all along and never queued.
  const double held = clock_.now_ms() - h.since_ms;
  v.waited_ms = h.ready ? held : 0;
  v.paused_ms = h.ready ? h.paused_ms : held;
  v.depth = h.depth;
  ++rejected_[{outcome, v.type}];
  return v;
}

void RequestQueue::timer_loop() {
  std::unique_lock lk(mu_);
  while (!timer_stop_) {
    if (deadlines_.empty()) {
      timer_cv_.wait(lk);
      continue;
    }
    const double wait = deadlines_.begin()->first - clock_.now_ms();
    if (wait > 0) {
      timer_cv_.wait_for(lk, std::chrono::duration<double, std::milli>(std::min(wait, 1000.0)));
      continue;
    }
    Verdicts out;
    const double now = clock_.now_ms();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      auto it = held_.find(id);
      if (it == held_.end() || !it->second.ready) continue;
      Held& h = it->second;
      queue_.remove(id);
      --waiting_;
      h.why = reason_now(h);
      QueueVerdict v = reject(h, "timeout", 503,
                              fmt::format("waited {:.1f} s in the router queue (--queue-timeout-secs {:g}): {}",
                                          (now - h.since_ms) / 1000.0, cfg_.timeout_ms / 1000.0,
                                          reason_text(h.why, max_concurrent_, h.req.item.worker)));
      out.emplace_back(std::move(h.req.resume), std::move(v));
      held_.erase(it);
    }
    lk.unlock();
    deliver(out);
    lk.lock();
  }
}

void RequestQueue::shutdown() {
  Verdicts out;
  {
    std::lock_guard lk(mu_);
    shutdown_ = true;
    for (auto& [id, h] : held_) {
      QueueVerdict v = reject(h, "shutdown", 503, "the router is shutting down");
      v.type = "service_unavailable";
      out.emplace_back(std::move(h.req.resume), std::move(v));
      queue_.remove(id);
    }
    held_.clear();
    deferred_.clear();
    deadlines_.clear();
    early_.clear();
    withdrawn_.clear();
    waiting_ = 0;
  }
  deliver(out);
}

void RequestQueue::record_service(const std::string& session, uint64_t uncached) {
  if (!uses_las_ || session.empty()) return;
  std::lock_guard lk(mu_);
  queue_.record_service(session, uncached);
}

void RequestQueue::forget_session(const std::string& session) {
  if (!uses_las_ || session.empty()) return;
  std::lock_guard lk(mu_);
  queue_.forget_session(session);
}

void RequestQueue::observe_wait(size_t class_index, double ms) {
  if (class_index < wait_hist_.size()) wait_hist_[class_index]->observe(ms);
}

QueueStats RequestQueue::stats() const {
  std::lock_guard lk(mu_);
  QueueStats s;
  for (size_t c = 0; c < queue_.class_count(); ++c) {
    route::QueueClassStats cs = queue_.stats(c);
    s.classes.push_back({queue_.policy_class(c).name, cs.waiting, queued_total_[c], cs.dispatched});
  }
  s.deferred = deferred_.size();
  s.dispatched = dispatched_;
  s.rejected = rejected_;
  return s;
}

}  // namespace dyn::serve
