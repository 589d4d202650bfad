// The worker list: canonical URLs parsed into connection pools, states, health and circuit
// breakers, the block size rule.
#include "dyn/serve/fleet.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"

namespace dyn::serve {

const char* worker_state_name(WorkerState s) {
  switch (s) {
    case WorkerState::kServing: return "serving";
    case WorkerState::kDraining: return "draining";
    case WorkerState::kRemoved: return "removed";
  }
  return "?";
}

const char* worker_source_name(WorkerSource s) {
  switch (s) {
    case WorkerSource::kFlag: return "flag";
    case WorkerSource::kFile: return "file";
    case WorkerSource::kApi: return "api";
  }
  return "?";
}

const char* circuit_name(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::kClosed: return "closed";
    case CircuitBreaker::State::kOpen: return "open";
    case CircuitBreaker::State::kHalfOpen: return "half_open";
  }
  return "?";
}

bool CircuitBreaker::record(bool success, double now_ms, const CircuitOptions& o) {
  std::lock_guard lk(mu_);
  const State before = state_.load();
  if (success) {
    failures_ = 0;
    if (before == State::kHalfOpen && ++successes_ >= o.success_threshold) {
      successes_ = 0;
      state_ = State::kClosed;
    }
    return state_.load() != before;
  }
  successes_ = 0;
  if (failures_ > 0 && now_ms - last_failure_ms_ > o.window_s * 1000) failures_ = 0;
  ++failures_;
  last_failure_ms_ = now_ms;
  // One failure while half-open is enough: the probe found the worker still failing.
  if (before == State::kHalfOpen || (before == State::kClosed && failures_ >= o.failure_threshold)) {
    state_ = State::kOpen;
    opened_ms_ = now_ms;
    opens_++;
  }
  return state_.load() != before;
}

bool CircuitBreaker::tick(double now_ms, const CircuitOptions& o) {
  std::lock_guard lk(mu_);
  if (state_.load() != State::kOpen || now_ms - opened_ms_ < o.timeout_s * 1000) return false;
  state_ = State::kHalfOpen;
  successes_ = 0;
  return true;
}

void CircuitBreaker::reset() {
  std::lock_guard lk(mu_);
  state_ = State::kClosed;
  failures_ = successes_ = 0;
}

unsigned CircuitBreaker::consecutive_failures() const {
  std::lock_guard lk(mu_);
  return failures_;
}

Fleet::Fleet(const std::vector<std::string>& urls, http::EventLoop& loop, const http::UpstreamTimeouts& timeouts,
             uint32_t block_size, bool allow_block_size_mismatch, CircuitOptions circuit, const Clock& clock)
    : loop_(loop),
      timeouts_(timeouts),
      slots_(std::make_unique<std::atomic<Worker*>[]>(kMaxWorkers)),
      block_size_(block_size),
      allow_mismatch_(allow_block_size_mismatch),
      circuit_(circuit),
      clock_(clock) {
  for (const auto& w : urls) {
    if (auto known = find(w))
      throw Fatal(kExitUsage, fmt::format("worker {} is given twice ({} names it again)", at(*known).url, w));
    auto a = add(w, WorkerSource::kFlag);
    if (!a) throw Fatal(kExitUsage, a.error().message);
  }
}

std::optional<size_t> Fleet::first_healthy() const {
  for (size_t i = 0, n = size(); i < n; ++i)
    if (at(i).routable && at(i).state == WorkerState::kServing) return i;
  return std::nullopt;
}

std::optional<size_t> Fleet::find(std::string_view url) const {
  auto canonical = http::canonical_worker_url(url);
  if (!canonical) return std::nullopt;
  for (size_t i = 0, n = size(); i < n; ++i)
    if (at(i).url == *canonical) return i;
  return std::nullopt;
}

