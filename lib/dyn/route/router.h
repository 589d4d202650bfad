// The routing engine (SPEC 2, 3): KV-aware placement, load accounting and the session-affinity
// table, shared by offline routing (dyn-route decide, the simulator) and the live frontend.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/kv/block_event.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/base/random.h"
#include "dyn/kv/prefix_index.h"
#include "dyn/route/config.h"
#include "dyn/route/quality.h"

namespace dyn::route {

/// What happened to the session binding of a request (SPEC 5.1 `dyn.binding`).
enum class BindingOutcome {
  kNone,     ///< no binding involved (affinity off, no session, or an explicit worker target)
  kNew,      ///< no live binding: placed by the policy, binds on commit
  kHit,      ///< followed a live binding (or an initializing one it waited for)
  kRebound,  ///< the binding moved: bound worker invalid (hard) or not eligible (soft)
  kExpired,  ///< a binding existed but its idle TTL had passed: placed anew, binds on commit
};
/// "none", "new", "hit", "rebound", "expired".
const char* binding_name(BindingOutcome b);

/// Why a binding moved (a kRebound placement; SPEC 5.1 `dyn.rebind_reason`, docs/records.md). The
/// first four are forced: the bound worker could not take the turn, so the session had to move
/// (dyn-bind check reports them apart from violations). kBusy is soft affinity's own move: the
/// bound worker was over a busy threshold and the policy preferred another (SPEC 2.3).
enum class RebindReason {
  kNone,            ///< no move
  kUnhealthy,       ///< the bound worker failed its health checks
  kRemoved,         ///< the bound worker left the worker set
  kDrained,         ///< the bound worker is draining (takes no new sessions)
  kDispatchFailed,  ///< the dispatch to the bound worker failed; the retry went elsewhere
  kBusy,            ///< soft affinity: the bound worker was busy, the policy chose another
};
/// Every reason by its name in records (dyn.rebind_reason), in the order above; kNone has none.
inline constexpr Named<RebindReason> kRebindReasons[] = {
    {RebindReason::kUnhealthy, "unhealthy", "the bound worker failed its health checks"},
    {RebindReason::kRemoved, "removed", "the bound worker left the worker set"},
    {RebindReason::kDrained, "drained", "the bound worker was draining"},
    {RebindReason::kDispatchFailed, "dispatch_failed", "the dispatch to the bound worker failed"},
    {RebindReason::kBusy, "busy", "soft affinity: the bound worker was busy"},
};
/// The record name of `r` ("" for kNone).
inline const char* rebind_reason_name(RebindReason r) {
  return r == RebindReason::kNone ? "" : name_in(kRebindReasons, r);
}
/// Whether a move for `r` was forced on the session (every reason but kBusy and kNone).
inline bool forced_move(RebindReason r) { return r != RebindReason::kNone && r != RebindReason::kBusy; }

/// A worker as the router knows it. `id` is the caller's worker id (serve: 0..N-1 in --worker
/// order; simulator: 0..N-1). `block_size` is the worker's KV block size in tokens (0 = unknown,
/// not checked); `kv_blocks` its capacity in router blocks (0 = RouterConfig::worker_kv_blocks).
struct WorkerSpec {
  uint64_t id = 0;
  uint32_t block_size = 0;
  uint64_t kv_blocks = 0;
};

/// After a failed dispatch: whether to retry once (hard affinity, SPEC 2.3) and what to avoid.
struct RetryAdvice {
  bool retry = false;         ///< the binding was invalidated; place again once
  uint64_t avoid_worker = 0;  ///< the worker that failed
  bool was_bound = false;     ///< the failed placement was under a live binding
};

/// One request to place. Spans must stay valid for the duration of Router::place().
struct RouteRequest {
  /// SPEC 1.2 identity; "" = none. A non-empty parent binds under the parent group key (SPEC 2.4).
  std::string session_id;
  std::string parent_session_id;
  /// Sequence hashes of the request's complete blocks at the router block size (SPEC 4.1; a
  /// trailing partial block is not included).
  std::span<const uint64_t> sequence_hashes;
  /// Prompt tokens, the partial block included (SPEC 3.3: zero-block prompts still count as load).
  uint64_t tokens = 0;
  /// Explicit worker target (x-dynamo-worker-instance-id): always wins over a binding; required
  /// in direct mode.
  std::optional<uint64_t> worker;
  /// `worker` is the admission controller's choice (SPEC 9), not the client's: a non-max-overlap
  /// pick it forces is counted as NonMaxCause::kAdmission.
  bool worker_from_admission = false;
  /// Fill Placement::explain() with every worker's score.
  bool explain = false;
  /// Set on the one retry after Placement::fail() advised it: the failed worker is avoided.
  std::optional<RetryAdvice> retry;
  /// Workers a retry must not get (ids of the workers its earlier attempts failed on). A binding
  /// to one of them moves (RebindReason::kUnhealthy).
  std::span<const uint64_t> avoid_workers;
  /// true (live server): a request whose key is "initializing" blocks until that first dispatch
  /// commits or fails (SPEC 2.2.2). false (single-threaded simulator): it follows the
  /// initializing placement's worker at once instead of blocking.
  bool wait_for_initializing = true;
  /// With wait_for_initializing: where the request would block, place() fails at once with
  /// kPlaceWouldWait instead, changing nothing, so an event-loop caller can repeat the call on a
  /// thread that may block.
  bool fail_instead_of_waiting = false;
  /// The caller gave up (a live client hung up, issue 51.4): a wait for an initializing binding
  /// ends with kPlaceCancelled, changing nothing, once Router::wake_waiters() is called after the
  /// flag is set (checked when the wait starts too). Null: the wait ends only with the binding.
  const std::atomic<bool>* cancelled = nullptr;
  /// The router queue's placement (SPEC 3.4): a worker over a busy threshold is never chosen.
  /// Instead of placing on a busy one, place() fails, changing nothing, with kPlaceAllBusy (every
  /// usable worker is busy) or kPlacePinnedBusy (the explicit worker or a hard binding's worker
  /// is busy: it is not rerouted, as Dynamo's PinnedWorkerOverloaded), that worker's id then in
  /// *busy_worker when given. false: a busy worker is avoided unless all are (SPEC 3.2).
  bool refuse_busy = false;
  uint64_t* busy_worker = nullptr;
};

/// The Error::exit_code of a place() that would have waited (RouteRequest::fail_instead_of_waiting).
inline constexpr int kPlaceWouldWait = -1;
/// The Error::exit_codes of a refuse_busy place(): every usable worker is over a busy threshold
/// (Dynamo's AllEligibleWorkersOverloaded), or the pinned one is (PinnedWorkerOverloaded).
inline constexpr int kPlaceAllBusy = -2;
inline constexpr int kPlacePinnedBusy = -3;
/// The Error::exit_code of a place() whose wait for an initializing binding ended because its
/// request was cancelled (RouteRequest::cancelled).
inline constexpr int kPlaceCancelled = -4;

/// The busy thresholds (SPEC 3.2, 3.4), changeable while routing (POST /v1/busy_threshold).
/// Unset = that check never makes a worker busy; the checks are OR-ed.
struct BusyThresholds {
  std::optional<double> active_decode_blocks;        ///< fraction of the worker's KV blocks
  std::optional<uint64_t> active_prefill_tokens;     ///< tokens
  std::optional<double> active_prefill_tokens_frac;  ///< × max_num_batched_tokens
  std::optional<uint64_t> active_requests;           ///< requests in flight
  /// The same range checks as RouterConfig::validate (exit 2), naming the field.
  std::optional<Error> validate() const;
  bool any() const {
    return active_decode_blocks || active_prefill_tokens || active_prefill_tokens_frac || active_requests;
  }
};

/// Whether each worker can take one more request now without passing a busy threshold.
struct Availability {
  struct Worker {
    uint64_t id = 0;
    bool usable = false;  ///< present and healthy
    bool busy = false;    ///< over a busy threshold
  };
  std::vector<Worker> workers;  ///< worker order
  /// A request pinned to `id` can go: its worker is not busy (or is unusable, which placement
  /// itself answers).
  bool can_take(uint64_t id) const;
  /// An unpinned request can go: some usable worker is not busy, or none is usable.
  bool any() const;
  bool any_usable() const;
};

/// One worker's score in a decision (SPEC 3.2), for --explain and logs.
struct WorkerScore {
  uint64_t worker = 0;
  uint32_t overlap_blocks = 0;  ///< device (GPU) tier: leading blocks held
  double prefill_blocks = 0;    ///< prefill ahead + prompt blocks, less the overlap credit (SPEC 3.2)
  double decode_blocks = 0;
  double cost = 0;
  bool eligible = true;  ///< healthy, present and not busy (or all were busy)
  /// Tier-exclusive lower-tier overlaps (SPEC 3.3): host blocks continuing the device run, disk
  /// blocks continuing the host run. 0 when no lower tier is tracked.
  uint32_t host_blocks = 0, disk_blocks = 0;
  /// Blocks of the request in the shared pool at positions past the GPU run (--shared-cache-type).
  uint32_t shared_blocks = 0;
};

/// Measures the placement on `chosen` (a worker id among `scores`, which hold every present
/// worker's score at the moment of decision) against the eligible workers: predicted and best
/// cached tokens (overlap x `block_size`, at most `tokens`), avoidable prefill, margin, ties, and
/// the cause of a non-max-overlap pick: `steer` when a binding, admission or the client chose,
/// else kTie (its cost equals a max-overlap worker's), kLoad (lower), kPolicy (higher). Pure.
DecisionQuality assess_decision(std::span<const WorkerScore> scores, uint64_t chosen, Steer steer, uint32_t block_size,
                                uint64_t tokens);

/// assess_decision with the scores given one at a time and kept nowhere: the chosen worker's at
/// construction, then add() for every other present worker's, in any order; finish() is the
/// result assess_decision gives on the same scores (the router measures every placement over a
/// thousand workers without storing a thousand scores, issue 54).
class DecisionAssessor {
 public:
  DecisionAssessor(const WorkerScore& chosen, Steer steer, uint32_t block_size, uint64_t tokens);
  void add(const WorkerScore& s) {  // inline: called once per worker per placement
    if (!s.eligible) return;
    // best_cost_ follows best_: the cheapest eligible worker holding the most overlap so far.
    if (s.overlap_blocks > best_) {
      best_ = s.overlap_blocks;
      best_cost_ = s.cost;
    } else if (s.overlap_blocks == best_) {
      best_cost_ = std::min(best_cost_, s.cost);
    }
    runner_up_ = runner_up_ ? std::min(*runner_up_, s.cost) : s.cost;
    if (std::fabs(s.cost - win_.cost) <= eps_) ++ties_;
  }
  DecisionQuality finish() const;
  const WorkerScore& chosen() const { return win_; }

