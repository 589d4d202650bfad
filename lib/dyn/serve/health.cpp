// Worker health polls: a thread that runs the rounds, and threads that ask the workers' GET /health and
// update the fleet.
#include "dyn/serve/health.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>

#include "dyn/base/json.h"
#include "dyn/http/prometheus.h"

namespace dyn::serve {

void HealthPoller::start() {
  thread_ = std::thread([this] { run(); });
}

void HealthPoller::stop() {
  {
    std::lock_guard<std::mutex> lk(wake_->mu);
    wake_->stopping = true;
  }
  wake_->cv.notify_all();
}

void HealthPoller::join() {
  stop();
  if (thread_.joinable()) thread_.join();
}

namespace {

/// One worker's poll client and its state between polls.
struct Polled {
  std::unique_ptr<httplib::Client> client;
  unsigned failed_polls = 0;   ///< consecutive
  uint64_t answered_seen = 0;  ///< the worker's answered count at the previous poll
  bool kv_asked = false;       ///< GET /metrics answered since the worker last came up
  uint64_t revivals = 0;       ///< the worker's Fleet::Worker::revivals when this state began
  bool in_flight = false;      ///< a poll thread has its request (PollThreads)
  bool metrics_only = false;   ///< that request is GET /metrics alone (its answers say it is alive)
};

/// The client of one worker's polls. Its connection is kept alive between polls: a fresh one per
/// poll cost a connect, a close and a TIME_WAIT socket every interval per worker, about 70 % of
/// an idle router's CPU (issue 54: ~115 us a poll on this VM, half the router's CPU per request
/// at one agent session). get() absorbs the price of reuse.
std::unique_ptr<httplib::Client> poll_client(const http::UpstreamPool& pool, double timeout_ms) {
  auto c = std::make_unique<httplib::Client>(pool.url().scheme_host_port);
  auto us = std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1000));
  c->set_connection_timeout(us);
  c->set_read_timeout(us);
  c->set_keep_alive(true);
  return c;
}

/// GET `path` on a worker's poll client. A kept connection may have been closed by the worker
/// since its last answer (idle timeout, request cap, restart): the request then fails at once
/// with a write or read error that says nothing about the worker's health. Seen under load in the
/// soak ("GET /health failed: Write") as a healthy worker marked down and its hard-affinity
/// sessions moved, so such a failure is retried once on a fresh connection, as ProxyCall retries
/// a reused upstream connection. A read that ran into the timeout is the worker's own answer
/// and is not retried (it would double the wait).
httplib::Result get(httplib::Client& client, const std::string& path, double timeout_ms,
                    const std::atomic<bool>* stopping = nullptr) {
  const bool reused = client.is_socket_open() != 0;  // a connection kept from an earlier answer
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client.Get(path);
  const auto e = r.error();
  if (!r && reused && (e == httplib::Error::Write || e == httplib::Error::Read) &&
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < timeout_ms / 2 &&
      !(stopping && stopping->load())) {  // a request cut short by the router's shutdown is not retried
    client.stop();                        // the stale socket goes: the retry connects afresh
    r = client.Get(path);
  }
  return r;
}

/// The start of worker `i`'s round, on the round's thread: true when the worker's own answers
/// since the last round already say it is alive, so it is not polled.
bool answered_since(Fleet& fleet, size_t i, Polled& p) {
  Fleet::Worker& w = fleet.at(i);
  // A worker down when a round starts may come back as another engine, also when a failed
  // proxied request, not a failed poll, took it down: its KV capacity is read again once it is up.
  const bool healthy = w.healthy.load();
  if (!healthy) p.kv_asked = false;
  // A healthy worker that completed proxied requests since the last round is not polled: those
  // answers are better evidence than a GET /health, and each poll wakes the poller and the worker
  // (issue 54: at one agent session, a request a second, the poll's 2.5-2.8 wake-ups were 0.6-1.2
  // ms of the router's CPU a request, a fifth of it). Dynamo's canary health checks likewise
  // probe only endpoints idle for DYN_CANARY_WAIT_TIME. Its KV capacity, while unknown, is asked
  // alone. A worker that is down (a failed proxied request marks it down at once) is polled.
  const uint64_t answered = w.counters.answered.load();
  if (answered == p.answered_seen || !healthy) return false;
  p.answered_seen = answered;
  p.failed_polls = 0;
  return true;
}

/// One request of a round for worker `i`, on a poll thread. What it learns goes to the fleet only
/// while the worker is still the one it asked: present, not taken back since the request began
/// (a worker added back starts over, Fleet::add: an older answer, a failure count or a KV
/// capacity, is not about it), and the router not shutting down.
class PollJob {
 public:
  PollJob(Fleet& fleet, size_t i, Polled& p, const HealthPollOptions& opt, const std::atomic<bool>& stopping)
      : fleet_(fleet), w_(fleet.at(i)), i_(i), p_(p), opt_(opt), stopping_(stopping) {}

