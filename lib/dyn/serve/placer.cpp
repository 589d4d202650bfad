// Placement and leases: the router, the shared binding store and SPEC 9 admission of serve mode.
#include "dyn/serve/placer.h"

#include <utility>
#include <vector>

#include "dyn/base/diag.h"

namespace dyn::serve {

namespace {

/// The router's configuration once it is known to be valid (Fatal, exit 2, otherwise).
route::RouterConfig checked_router_config(const route::RouterConfig& c) {
  if (auto e = c.validate()) throw Fatal(kExitUsage, e->message);
  return c;
}

}  // namespace

Placer::Placer(const FrontendOptions& opt, const Fleet& fleet, const Clock& clock,
               std::function<void(std::function<void()>)> post)
    : fleet_(fleet),
      clock_(clock),
      capacity_tokens_(opt.admission_capacity_tokens),
      router_(checked_router_config(opt.router), clock) {
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (auto e = router_.add_worker(route::WorkerSpec{i, 0, 0})) throw Fatal(kExitUsage, e->message);
  }
  std::vector<std::string> urls;
  for (size_t i = 0; i < fleet.size(); ++i) urls.push_back(fleet.at(i).url);
  if (!opt.binding_store.empty()) {
    if (!opt.router.affinity_enabled())
      throw Fatal(kExitUsage, "--router-binding-store needs session affinity (--router-session-affinity-ttl-secs)");
    auto url = StoreUrl::parse(opt.binding_store);
    if (!url) throw Fatal(kExitUsage, url.error().message);
    uint64_t ttl_ms = opt.router.affinity_ttl_secs * uint64_t{1000};
    shared_ = std::make_unique<SharedBindings>(router_, make_redis_store(*url, ttl_ms), urls, clock);
  }
  if (opt.admission.enabled()) {
    if (capacity_tokens_ == 0) throw Fatal(kExitUsage, "admission needs a worker KV capacity > 0");
    admission_ = std::make_unique<route::AdmissionController>(opt.admission, std::vector<route::AdmissionWorker>{});
    sync_admission();
  }
  if (auto e = opt.queue.validate()) throw Fatal(kExitUsage, e->message);
  queue_ = std::make_unique<RequestQueue>(opt.queue, opt.max_concurrent_requests, router_, clock, std::move(post),
                                          admission_.get());
}

Placer::~Placer() {
  stop();
  queue_.reset();
}

std::optional<uint64_t> Placer::live_worker(int worker) const {
  // The controller's worker unless it went away meanwhile (the policy chooses then).
  if (worker >= 0 && static_cast<size_t>(worker) < fleet_.size() && fleet_.at(worker).routable &&
      fleet_.at(worker).state == WorkerState::kServing)
    return static_cast<uint64_t>(worker);
  return std::nullopt;
}

Placer::Admitted Placer::admit(const session::AgentContext& ctx, uint64_t tokens, Lease& lease) {
  Admitted r;
  route::AdmitDecision a = admission_->admit(ctx.session_id, ctx.parent_session_id, tokens, clock_.now_ms());
  lease.admission_program = ctx.session_id;
  r.admitted = a.admitted;
  r.ticket = a.ticket;
  if (a.admitted) r.worker = live_worker(a.worker);
  return r;
}

void Placer::release(Lease& lease, const TurnEnd& end) {
  if (lease.placement) {
    lease.placement->finish();
    lease.placement.reset();
  }
  if (!admission_ || lease.admission_program.empty()) return;
  double now = clock_.now_ms();
  if (end.ok) {
    admission_->on_response(lease.admission_program, end.input_tokens, end.output_tokens, now);
  } else {
    admission_->on_request_failed(lease.admission_program, now);
  }
  if (end.session_final) queue_->admission_released(admission_->release_program(lease.admission_program, now));
  lease.admission_program.clear();
}

void Placer::on_health_change(size_t i, bool healthy) {
  router_.set_healthy(i, healthy);
  sync_admission();
  queue_->pump_if_waiting();
}

void Placer::add_worker(size_t i) {
  const Fleet::Worker& w = fleet_.at(i);
  // A worker the router had keeps its id (add_worker revives it); its new state follows.
  if (auto e = router_.add_worker(route::WorkerSpec{i, 0, 0})) diag::error("", e->message);
  router_.set_draining(i, false);
  router_.set_healthy(i, w.routable);
  if (shared_) shared_->set_worker(i, w.url, true);
  sync_admission();
}

void Placer::drain_worker(size_t i) {
  router_.set_draining(i, true);
  sync_admission();
}

size_t Placer::remove_worker(size_t i) {
  if (shared_) shared_->set_worker(i, fleet_.at(i).url, false);
  size_t dropped = router_.remove_worker(i);
  sync_admission();
  return dropped;
}

void Placer::sync_admission() {
  if (!admission_) return;
  std::lock_guard<std::mutex> lk(admission_mu_);
  std::vector<route::AdmissionWorker> ws;
  for (size_t i = 0; i < fleet_.size(); ++i)
    if (fleet_.at(i).routable && fleet_.at(i).state == WorkerState::kServing)
      ws.push_back(route::AdmissionWorker{static_cast<int>(i), capacity_tokens_});
  admission_->set_workers(std::move(ws));
}

void Placer::start() {
  if (admission_)
    ticker_ = std::make_unique<route::AdmissionTicker>(
        *admission_, clock_, [this](const route::TickReport& r) { queue_->admission_released(r.released); });
}

void Placer::shutdown() {
  if (admission_) admission_->shutdown();
  queue_->shutdown();
}

void Placer::stop() {
  if (ticker_) ticker_->stop();
}

}  // namespace dyn::serve
