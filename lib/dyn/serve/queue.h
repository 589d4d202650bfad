// The one queue of a live frontend (SPEC 3.4): every request held back before a worker (by
// program admission, --max-concurrent-requests or a busy threshold) waits here, in policy order,
// and gets one set of answers (429 queue full, 503 with Retry-After past the time limit).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/http/prometheus.h"
#include "dyn/route/admission.h"
#include "dyn/route/priority.h"
#include "dyn/route/queue.h"
#include "dyn/route/router.h"

namespace dyn::serve {

/// Why a request waits, and the error `type` it gets when it cannot (Dynamo keeps the worker
/// reasons apart: AllEligibleWorkersOverloaded, PinnedWorkerOverloaded, no endpoint).
enum class HoldReason { kConcurrency, kAllBusy, kPinnedBusy, kAdmission, kNoWorker };
/// "concurrency_limit", "all_workers_overloaded", "pinned_worker_overloaded", "admission_paused",
/// "no_compatible_worker".
const char* hold_reason_type(HoldReason r);

/// What one non-blocking placement attempt of a queued request found.
struct PlaceOutcome {
  enum class Kind { kPlaced, kBlocking, kAllBusy, kPinnedBusy, kFailed } kind = Kind::kPlaced;
  uint64_t worker = 0;  ///< kPinnedBusy: the busy worker
  int status = 0;       ///< kFailed: the answer (the request's own problem, or no worker)
  std::string type, message;
};

/// How a held request's wait ended.
struct QueueVerdict {
  /// kPlaced: the queue placed it (into what the request's place() filled in); kPlace: go and
  /// place it yourself (a call that may block: a shared binding store, an initializing binding);
  /// kReject: answer status/type/message, with Retry-After: 1 for 429 and 503; kCancelled: its
  /// client hung up (cancel()), the request ends as cancelled (`message` says where it waited).
  enum class Kind { kPlaced, kPlace, kReject, kCancelled } kind = Kind::kReject;
  int status = 0;
  std::string type, message;
  double waited_ms = 0;  ///< in the queue (dyn.router_queue_ms)
  double paused_ms = 0;  ///< held by program admission before (dyn.pause_ms)
  uint64_t depth = 0;    ///< the queue depth it met entering (request.queue_depth; 0: held by admission)
  /// kCancelled while admission held it: the controller dropped its ticket, so its turn never
  /// started (nothing to report at its end); false when a release had come first.
  bool admission_withdrawn = false;
};

/// A request offered to the queue.
struct QueuedRequest {
  /// Its id is set by the queue; its cost too, when it must wait: max(1, tokens - the cached
  /// tokens the router predicts for `sequence_hashes`), fixed then (SPEC 3.4).
  route::QueueItem item;
  std::span<const uint64_t> sequence_hashes;  ///< complete blocks; valid until resume()
  uint64_t tokens = 0;
  /// Under the queue's lock: a placement that refuses busy workers and never blocks (kBlocking
  /// where it would), its lease kept by the request. Its argument: the worker program admission
  /// released it to (-1 = none).
  std::function<PlaceOutcome(int)> place;
  /// Called once when the wait ends, on the handler pool.
  std::function<void(QueueVerdict)> resume;
};

/// What enter() did.
struct Entered {
  bool go = false;        ///< dispatch now (a concurrency slot is held)
  bool queued = false;    ///< resume() will be called
  uint64_t id = 0;        ///< its item (queued): cancel() takes it
  uint64_t depth = 0;     ///< queue depth it met (queued)
  QueueVerdict rejected;  ///< !go && !queued: answer this now
};

/// Queue figures for /metrics, per class in class order.
struct QueueStats {
  struct Class {
    std::string name;
    uint64_t waiting = 0, queued_total = 0, dispatched_total = 0;
  };
  std::vector<Class> classes;
  uint64_t deferred = 0;    ///< held by admission
  uint64_t dispatched = 0;  ///< holding a concurrency slot now
  /// rejections by (outcome "queue_full" | "timeout" | "no_compatible_worker" | "shutdown", reason type)
  std::map<std::pair<std::string, std::string>, uint64_t> rejected;
};

/// The queue in front of the workers. A request that is ready (identity, body, hashes, priority)
/// enter()s: it goes at once while nothing holds it (a slot under the cap, no one waiting), else
/// it waits as an item of route::PolicyQueue, in the lane of its pinned worker when it has one.
/// pump() (on every end, first token, health or threshold change and admission release) sends
/// waiting items in policy order while the cap and the workers' busy thresholds allow: each is
/// placed there and then, so the next one sees its load. A request held past the time limit gets
/// 503 (Retry-After), one that finds the queue full 429. Requests held by program admission
/// (SPEC 9) wait as deferred items until a scheduler tick releases them; they do not count
/// toward --queue-size and their time limit starts when released (ThunderAgent's own resume
/// timeout bounds the pause). A request whose client hangs up leaves at once (cancel(), issue
/// 51.4). Thread-safe; a timer thread answers timeouts.
class RequestQueue {
 public:
  /// `config` (validated by the caller) and `router` must outlive the queue; `post` runs work on
  /// the handler pool; `max_concurrent` 0 = no cap; `admission` (null = none; outlives the
  /// queue): program admission defers requests.
  RequestQueue(const route::QueueConfig& config, size_t max_concurrent, route::Router& router, const Clock& clock,
               std::function<void(std::function<void()>)> post, route::AdmissionController* admission);
  ~RequestQueue();
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  const route::QueueConfig& config() const { return cfg_; }
  route::PriorityResolver& resolver() { return resolver_; }
  /// Whether anything can hold a request now (a cap, a busy threshold, admission): when not,
  /// enter() is never needed (the relay's path stays as cheap as without a queue).
  bool active() const { return active_.load(std::memory_order_relaxed); }
  /// Re-reads whether busy thresholds are set (after POST /v1/busy_threshold) and pumps.
  void thresholds_changed();

