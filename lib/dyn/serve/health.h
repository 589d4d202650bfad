// Worker health polls: GET /health on every worker of the fleet, and the circuit breakers' clock,
// on a thread of its own.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "dyn/serve/fleet.h"

namespace dyn::serve {

/// How workers are polled (FrontendOptions' health_* settings).
struct HealthPollOptions {
  double interval_ms = 1000;       ///< polling period per worker
  double timeout_ms = 1000;        ///< a slower poll is a failed poll
  unsigned failure_threshold = 3;  ///< consecutive failed polls before a worker is marked down
  /// After a worker's first good poll (and again whenever it comes back up), read its KV
  /// capacity from GET /metrics (Fleet::set_kv_blocks). Off when --router-worker-kv-blocks is given.
  bool learn_kv_blocks = true;
};

/// Polls each worker's GET /health and marks it up or down in the fleet (serve mode). A worker
/// goes down after `failure_threshold` failed polls in a row, unless it completed proxied requests
/// since the previous poll (busy, not dead); a 200 brings it back, and its `kv_block_size`
/// metadata (dyn-mocker's) goes through the fleet's block size rule, and its GET /metrics says
/// its KV capacity (vLLM's cache_config_info num_gpu_blocks) once it is up. Workers that join later are
/// polled from the next round, removed ones no more. Between rounds (at least every 100 ms) the
/// thread turns open circuits whose timeout passed half-open (Fleet::tick), beside the polls.
class HealthPoller {
 public:
  HealthPoller(Fleet& fleet, HealthPollOptions options) : fleet_(fleet), opt_(options) {}
  ~HealthPoller() { join(); }
  HealthPoller(const HealthPoller&) = delete;
  HealthPoller& operator=(const HealthPoller&) = delete;

  /// Starts the polling thread.
  void start();
  /// Asks the thread to end after its current poll. Thread-safe; does not wait.
  void stop();
  /// stop(), then waits for the thread to end.
  void join();

 private:
  void run();

  Fleet& fleet_;
  const HealthPollOptions opt_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace dyn::serve