 private:
  WorkerScore win_;
  Steer steer_;
  uint32_t block_size_;
  uint64_t tokens_;
  double eps_;
  uint32_t best_;     // most overlap among the eligible workers and the chosen one
  double best_cost_;  // lowest cost among the eligible workers with best_ overlap
  std::optional<double> runner_up_;
  uint32_t ties_ = 0;
};

class Router;

/// A placed request: the decision plus its lease on the worker's load and on the session
/// binding. Move-only. Lifecycle: Router::place() -> commit() once dispatch succeeded (the
/// worker accepted and started a response) -> first_token() when prefill is done (optional) ->
/// finish() when the response stream ends for any reason. fail() instead of commit() when the
/// dispatch failed. Destroying an uncommitted placement counts as fail(cancelled); destroying a
/// committed one as finish(). Methods are thread-safe (they lock the router); one Placement must
/// not be used from two threads at once. The Router must outlive its placements.
class Placement {
 public:
  Placement() = default;
  Placement(Placement&& o) noexcept;
  Placement& operator=(Placement&& o) noexcept;
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;
  ~Placement();

  uint64_t worker() const { return worker_; }
  BindingOutcome binding() const { return binding_; }
  /// Why the binding moved, for a kRebound placement (kNone otherwise).
  RebindReason rebind_reason() const { return rebind_reason_; }
  /// Leading blocks predicted cached on the chosen worker.
  uint32_t overlap_blocks() const { return overlap_; }
  /// min(overlap_blocks × block_size, tokens): the predicted `request.cached_tokens`.
  uint64_t cached_tokens() const { return cached_tokens_; }
  /// Complete blocks of the request (the span's length).
  uint32_t request_blocks() const { return request_blocks_; }
  /// The binding key used ("" when none): session id, or the parent group key (SPEC 2.4).
  const std::string& binding_key() const { return key_; }
  /// Every worker's score, when RouteRequest::explain was set (in worker order).
  const std::vector<WorkerScore>& explain() const { return explain_; }
  /// The decision measured against the eligible workers (assess_decision), for every placement.
  const DecisionQuality& quality() const { return quality_; }
  bool valid() const { return router_ != nullptr; }

