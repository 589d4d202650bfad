// Worker health polls: GET /health on every worker of the fleet, and the circuit breakers' clock,
// on threads of their own (the rounds' thread and the poll threads).
#pragma once

#include <condition_variable>
#include <memory>
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

/// Polls each worker's GET /health and marks it up or down in the fleet (serve mode, SPEC 2.6).
/// A healthy worker that completed proxied requests since the previous round is not polled that
/// round (its answers prove it alive, as Dynamo's canary checks probe only idle endpoints; while
/// its KV capacity is unknown such a round asks GET /metrics alone). A worker goes down after
/// `failure_threshold` failed polls in a row (no answer, or not 200); a poll that got no answer
/// does not count when the worker completed proxied requests since the previous poll (busy, not
/// dead). A 200 brings it back; its `kv_block_size` metadata (dyn-mocker's) goes through the
/// fleet's block size rule, and its GET /metrics says its KV capacity (vLLM's cache_config_info
/// num_gpu_blocks) once it is up, and again each time it comes back up (whatever took it down).
/// Workers that join later are polled from the next round, removed ones no more, and one added
/// back starts over (a poll in flight across its removal is dropped). The requests run on threads
/// beside the rounds' own, one for each request in flight, so a worker that never answers holds up
/// its own polls only (left out of later rounds while one waits for its timeout). While a circuit
/// is open the rounds' thread also wakes every 100 ms to turn it half-open once its timeout passed
/// (Fleet::tick); otherwise it sleeps until its next round (a circuit that opens wakes it), since
/// each wake-up costs CPU (issue 54: ten a second were two thirds of an idle router's CPU).
class HealthPoller {
 public:
  /// Registers with `fleet` for circuit openings (Fleet::on_circuit_open): construct it before
  /// any thread uses the fleet.
  HealthPoller(Fleet& fleet, HealthPollOptions options);
  ~HealthPoller() { join(); }
  HealthPoller(const HealthPoller&) = delete;
  HealthPoller& operator=(const HealthPoller&) = delete;

  /// Starts the rounds' thread (poll threads start as requests need them).
  void start();
  /// Asks the threads to end after their current polls. Thread-safe; does not wait.
  void stop();
  /// stop(), then waits for the threads to end (polls waiting for an answer are cut short; one
  /// still connecting ends by its timeout).
  void join();

 private:
  void run();

  Fleet& fleet_;
  const HealthPollOptions opt_;
  std::thread thread_;
  /// What wakes the thread: stop(), or a circuit that opened since it last looked. Shared with
  /// the fleet's circuit listener, which may outlive this poller.
  struct Wake {
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    bool circuit_opened = false;
  };
  std::shared_ptr<Wake> wake_ = std::make_shared<Wake>();
};

}  // namespace dyn::serve
