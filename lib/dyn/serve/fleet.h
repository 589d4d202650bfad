// The workers a frontend serves over: each one's URL, connection pool, health, reported KV block
// size and counters, and the one rule that says when a worker is marked down or refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dyn/http/proxy.h"

namespace dyn::serve {

/// Per-worker counters, exported by the metrics page (dyn_worker_*).
struct WorkerCounters {
  std::atomic<uint64_t> requests{0};   ///< requests dispatched to the worker
  std::atomic<uint64_t> errors{0};     ///< of those, ended in an error (HTTP >= 400, transport, cut)
  std::atomic<uint64_t> cancelled{0};  ///< client went away
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> answered{0};  ///< ended with a complete response (not exported: health's evidence)
  std::atomic<uint64_t> input_tokens{0}, output_tokens{0}, cached_tokens{0};
};

/// The worker list (worker id = index, SPEC: the order of --worker). A worker's state is read and
/// written from any thread (loop threads, the health poller, KV event subscribers); each worker
/// is one object whose address never changes.
class Fleet {
 public:
  /// One worker.
  struct Worker {
    Worker(std::string u, const http::UpstreamUrl& parsed, http::EventLoop& loop, const http::UpstreamTimeouts& t)
        : url(std::move(u)), pool(parsed, loop, t) {}
    const std::string url;  ///< as given on the command line
    http::UpstreamPool pool;
    WorkerCounters counters;
    std::atomic<bool> healthy{true};
    /// Block size the worker reported (its /health metadata or an event); 0 = not known yet.
    std::atomic<uint32_t> block_size{0};
    /// Refused for a block size mismatch: kept out of routing, its events ignored.
    std::atomic<bool> refused{false};
    std::atomic<bool> mismatch_warned{false};
  };

  /// `block_size`: the router's KV block size, which every worker must share unless
  /// `allow_block_size_mismatch` (0 = capture mode: no rule). Errors (Fatal, exit 2): a bad URL.
  Fleet(const std::vector<std::string>& urls, http::EventLoop& loop, const http::UpstreamTimeouts& timeouts,
        uint32_t block_size, bool allow_block_size_mismatch);

  size_t size() const { return workers_.size(); }
  Worker& at(size_t i) { return *workers_[i]; }
  const Worker& at(size_t i) const { return *workers_[i]; }
  /// The first healthy worker (for requests any worker can answer); nullopt when none is.
  std::optional<size_t> first_healthy() const;

  /// Called on every change of a worker's health, before the change is noted on stderr (the
  /// router and the admission controller follow it). Set once, before any thread uses the fleet.
  void on_health_change(std::function<void(size_t worker, bool healthy)> fn) { on_change_ = std::move(fn); }
  /// Marks worker `i` healthy or down and notes each change on stderr with its cause, so an
  /// operator can tell a failed poll from a failed request.
  void set_health(size_t i, bool ok, const std::string& why);
  /// Records worker i's block size from `source` (the /health metadata or a KV event). A
  /// mismatch refuses the worker (marked down, said once on stderr) unless mismatches are
  /// allowed (then a warning, once). False when the worker is (now) refused.
  bool check_block_size(size_t i, uint32_t bs, const char* source);
  /// Closes every worker's idle upstream connections (http::UpstreamPool::close_idle): what lets
  /// the event loop stop at once when the server does.
  void close_idle() {
    for (auto& w : workers_) w->pool.close_idle();
  }

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
  uint32_t block_size_;
  bool allow_mismatch_;
  std::function<void(size_t, bool)> on_change_;
};

}  // namespace dyn::serve