  /// Dispatch succeeded: commits a new or rebound binding (a soft rebind only if no newer rebind
  /// committed meanwhile, SPEC 2.3), wakes waiters, and records the routed blocks in the
  /// approximate index. Idempotent.
  void commit();
  /// Prefill finished (first token): the request's uncached tokens leave "prefill in flight".
  void first_token();
  /// Dispatch failed. Releases the load; an initializing binding is removed (one waiter then places
  /// itself); in hard mode a bound key is invalidated unless `client_cancelled`. Returns whether
  /// to retry once with RouteRequest::retry set to the advice.
  RetryAdvice fail(bool client_cancelled = false);
  /// Response stream ended (finished, failed, cancelled): releases the load and the binding lease;
  /// the binding's idle TTL starts when its last lease ends (SPEC 2.2.3). Idempotent.
  void finish();

 private:
  friend class Router;
  Router* router_ = nullptr;
  uint32_t slot_ = 0;
  uint64_t worker_ = 0;
  BindingOutcome binding_ = BindingOutcome::kNone;
  RebindReason rebind_reason_ = RebindReason::kNone;
  uint32_t overlap_ = 0;
  uint64_t cached_tokens_ = 0;
  uint32_t request_blocks_ = 0;
  std::string key_;
  std::vector<WorkerScore> explain_;
  DecisionQuality quality_;
  void release();  // finish() when committed, else fail(cancelled)
};

/// One row of the binding table (GET /v1/bindings, dyn-bind live).
struct BindingInfo {
  std::string key;                ///< session id, or "" for a parent group (see parent_session_id)
  std::string parent_session_id;  ///< set for a parent group: the parent whose subagents share it
  uint64_t worker = 0;
  bool initializing = false;  ///< first dispatch not committed yet
  uint64_t active_leases = 0;
  uint64_t version = 0;                    ///< bumped by every committed rebind
  std::optional<double> idle_deadline_ms;  ///< router clock ms when it expires; unset while leased
};

/// Counters for Prometheus and summaries.
struct RouterStats {
  uint64_t decisions = 0;
  uint64_t binding_new = 0, binding_hit = 0, binding_rebound = 0, binding_expired = 0, binding_none = 0;
  uint64_t bindings_live = 0;
  uint64_t table_full = 0;  ///< new bindings refused at the 65,536 limit
  uint64_t waits = 0;       ///< requests that waited for an initializing binding
  std::vector<std::pair<uint64_t, uint64_t>> decisions_per_worker;  ///< (worker id, count), worker order
  QualityTotals quality;                                            ///< every placement's DecisionQuality (issue 55)
};

/// Load of one worker as the router accounts it (SPEC 3.2).
struct WorkerLoad {
  uint64_t worker = 0;
  bool healthy = true;
  uint64_t active_requests = 0;
  uint64_t active_blocks = 0;   ///< Σ ceil(tokens / block_size) of active requests
  uint64_t prefill_tokens = 0;  ///< uncached prompt tokens of requests before their first token
  uint64_t cached_blocks = 0;   ///< blocks the index holds for the worker
};

/// A worker KV event (SPEC 3.3), for RouterConfig::kv_events: kv::BlockEvent, which the KV event
/// feeds (kvevents::WorkerFeed) produce without depending on the router.
using KvEvent = kv::BlockEvent;
/// Parses {"type": "stored"|"removed"|"cleared", "block_hashes": [u64], "parent_hash"?: u64,
/// "medium"?: string (kv::tier_of_medium; default the device tier)} (also accepts "kind" for
/// "type"). Error (exit code 3) naming the problem.
Expected<KvEvent> kv_event_from_json(const Json& j);

/// Changes of the binding table that a shared binding store mirrors (dyn-route serve
/// --router-binding-store, several router replicas). Called with the router's lock held, so an
/// implementation must only queue work and never call back into the router.
class BindingListener {
 public:
  virtual ~BindingListener() = default;
  /// A lease on `key` ended (a finished or failed turn that kept the binding): its idle TTL
  /// restarts (SPEC 2.2.3). `parent` is the parent session id of a parent group ("" otherwise);
  /// `worker` the caller's worker id.
  virtual void lease_ended(const std::string& key, const std::string& parent, uint64_t worker) = 0;
  /// The binding of `key` to `worker` is gone: its first dispatch failed or was cancelled, or hard
  /// mode invalidated it after a failed dispatch (SPEC 2.2.2, 2.3).
  virtual void dropped(const std::string& key, const std::string& parent, uint64_t worker) = 0;
};

/// The router. Thread-safe: every public method takes one internal mutex (placement is a few
/// microseconds); waiting for an initializing binding releases it. Time comes only from the
/// injected clock (FakeClock offline), randomness only from the seeded generator, so offline runs
/// repeat exactly when calls arrive in the same order.
class Router {
 public:
  /// Throws Fatal(kExitUsage) when config.validate() fails. `clock` must outlive the router.
  Router(RouterConfig config, const Clock& clock);
  ~Router();
  /// Bytes the router's prefix index keeps per block a worker holds.
  static constexpr size_t kIndexBytesPerBlock = kv::PrefixIndex::kBytesPerBlock;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  const RouterConfig& config() const { return cfg_; }

