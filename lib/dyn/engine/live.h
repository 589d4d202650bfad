// The engine run in real time: a stepping thread that sleeps each step's SPEC 8 duration and
// then hands the step's tokens to the requests' sinks (dyn-mocker's engine loop).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dyn/engine/engine.h"

namespace dyn::engine {

/// What the live engines of one process that share a G4 pool (SPEC 8.7: dyn-mocker --num-workers)
/// share besides it: one lock, because a transfer on the shared links completes on whichever
/// engine's clock moves them and runs the owning engine's handler (as in --sim, where one thread
/// steps every engine); and one clock origin, because the links compare the engines' times.
struct EngineGroup {
  std::mutex mu;
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
};

/// Runs an Engine on its own thread in real time. Each step is planned under the lock, the
/// thread sleeps until step start + duration (absolute deadlines, so steps do not drift), plans
/// the next step at once, then calls each affected request's sink with its TokenOutput. Requests
/// submitted while a step runs join the next step, as in the simulator (a request sent on seeing
/// a step's tokens joins the step after the one then under way). Thread-safe: submit/cancel/stats from any
/// thread; sinks run on the engine thread and must not block (push to a queue).
class LiveEngine {
 public:
  using Sink = std::function<void(const TokenOutput&)>;
  using KvListener = std::function<void(const std::vector<KvEvent>&)>;

  /// `group`: shared with the other engines of config.shared_g4 (null: the engine's own).
  explicit LiveEngine(EngineConfig config, std::shared_ptr<EngineGroup> group = nullptr);
  ~LiveEngine();  ///< stops the thread
  LiveEngine(const LiveEngine&) = delete;
  LiveEngine& operator=(const LiveEngine&) = delete;

  void start();
  void stop();
  /// A fresh request id (unique within this engine).
  uint64_t next_id();
  /// Queues a request; the sink receives one call per produced token (the last with
  /// finished = true). Errors come from Engine::add. `arrived`: when the request reached the
  /// server (before its body was parsed, tokenized and hashed). An idle engine starts its next
  /// step at the earliest arrival among the requests that woke it (never before its previous
  /// step ended), as the simulator starts a step at the arrival instant: the mock's own request
  /// handling, ~20 ms for an 87k-token prompt, is not added to the model's TTFT (issue 18's
  /// live-vs-simulated fidelity).
  Expected<bool> submit(RequestSpec spec, Sink sink,
                        std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now());
  /// Drops a request (client went away); its sink is not called again. Returns false when the
  /// sink had already been handed its finished output (or the id is unknown).
  bool cancel(uint64_t id);
  /// Applies a KV hint not tied to a request now (Engine::apply_hint on the step clock).
  std::vector<HintResult> apply_hint(const KvHint& h);
  /// Stats after ending the leases that expired by now (an idle engine runs no step to do it).
  EngineStats stats();
  EngineStats stats() const;
  /// Leading prompt blocks already cached (a router-style overlap probe).
  size_t cached_prefix_blocks(const std::vector<uint64_t>& hashes) const;
  /// Receives KV events after each step (config.kv_events), on the engine thread.
  void set_kv_listener(KvListener listener);

 private:
  void run();

  std::shared_ptr<EngineGroup> group_;
  std::mutex& mu_;  // group_->mu
  std::condition_variable cv_;
  Engine engine_;
  std::unordered_map<uint64_t, Sink> sinks_;
  KvListener kv_listener_;
  uint64_t next_id_ = 1;
  // The engine's clock counts ms from its group's epoch (its steps, tier links and hint leases).
  double clock_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - group_->epoch).count();
  }
  // Earliest arrival among requests submitted while the engine had no work (max = none).
  std::chrono::steady_clock::time_point idle_arrival_ = std::chrono::steady_clock::time_point::max();
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dyn::engine
