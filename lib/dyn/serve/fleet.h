// The workers a frontend serves over: each one's canonical URL, connection pool, state (serving,
// draining, removed), health, circuit breaker, reported KV block size and counters, and the one
// rule that says when a worker may be routed to. Workers join and leave at run time (issue 53).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
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
  std::atomic<uint64_t> retried{0};   ///< dispatches to it retried elsewhere (before the first byte)
  std::atomic<uint64_t> migrated{0};  ///< streams moved off it mid-generation (--migration-limit)
};

/// A worker's place in the fleet (GET /v1/workers `state`; "down" there is a serving worker
/// that is unhealthy or whose circuit is open).
enum class WorkerState : uint8_t {
  kServing,   ///< takes new sessions
  kDraining,  ///< no new sessions; bound sessions finish their turns in flight, then move
  kRemoved,   ///< gone: never routed to, its bindings dropped, its KV index freed
};
const char* worker_state_name(WorkerState s);

/// Where a worker came from (GET /v1/workers `source`): a --worker flag, the --worker-file, or
/// POST /v1/workers. The worker file removes only the workers it added.
enum class WorkerSource : uint8_t { kFlag, kFile, kApi };
const char* worker_source_name(WorkerSource s);

/// The per-worker circuit breaker's settings (SGLang model gateway's --cb-* flags and defaults).
struct CircuitOptions {
  bool enabled = true;             ///< --disable-circuit-breaker clears it
  unsigned failure_threshold = 5;  ///< consecutive failures that open the circuit
  unsigned success_threshold = 2;  ///< successes in half-open that close it
  double timeout_s = 30;           ///< open this long, then half-open
  double window_s = 60;            ///< a failure older than this does not count towards the next
};

/// One worker's circuit breaker (closed: routed to; open: not routed to until timeout_s has
/// passed; half-open: routed to again, closed by success_threshold successes in a row, opened
/// again by one failure). Thread-safe; touched once per dispatch outcome, never per chunk.
class CircuitBreaker {
 public:
  enum class State : uint8_t { kClosed, kOpen, kHalfOpen };
  /// A dispatch's outcome at `now_ms`. True when the state changed.
  bool record(bool success, double now_ms, const CircuitOptions& o);
  /// Open for timeout_s by `now_ms`: half-open. True when the state changed.
  bool tick(double now_ms, const CircuitOptions& o);
  /// Closed again, counts cleared (a worker added anew).
  void reset();
  State state() const { return state_.load(); }
  uint64_t opens() const { return opens_.load(); }
  unsigned consecutive_failures() const;

 private:
  mutable std::mutex mu_;
  std::atomic<State> state_{State::kClosed};
  std::atomic<uint64_t> opens_{0};
  unsigned failures_ = 0, successes_ = 0;
  double last_failure_ms_ = 0, opened_ms_ = 0;
};
/// "closed", "open", "half_open".
const char* circuit_name(CircuitBreaker::State s);

/// The worker list. A worker's id is its index, given once in the order workers join (SPEC: the
/// order of --worker, then additions) and kept for the run: a removed worker keeps its id, and
/// the same canonical URL added again gets it back, so trace rows name one worker by one id.
/// A worker's state is read and written from any thread (loop threads, the health poller, KV
/// event subscribers, admin requests); each worker is one object whose address never changes,
/// and the list only grows (at() and size() take no lock).
class Fleet {
 public:
  /// One worker.
  struct Worker {
    Worker(const http::UpstreamUrl& parsed, http::EventLoop& loop, const http::UpstreamTimeouts& t)
        : url(parsed.canonical), pool(parsed, loop, t) {}
    const std::string url;  ///< canonical (http::UpstreamUrl::canonical): the worker's one name
    http::UpstreamPool pool;
    WorkerCounters counters;
    std::atomic<WorkerState> state{WorkerState::kServing};
    std::atomic<WorkerSource> source{WorkerSource::kFlag};
    std::atomic<bool> healthy{true};
    /// healthy and its circuit not open: what the router and admission see (routable()).
    std::atomic<bool> routable{true};
    CircuitBreaker breaker;
    /// Block size the worker reported (its /health metadata or an event); 0 = not known yet.
    std::atomic<uint32_t> block_size{0};
    /// Refused for a block size mismatch: kept out of routing, its events ignored.
    std::atomic<bool> refused{false};
    std::atomic<bool> mismatch_warned{false};
    /// KV capacity the engine reported (vLLM's cache_config_info num_gpu_blocks), in router
    /// blocks; 0 = not known (set_kv_blocks).
    std::atomic<uint64_t> kv_blocks{0};
    /// Times the worker was taken back after a removal (add()): a health poll that began before
    /// one belongs to the worker as it was, and its answer is dropped.
    std::atomic<uint64_t> revivals{0};
    bool present() const { return state.load() != WorkerState::kRemoved; }
  };

  /// Most workers one frontend ever names (ids are not reused).
  static constexpr size_t kMaxWorkers = 4096;