  /// Adds a worker (or revives a removed one with the same id). Error (exit code 2) when the
  /// worker's block size is known and differs from the router's (SPEC 3.2, case 11): overlaps
  /// would silently be zero.
  std::optional<Error> add_worker(const WorkerSpec& spec);
  /// Removes a worker: it is no longer a candidate, its index entries are dropped and every
  /// binding to it is dropped (each told to the binding listener), never followed again: the
  /// session's next placement is "rebound" with RebindReason::kRemoved, even if the worker comes
  /// back meanwhile (SPEC 2.3). Active placements on it finish normally. Returns the number of
  /// bindings dropped.
  size_t remove_worker(uint64_t id);
  /// A draining worker takes no new placements; a binding to it moves at its next placement
  /// (RebindReason::kDrained, hard and soft alike) while its placements in flight finish normally.
  /// An explicit worker target still reaches it.
  void set_draining(uint64_t id, bool draining);
  /// True when a placement avoiding `avoid` has a candidate: a present, healthy, not draining
  /// worker outside the list (a retry's check before it gives up the failed response).
  bool any_eligible(std::span<const uint64_t> avoid) const;
  /// The binding of `key` (a session id or parent group key) was dropped elsewhere with
  /// `reason` (a shared store naming a worker this replica removed): unless the key is bound
  /// here, its next placement is reported as a move with that reason, as remove_worker() does.
  void note_moved(const std::string& key, RebindReason reason);
  /// Live bindings per worker id (GET /v1/workers bound_sessions), in worker order.
  std::vector<std::pair<uint64_t, uint64_t>> bindings_per_worker() const;
  /// Replaces the worker set (adds new ids, removes missing ones). First error aborts.
  std::optional<Error> set_workers(const std::vector<WorkerSpec>& specs);
  /// Health changes (serve's health checks): an unhealthy worker is not a candidate and a hard
  /// binding to it is invalid when next met.
  void set_healthy(uint64_t id, bool healthy);
  /// Worker `id`'s KV capacity in router blocks, as its engine reported it (serve's health poll:
  /// vLLM's cache_config_info num_gpu_blocks): the base of its decode-blocks threshold and, for
  /// the approximate index without --router-max-tree-size, its budget (SPEC 3.3), in place of
  /// RouterConfig::worker_kv_blocks. 0 = that default again. Unknown ids are ignored.
  void set_worker_kv_blocks(uint64_t id, uint64_t blocks);