  /// GET /health; its verdict goes to the fleet.
  void health() {
    auto r = get(w_.pool.url().path_prefix + "/health");
    if (!current()) return;
    bool ok = r && r->status == 200;
    // A poll that got no answer from a worker that completed requests since the last poll is
    // not a failure: the worker is alive, its HTTP server busy (a thread-per-connection engine
    // with every thread streaming queues the poll's connection). Counting it turned overload into
    // an outage: at 2,000 streams on one dyn-mocker, the router marked its only worker down and
    // answered 503 "no healthy worker" (issue 16). A worker that stops answering proxied
    // requests too fails on the next poll, and a failed proxied request marks it down at once.
    const uint64_t answered = w_.counters.answered.load();
    const bool busy = !r && answered != p_.answered_seen;
    p_.answered_seen = answered;
    if (busy) {
      p_.failed_polls = 0;
      return;
    }
    std::string why = ok  ? "GET /health answered 200"
                      : r ? fmt::format("GET /health answered {}", r->status)
                          : "GET /health failed: " + httplib::to_string(r.error());
    if (ok) {
      // Worker metadata: dyn-mocker reports its block size here (vLLM's /health is empty).
      Json j = Json::parse(r->body, nullptr, false);
      if (j.is_object()) {
        auto it = j.find("kv_block_size");
        if (it != j.end() && it->is_number_unsigned() && it->get<uint64_t>() > 0 && it->get<uint64_t>() <= UINT32_MAX)
          fleet_.check_block_size(i_, it->get<uint32_t>(), "GET /health kv_block_size");
      }
      if (w_.refused) return fleet_.set_health(i_, false, "refused: block size mismatch");
      if (opt_.learn_kv_blocks && !p_.kv_asked) {
        p_.kv_asked = kv_blocks();
        if (!current()) return;  // removed or taken back while its GET /metrics waited
      }
    } else {
      p_.kv_asked = false;  // a worker that comes back may be another engine: ask again
    }
    p_.failed_polls = ok ? 0 : p_.failed_polls + 1;
    if (ok || p_.failed_polls >= std::max(1u, opt_.failure_threshold)) {
      if (!ok && p_.failed_polls > 1) why += fmt::format(" ({} polls in a row)", p_.failed_polls);
      fleet_.set_health(i_, ok, why);
    }
  }

  /// Asks GET /metrics for the worker's KV capacity: vLLM's info gauge
  /// `vllm:cache_config_info{...,block_size="B",...,num_gpu_blocks="N",...} 1.0` (dyn-mocker
  /// writes it too), N blocks of B tokens, recorded in router blocks (N x B / the router's block
  /// size). True once the worker answered (with the gauge or without it: an engine without one
  /// is not asked again until it comes back up), false when the request failed.
  bool kv_blocks() {
    auto r = get(w_.pool.url().path_prefix + "/metrics");
    if (!r || !current()) return false;
    constexpr std::string_view kInfo = "vllm:cache_config_info";
    const auto blocks = r->status == 200 ? http::prom_label_u64(r->body, kInfo, "num_gpu_blocks") : std::nullopt;
    if (!blocks || *blocks == 0 || *blocks > (uint64_t{1} << 40)) {
      // An engine without the gauge keeps the default (SPEC 3.3), also one that came back in
      // place of an engine that had it.
      if (w_.kv_blocks.load() != 0) fleet_.set_kv_blocks(i_, 0, "GET /metrics without vllm:cache_config_info");
      return true;
    }
    const auto tokens = http::prom_label_u64(r->body, kInfo, "block_size");
    uint64_t n = *blocks;
    if (tokens && *tokens > 0 && *tokens <= UINT32_MAX && fleet_.block_size() > 0)
      n = std::max<uint64_t>(1, *blocks * *tokens / fleet_.block_size());
    fleet_.set_kv_blocks(i_, n, "GET /metrics vllm:cache_config_info num_gpu_blocks");
    return true;
  }

 private:
  bool current() const { return !stopping_.load() && w_.present() && w_.revivals.load() == p_.revivals; }
  httplib::Result get(const std::string& path) const {
    return serve::get(*p_.client, path, opt_.timeout_ms, &stopping_);
  }

  Fleet& fleet_;
  Fleet::Worker& w_;
  const size_t i_;
  Polled& p_;
  const HealthPollOptions& opt_;
  const std::atomic<bool>& stopping_;
};

