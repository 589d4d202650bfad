// LiveEngine: the real-time stepping loop around Engine.
#include "dyn/engine/live.h"

#include <chrono>

namespace dyn::engine {

LiveEngine::LiveEngine(EngineConfig config, std::shared_ptr<EngineGroup> group)
    : group_(group ? std::move(group) : std::make_shared<EngineGroup>()), mu_(group_->mu), engine_(std::move(config)) {}

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

std::vector<HintResult> LiveEngine::apply_hint(const KvHint& h) {
  std::lock_guard lk(mu_);
  return engine_.apply_hint(h, clock_ms());
}

EngineStats LiveEngine::stats() {
  std::lock_guard lk(mu_);
  engine_.expire_hints(clock_ms());
  return engine_.stats();
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
  std::vector<KvEvent> events;
  KvListener listener;
  auto next_start = clock::now();
  const auto epoch = group_->epoch;  // the engine's clock (its tier links) counts ms from here
  auto end = next_start;
  bool planned = false;  // `res` is a step under way, ending at `end`
  // Plans the next step to start at next_start (under the lock).
  auto plan = [&] {
    idle_arrival_ = clock::time_point::max();  // consumed: a later idle wake-up has its own
    engine_.step(res, std::chrono::duration<double, std::milli>(next_start - epoch).count());
    events.clear();
    if (kv_listener_) events = engine_.take_kv_events();
    listener = kv_listener_;
    end = next_start +
          std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(res.duration_ms));
    next_start = end;
    planned = true;
  };
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (!planned) {
      if (!engine_.has_work()) {
        cv_.wait(lk, [&] { return stop_ || engine_.has_work(); });
        if (stop_) break;
        // An idle engine starts its next step on arrival: when the first request reached the
        // server, not when its handling was done (LiveEngine::submit), nor before the last step ended.
        next_start = std::max(next_start, std::min(idle_arrival_, clock::now()));
      }
      plan();
    }
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
    std::vector<KvEvent> done_events = std::move(events);
    KvListener done_listener = listener;
    // The next step is planned at this one's end, before its tokens go out: a request a client
    // sends on seeing them reaches a step already under way and joins the one after, as in the
    // simulator (however long delivering takes). Steps follow each other on the model's schedule:
    // time spent delivering is not added to the next step (a late loop catches up, not drifts).
    planned = false;
    if (engine_.has_work()) plan();
    lk.unlock();
    if (done_listener && !done_events.empty()) done_listener(done_events);
    for (auto& [sink, o] : deliver) sink(o);
    lk.lock();
  }
}

}  // namespace dyn::engine