  /// Places a request (SPEC 2.2, 2.3, 3.2). Steps: explicit worker wins; then the binding of the
  /// key (hard: the bound worker if valid, else rebind; soft: the bound worker while eligible);
  /// then the mode's policy over eligible workers. The request's load is charged at once.
  /// Errors: no workers (exit 4, HTTP 503); unknown explicit worker (400); direct mode without a
  /// worker (400); binding table full (503). May block (live mode) while the key initializes.
  Expected<Placement> place(const RouteRequest& request);
  /// Wakes every place() waiting for an initializing binding so it rereads its request's
  /// `cancelled` flag (a waiter whose flag is set returns kPlaceCancelled at once, the others wait
  /// on). Any thread; takes the lock only to order the wake-up after the flag (no lost wake-up).
  void wake_waiters();

  /// The busy thresholds in force, and a change of them (validated: an error changes nothing).
  BusyThresholds busy_thresholds() const;
  std::optional<Error> set_busy_thresholds(const BusyThresholds& t);
  /// Every worker's usability and busyness now (one lock), for the router queue.
  Availability availability() const;
  /// The most prompt tokens any usable worker holds cached (its leading blocks in the index),
  /// at most `tokens`: the router queue's prediction of a request's cached tokens (SPEC 3.4).
  uint64_t predicted_cached_tokens(std::span<const uint64_t> sequence_hashes, uint64_t tokens) const;