  /// A ready request. nullopt `why`: a fresh request, which goes when a slot is free and nobody
  /// waits (the slot is then its own). Set: its own placement, after a go, found every worker
  /// busy (kAllBusy) or its pinned one (kPinnedBusy, `lane` = that worker): it gives its slot
  /// back and waits.
  Entered enter(QueuedRequest r, std::optional<HoldReason> why = std::nullopt,
                std::optional<uint64_t> lane = std::nullopt);
  /// A request admission holds (SPEC 9) under `ticket`; released by admission_released().
  /// Returns its item (for cancel()).
  uint64_t defer(uint64_t ticket, QueuedRequest r);
  /// The client of waiting or deferred item `id` hung up (issue 51.4): it leaves the queue (its
  /// class's depth, the deferred count and its time limit with it; the next waiters are pumped)
  /// and resume() gets kCancelled with its waits. A deferred one's ticket is withdrawn from
  /// admission (AdmissionController::withdraw), or, when a tick released it already, its release
  /// is dropped on arrival. False when the item is no longer held (it went, or was answered).
  bool cancel(uint64_t id);
  /// Admission released these tickets: each becomes a waiting item (in its worker's lane when
  /// `worker` >= 0), its wait in `waited_ms` added to the request's pause.
  void admission_released(const std::vector<route::AdmissionRelease>& released);
  /// A slot taken by enter() (go) or a kPlaced/kPlace verdict is given back (the request ended,
  /// or its own placement found its workers busy and it enter()s again).
  void release_slot();
  /// Sends what can go now (see the class comment).
  void pump();
  /// pump() when someone waits (an atomic check otherwise).
  void pump_if_waiting() {
    if (waiting_.load(std::memory_order_relaxed) > 0) pump();
  }
  /// Every waiting and deferred request is answered 503 (the router shuts down); new ones too.
  void shutdown();

  /// session_las: a request of `session` was placed with `uncached` prompt tokens (its service),
  /// and a session ended. No-ops unless a class uses session_las.
  void record_service(const std::string& session, uint64_t uncached);
  void forget_session(const std::string& session);
  bool uses_las() const { return uses_las_; }

  /// The wait of a request that went, per class, for the histogram of /metrics.
  void observe_wait(size_t class_index, double ms);
  QueueStats stats() const;
  /// The wait histograms, in class order.
  const std::vector<std::unique_ptr<http::LatencyHistogram>>& waits() const { return wait_hist_; }

 private:
  struct Held {
    QueuedRequest req;
    double since_ms = 0;
    bool ready = false;  ///< in the policy queue (else deferred by admission)
    HoldReason why = HoldReason::kAllBusy;
    double paused_ms = 0;      ///< admission's hold before it became ready
    int admitted_worker = -1;  ///< the worker admission released it to
    uint64_t ticket = 0;       ///< admission's (deferred)
    uint64_t depth = 0;        ///< the depth it met entering (0: held by admission first)
  };
  /// Pops and places what can go; the verdicts to deliver after unlocking go into `out`.
  void pump_locked(std::vector<std::pair<std::function<void(QueueVerdict)>, QueueVerdict>>& out);
  void deliver(std::vector<std::pair<std::function<void(QueueVerdict)>, QueueVerdict>>& out);
  /// A ready item that leaves: its time limit is dropped.
  void erase_deadline(const Held& h);
  HoldReason reason_now(const Held& h) const;
  uint64_t cost_of(const QueuedRequest& r) const;
  QueueVerdict reject(const Held& h, const char* outcome, int status, const std::string& message);
  void timer_loop();

  const route::QueueConfig& cfg_;
  const size_t max_concurrent_;
  route::Router& router_;
  const Clock& clock_;
  std::function<void(std::function<void()>)> post_;
  route::AdmissionController* const admission_;
  bool uses_las_ = false;
  route::PriorityResolver resolver_;
  std::atomic<bool> active_{false};
  std::atomic<uint64_t> waiting_{0};  ///< ready items

  mutable std::mutex mu_;
  route::PolicyQueue queue_;
  std::unordered_map<uint64_t, Held> held_;          ///< by item id: ready and deferred
  std::unordered_map<uint64_t, uint64_t> deferred_;  ///< admission ticket -> item id
  /// Releases of tickets not deferred yet (a tick between admit() and defer()).
  std::unordered_map<uint64_t, route::AdmissionRelease> early_;
  /// Tickets of cancelled requests that a tick released before the cancel: their release is dropped.
  std::unordered_set<uint64_t> withdrawn_;
  std::multimap<double, uint64_t> deadlines_;  ///< ready items' time limits
  uint64_t next_id_ = 1;
  size_t dispatched_ = 0;  ///< slots held
  bool shutdown_ = false;
  std::vector<uint64_t> queued_total_;
  std::map<std::pair<std::string, std::string>, uint64_t> rejected_;
  std::vector<std::unique_ptr<http::LatencyHistogram>> wait_hist_;

  std::condition_variable timer_cv_;
  bool timer_stop_ = false;
  std::thread timer_;
};

}  // namespace dyn::serve