  /// `block_size`: the router's KV block size, which every worker must share unless
  /// `allow_block_size_mismatch` (0 = capture mode: no rule). `urls` are added in order as
  /// WorkerSource::kFlag. Errors (Fatal, exit 2): a bad URL, the same worker twice.
  Fleet(const std::vector<std::string>& urls, http::EventLoop& loop, const http::UpstreamTimeouts& timeouts,
        uint32_t block_size, bool allow_block_size_mismatch, CircuitOptions circuit = {},
        const Clock& clock = RealClock::instance());

  size_t size() const { return count_.load(std::memory_order_acquire); }
  Worker& at(size_t i) { return *slots_[i].load(std::memory_order_acquire); }
  const Worker& at(size_t i) const { return *slots_[i].load(std::memory_order_acquire); }
  /// The first routable serving worker (for requests any worker can answer); nullopt when none.
  std::optional<size_t> first_healthy() const;
  /// The id of the worker named `url` (any spelling of it; removed ones included); nullopt when
  /// none is or the URL does not parse.
  std::optional<size_t> find(std::string_view url) const;

  /// Result of add().
  struct Added {
    size_t id = 0;
    bool created = false;                     ///< a new id (false: an existing worker, revived or already present)
    WorkerState was = WorkerState::kServing;  ///< its state before (when not created)
  };
  /// Adds the worker named `url` (or takes back a removed one by its id, as serving and healthy
  /// with a closed circuit; a draining one serves again). Errors (exit 2): a bad URL, the fleet
  /// full (kMaxWorkers).
  Expected<Added> add(std::string_view url, WorkerSource source);
  /// Sets worker i's state (drain or remove; add() makes it serve). The routable listener is not
  /// told: the Placer follows membership through its own calls.
  void set_state(size_t i, WorkerState s) { at(i).state = s; }

  /// Called on every change of a worker's routability (health and circuit together), before the
  /// change is noted on stderr (the router and the admission controller follow it). Set once,
  /// before any thread uses the fleet.
  void on_health_change(std::function<void(size_t worker, bool routable)> fn) { on_change_ = std::move(fn); }
  /// Marks worker `i` healthy or down and notes each change on stderr with its cause, so an
  /// operator can tell a failed poll from a failed request.
  void set_health(size_t i, bool ok, const std::string& why);
  /// A dispatch to worker i ended: `success` false for a connection error, a timeout, a 5xx or a
  /// cut stream (the circuit breaker's failures), true for a response relayed whole. A circuit
  /// that opens or closes is noted on stderr and changes routability.
  void record_outcome(size_t i, bool success);
  /// Open circuits whose timeout passed become half-open (called by the health poller's thread).
  /// True while a present worker's circuit is still open (the caller ticks again soon).
  bool tick();
  /// Called when a worker's circuit opens (on the thread that recorded the failure), so the
  /// health poller, asleep until its next round, ticks again within 100 ms. Set once, before any
  /// thread uses the fleet.
  void on_circuit_open(std::function<void()> fn) { on_open_ = std::move(fn); }
  const CircuitOptions& circuit() const { return circuit_; }
  /// The router's KV block size in tokens (0 in capture mode).
  uint32_t block_size() const { return block_size_; }
  /// Records worker i's block size from `source` (the /health metadata or a KV event). A
  /// mismatch refuses the worker (marked down, said once on stderr) unless mismatches are
  /// allowed (then a warning, once). False when the worker is (now) refused.
  bool check_block_size(size_t i, uint32_t bs, const char* source);
  /// Called when a worker's reported KV capacity changes (set_kv_blocks). Set once, before any
  /// thread uses the fleet.
  void on_kv_blocks(std::function<void(size_t worker, uint64_t blocks)> fn) { on_kv_blocks_ = std::move(fn); }
  /// Records worker i's KV capacity in router blocks as its engine reported it (`source` names
  /// where) and tells the on_kv_blocks listener; a change is noted on stderr. 0 = not reported
  /// (an engine without the gauge: the listener goes back to its default, SPEC 3.3).
  void set_kv_blocks(size_t i, uint64_t blocks, const char* source);
  /// Closes every worker's idle upstream connections (http::UpstreamPool::close_idle): what lets
  /// the event loop stop at once when the server does.
  void close_idle() {
    for (size_t i = 0; i < size(); ++i) at(i).pool.close_idle();
  }

 private:
  /// Recomputes worker i's routability and tells the listener when it changed.
  void update_routable(size_t i);

  http::EventLoop& loop_;
  http::UpstreamTimeouts timeouts_;
  std::unique_ptr<std::atomic<Worker*>[]> slots_;
  std::atomic<size_t> count_{0};
  std::vector<std::unique_ptr<Worker>> owned_;  ///< under mu_
  mutable std::mutex mu_;                       ///< one add() at a time (find() and at() take no lock)
  std::mutex routable_mu_;                      ///< one recomputation at a time, so the listener hears them in order
  uint32_t block_size_;
  bool allow_mismatch_;
  CircuitOptions circuit_;
  const Clock& clock_;
  std::function<void(size_t, bool)> on_change_;
  std::function<void(size_t, uint64_t)> on_kv_blocks_;
  std::function<void()> on_open_;
};

}  // namespace dyn::serve