Expected<Fleet::Added> Fleet::add(std::string_view url, WorkerSource source) {
  auto u = http::UpstreamUrl::parse(url);
  if (!u) return u.error();
  std::lock_guard lk(mu_);
  for (size_t i = 0, n = size(); i < n; ++i) {
    Worker& w = at(i);
    if (w.url != u->canonical) continue;
    Added a{i, false, w.state.load()};
    if (a.was == WorkerState::kRemoved) {
      // Back as if new: health and circuit start over (the health poller checks it again).
      w.breaker.reset();
      w.healthy = true;
      w.source = source;
      w.kv_blocks = 0;  // not known until its engine is asked again (the router's goes back to the default)
      w.revivals++;
    }
    w.state = WorkerState::kServing;
    update_routable(i);
    return a;
  }
  const size_t id = size();
  if (id >= kMaxWorkers) return Error{fmt::format("the fleet is full ({} workers named)", kMaxWorkers), kExitUsage};
  owned_.push_back(std::make_unique<Worker>(*u, loop_, timeouts_));
  owned_.back()->source = source;
  slots_[id].store(owned_.back().get(), std::memory_order_release);
  count_.store(id + 1, std::memory_order_release);
  return Added{id, true, WorkerState::kServing};
}

void Fleet::update_routable(size_t i) {
  std::lock_guard lk(routable_mu_);
  Worker& w = at(i);
  const bool now = w.healthy.load() && w.breaker.state() != CircuitBreaker::State::kOpen;
  if (w.routable.exchange(now) == now) return;
  if (on_change_) on_change_(i, now);
}

void Fleet::set_health(size_t i, bool ok, const std::string& why) {
  Worker& w = at(i);
  if (w.healthy.exchange(ok) == ok) return;
  update_routable(i);
  diag::note(fmt::format("worker {} ({}) is {}: {}", i, w.url, ok ? "healthy" : "unhealthy", why));
}

void Fleet::record_outcome(size_t i, bool success) {
  if (!circuit_.enabled) return;
  Worker& w = at(i);
  if (!w.breaker.record(success, clock_.now_ms(), circuit_)) return;
  update_routable(i);
  const auto s = w.breaker.state();
  if (s == CircuitBreaker::State::kOpen && on_open_) on_open_();
  diag::note(s == CircuitBreaker::State::kOpen
                 ? fmt::format("worker {} ({}): circuit open after {} failures in a row; not routed to for {:g} s", i,
                               w.url, w.breaker.consecutive_failures(), circuit_.timeout_s)
                 : fmt::format("worker {} ({}): circuit {}", i, w.url, circuit_name(s)));
}

bool Fleet::tick() {
  if (!circuit_.enabled) return false;
  const double now = clock_.now_ms();
  bool open = false;
  for (size_t i = 0, n = size(); i < n; ++i) {
    Worker& w = at(i);
    if (!w.present()) continue;
    if (w.breaker.tick(now, circuit_)) {
      update_routable(i);
      diag::note(fmt::format("worker {} ({}): circuit half_open; routed to again on probation", i, w.url));
    }
    open = open || w.breaker.state() == CircuitBreaker::State::kOpen;
  }
  return open;
}

bool Fleet::check_block_size(size_t i, uint32_t bs, const char* source) {
  Worker& w = at(i);
  w.block_size = bs;
  if (bs == block_size_) {
    if (w.refused.exchange(false))
      diag::note(fmt::format("worker {} ({}) now reports block size {}: accepted again", i, w.url, bs));
    return true;
  }
  std::string what =
      fmt::format("worker {} ({}) has KV block size {} ({}) but the router's --kv-cache-block-size is {}", i, w.url, bs,
                  source, block_size_);
  if (allow_mismatch_) {
    if (!w.mismatch_warned.exchange(true))
      diag::warning("", what + "; routing to it stays approximate (--allow-block-size-mismatch)");
    return true;
  }
  if (!w.refused.exchange(true)) {
    diag::error("", what + ": the worker is refused (not routed to, its KV events ignored); start it with block size " +
                        std::to_string(block_size_) + " or pass --allow-block-size-mismatch");
    set_health(i, false, "refused: block size mismatch");
  }
  return false;
}

void Fleet::set_kv_blocks(size_t i, uint64_t blocks, const char* source) {
  Worker& w = at(i);
  if (w.kv_blocks.exchange(blocks) != blocks)
    diag::note(
        blocks ? fmt::format("worker {} ({}) has {} KV blocks of {} tokens ({})", i, w.url, blocks, block_size_, source)
               : fmt::format("worker {} ({}) no longer reports its KV capacity ({}): the default", i, w.url, source));
  // Told again when unchanged: a worker removed and added back starts from the default.
  if (on_kv_blocks_) on_kv_blocks_(i, blocks);
}

}  // namespace dyn::serve