/// The threads a round's requests run on, so a worker that takes the connection and never
/// answers holds up its own polls only: one after another, it cost every other worker's poll the
/// whole --health-timeout-ms each round (issue 54's fresh-eyes run: with one worker stopped, a
/// killed one was marked down after 3,014 ms instead of about 30 ms at a 10 ms interval). A
/// thread starts when a request finds none free, so there are as many as requests were ever in
/// flight at once (one while every worker answers in time, at most one per worker: a worker
/// whose request still waits for its answer is left out of later rounds until it has one), as
/// Dynamo's health checks run a task per endpoint. A fixed number let that many hung workers
/// hold up everyone else's polls again (the next fresh-eyes run, at 16).
class PollThreads {
 public:
  PollThreads(Fleet& fleet, const HealthPollOptions& opt) : fleet_(fleet), opt_(opt) {}
  /// Cuts the requests in flight short (httplib's Client::stop() shuts their sockets; a hung
  /// worker would otherwise hold the router's exit for its timeout), then ends the threads. A
  /// request still connecting is not cut: it ends by its timeout.
  ~PollThreads() {
    std::vector<httplib::Client*> in_flight;
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
      for (Polled& p : polled_)
        if (p.in_flight) in_flight.push_back(p.client.get());
    }
    cv_.notify_all();
    // Outside the lock: stop() waits while its client connects (httplib holds the socket's mutex
    // through connect), so a poll to a host that drops the SYN still holds the exit for up to its
    // timeout; the others are cut short.
    for (httplib::Client* c : in_flight) c->stop();
    for (auto& t : threads_) t.join();
  }
  PollThreads(const PollThreads&) = delete;
  PollThreads& operator=(const PollThreads&) = delete;

  /// Worker i's state for the round's thread, or nullptr while a request of an earlier round is
  /// still in flight (a poll thread has it).
  Polled* idle(size_t i) {
    std::lock_guard lk(mu_);
    if (polled_.size() <= i) polled_.resize(i + 1);  // a deque: the others' states stay where they are
    return polled_[i].in_flight ? nullptr : &polled_[i];
  }
  /// Hands worker i (idle(i) was not null) to a poll thread: GET /metrics alone when
  /// `metrics_only`, else its GET /health.
  void submit(size_t i, bool metrics_only) {
    std::lock_guard lk(mu_);
    polled_[i].in_flight = true;
    polled_[i].metrics_only = metrics_only;
    queue_.push_back(i);
    if (queue_.size() > waiting_) threads_.emplace_back([this] { work(); });
    else cv_.notify_one();
  }

 private:
  void work() {
    std::unique_lock lk(mu_);
    for (;;) {
      ++waiting_;
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      --waiting_;
      if (stopping_) return;
      const size_t i = queue_.front();
      queue_.pop_front();
      Polled& p = polled_[i];
      lk.unlock();
      PollJob job(fleet_, i, p, opt_, stopping_);
      if (p.metrics_only) p.kv_asked = job.kv_blocks();
      else job.health();
      lk.lock();
      p.in_flight = false;
    }
  }

  Fleet& fleet_;
  const HealthPollOptions& opt_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Polled> polled_;  ///< by worker index; a state is the round's while idle, its thread's while in flight
  std::deque<size_t> queue_;   ///< workers to poll, in order
  std::vector<std::thread> threads_;
  size_t waiting_ = 0;  ///< threads waiting for a request
  std::atomic<bool> stopping_ = false;
};

}  // namespace

HealthPoller::HealthPoller(Fleet& fleet, HealthPollOptions options) : fleet_(fleet), opt_(options) {
  fleet_.on_circuit_open([w = wake_] {
    {
      std::lock_guard lk(w->mu);
      w->circuit_opened = true;
    }
    w->cv.notify_one();
  });
}

void HealthPoller::run() {
  PollThreads polls(fleet_, opt_);
  // Each worker is polled once per period. While a circuit is open the loop wakes every 100 ms
  // (or each period, if shorter) so it turns half-open on time (Fleet::tick); otherwise it sleeps
  // until the next round.
  const auto tick = std::chrono::microseconds(static_cast<int64_t>(std::min(opt_.interval_ms, 100.0) * 1000));
  auto next_round = std::chrono::steady_clock::now();
  for (;;) {
    const bool open = fleet_.tick();
    if (std::chrono::steady_clock::now() >= next_round) {
      next_round += std::chrono::microseconds(static_cast<int64_t>(opt_.interval_ms * 1000));
      // Workers that joined since the last round are polled from this one on; removed ones not.
      for (size_t i = 0, n = fleet_.size(); i < n; ++i) {
        Polled* p = polls.idle(i);
        if (!p) continue;  // an earlier round's request still waits for its answer
        const Fleet::Worker& w = fleet_.at(i);
        if (!w.present()) {
          *p = Polled{};
          continue;
        }
        if (const uint64_t revivals = w.revivals.load(); p->revivals != revivals) {
          *p = Polled{};  // taken back after a removal: it starts over (Fleet::add)
          p->revivals = revivals;
        }
        if (!p->client) p->client = poll_client(w.pool, opt_.timeout_ms);
        if (!answered_since(fleet_, i, *p)) polls.submit(i, false);
        else if (opt_.learn_kv_blocks && !p->kv_asked) polls.submit(i, true);
      }
      if (next_round < std::chrono::steady_clock::now()) next_round = std::chrono::steady_clock::now();
    }
    Wake& w = *wake_;
    std::unique_lock<std::mutex> lk(w.mu);
    const auto until = open ? std::min(next_round, std::chrono::steady_clock::now() + tick) : next_round;
    if (w.cv.wait_until(lk, until, [&] { return w.stopping || w.circuit_opened; }) && w.stopping) return;
    w.circuit_opened = false;
  }
}

}  // namespace dyn::serve
