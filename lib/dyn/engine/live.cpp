// LiveEngine: the real-time stepping loop around Engine.
#include "dyn/engine/live.h"

#include <chrono>

namespace dyn::engine {

LiveEngine::LiveEngine(EngineConfig config) : engine_(config) {}

LiveEngine::~LiveEngine() { stop(); }

void LiveEngine::start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void LiveEngine::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t LiveEngine::next_id() {
  std::lock_guard lk(mu_);
  return next_id_++;
}

Expected<bool> LiveEngine::submit(RequestSpec spec, Sink sink, std::chrono::steady_clock::time_point arrived) {
  {
    std::lock_guard lk(mu_);
    uint64_t id = spec.id;
    const bool idle = !engine_.has_work();
    auto r = engine_.add(std::move(spec));
    if (!r) return r;
    sinks_[id] = std::move(sink);
    if (idle) idle_arrival_ = std::min(idle_arrival_, arrived);
  }
  cv_.notify_all();
  return true;
}

bool LiveEngine::cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  engine_.cancel(id);
  return sinks_.erase(id) > 0;
}

EngineStats LiveEngine::stats() const {
  std::lock_guard lk(mu_);
  return engine_.stats();
}

size_t LiveEngine::cached_prefix_blocks(const std::vector<uint64_t>& hashes) const {
  std::lock_guard lk(mu_);
  return engine_.cached_prefix_blocks(hashes);
}

void LiveEngine::set_kv_listener(KvListener listener) {
  std::lock_guard lk(mu_);
  kv_listener_ = std::move(listener);
}

void LiveEngine::run() {
  using clock = std::chrono::steady_clock;
  StepResult res;
  std::vector<std::pair<Sink, TokenOutput>> deliver;
  auto next_start = clock::now();
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (!engine_.has_work()) {
      cv_.wait(lk, [&] { return stop_ || engine_.has_work(); });
      if (stop_) break;
      // An idle engine starts its next step on arrival: when the first request reached the
      // server, not when its handling was done (LiveEngine::submit), nor before the last step ended.
      next_start = std::max(next_start, std::min(idle_arrival_, clock::now()));
    }
    idle_arrival_ = clock::time_point::max();
    // Steps follow each other on the model's schedule: time spent delivering tokens after a
    // step is not added to the next one (a late loop catches up instead of drifting).
    const auto start = next_start;
    engine_.step(res);
    std::vector<KvEvent> events;
    if (kv_listener_) events = engine_.take_kv_events();
    KvListener listener = kv_listener_;
    const auto end =
        start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(res.duration_ms));
    next_start = end;
    // Sleep the step's duration; submissions during the sleep wait for the next step.
    cv_.wait_until(lk, end, [&] { return stop_; });
    if (stop_) break;
    deliver.clear();
    for (const TokenOutput& o : res.outputs) {
      auto it = sinks_.find(o.id);
      if (it == sinks_.end()) continue;  // cancelled during the step
      deliver.emplace_back(it->second, o);
      if (o.finished) sinks_.erase(it);
    }
    lk.unlock();
    if (listener && !events.empty()) listener(events);
    for (auto& [sink, o] : deliver) sink(o);
    lk.lock();
  }
}

}  // namespace dyn::engine