  /// Applies a worker's KV event to the index (event-fed mode). Unknown worker ids are ignored.
  void apply_kv_event(uint64_t worker_id, const KvEvent& event) { apply_kv_events(worker_id, {&event, 1}); }
  /// Applies a batch of a worker's KV events (one engine step's, as its event batch arrives), in
  /// order, under one lock: each run of events on one tier is one kv::PrefixIndex::apply_events
  /// call, whose cells load ahead across the events (SPEC 3.3). Unknown worker ids are ignored.
  void apply_kv_events(uint64_t worker_id, std::span<const KvEvent> events);

  /// Drops expired bindings and index blocks now (also done lazily every min(TTL, 30 s) of clock
  /// time during place()).
  void sweep();

  /// Installs the listener of binding changes (nullptr = none). It must outlive the router's use.
  void set_binding_listener(BindingListener* listener);
  /// Takes over a binding that the shared store holds (another replica made it): `key` (session
  /// id or parent group key, with `parent` the parent session id for a group) becomes bound to
  /// `worker`, committed, its idle TTL restarted unless leased. A local binding to another worker
  /// moves (its version is bumped, so an older soft rebind in flight cannot overwrite it); a key
  /// whose first dispatch is in flight here is left alone. Returns false (nothing done) for an
  /// unknown worker id or a full table.
  bool adopt_binding(const std::string& key, const std::string& parent, uint64_t worker);

  /// The binding table, sorted by key (parent groups by parent id), for GET /v1/bindings.
  std::vector<BindingInfo> bindings() const;
  RouterStats stats() const;
  std::vector<WorkerLoad> loads() const;

  struct Impl;  ///< implementation detail (router.cpp)

 private:
  friend class Placement;
  bool committed(const Placement& p) const;
  void commit(Placement& p);
  void first_token(Placement& p);
  RetryAdvice fail(Placement& p, bool cancelled);
  void finish(Placement& p);

  RouterConfig cfg_;
  const Clock& clock_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dyn::route
