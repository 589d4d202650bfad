// Placement and leases (serve mode): which worker serves a request (the router's policy and
// session bindings, a shared binding store, SPEC 9 admission) and what the request holds there
// until it ends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/route/admission.h"
#include "dyn/route/router.h"
#include "dyn/serve/binding_store.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/options.h"
#include "dyn/serve/queue.h"
#include "dyn/session/normalize.h"

namespace dyn::serve {

/// What one request holds from the Placer between its placement and its end.
struct Lease {
  std::optional<route::Placement> placement;  ///< the router's lease on the worker
  std::string admission_program;              ///< admitted by the controller: its turn's end is reported
};

/// How a request's turn ended, as the admission controller hears it (SPEC 9 tool boundary).
struct TurnEnd {
  bool ok = false;  ///< a successful response: its usage sets the program's working set
  uint64_t input_tokens = 0, output_tokens = 0;
  bool session_final = false;  ///< the session ends: its program is released
};

/// The routing side of a frontend in serve mode: owns the router (with the workers of the fleet
/// as its workers), the shared binding store (--router-binding-store), the admission
/// controller with its ticker and the queue in front of the workers (SPEC 3.4). The router, the
/// controller and the queue follow the fleet's health (on_health_change). Thread-safe.
class Placer {
 public:
  /// `post` runs work on the handler pool (the queue's answers). Errors (Fatal, exit 2): an
  /// invalid router or queue configuration, a binding store without session affinity or with a
  /// bad URL, admission without a worker KV capacity.
  Placer(const FrontendOptions& opt, const Fleet& fleet, const Clock& clock,
         std::function<void(std::function<void()>)> post);
  ~Placer();
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  /// True when place() is a round trip to the shared binding store (call it off the loop).
  bool uses_store() const { return shared_ != nullptr; }
  /// True when requests of a session pass admit() first (SPEC 9).
  bool admits() const { return admission_ != nullptr; }

  /// Result of admit(): admitted at once (`worker` the controller's worker when it is still
  /// healthy; the policy chooses otherwise), or held under `ticket` (RequestQueue::defer; a
  /// scheduler tick or the resume timeout releases it).
  struct Admitted {
    bool admitted = false;
    uint64_t ticket = 0;
    std::optional<uint64_t> worker;
  };
  /// SPEC 9 admission of a request of session `ctx` with `tokens` prompt tokens; never blocks.
  /// The request's program goes into `lease` (its turn's end is reported). Needs admits().
  Admitted admit(const session::AgentContext& ctx, uint64_t tokens, Lease& lease);
  /// The worker of an admission release when it is still healthy.
  std::optional<uint64_t> live_worker(int worker) const;
  /// Router::place() through the shared binding store when there is one. Same errors as
  /// Router::place() (503 no healthy worker or a full binding table, kPlaceWouldWait, ...).
  Expected<route::Placement> place(const route::RouteRequest& rr) {
    return shared_ ? shared_->place(rr) : router_.place(rr);
  }
  /// Gives back what `lease` held: the placement's lease, then the admission program's turn
  /// (usage sets its working set, a failure keeps the old one, session_final releases it).
  void release(Lease& lease, const TurnEnd& end);

  /// Worker `i` went up or down (its health and circuit: Fleet routability): the router and
  /// the admission controller's worker set follow.
  void on_health_change(size_t i, bool healthy);
  /// Worker `i` of the fleet joined (or came back, or stopped draining): a routing candidate
  /// again, named by its URL in the shared store.
  void add_worker(size_t i);
  /// Worker `i` drains: no new sessions; its bound sessions move at their next turn.
  void drain_worker(size_t i);
  /// Worker `i` left: its bindings are dropped (deleted from the shared store) and its index
  /// entries freed (Router::remove_worker). Returns the number of bindings dropped.
  size_t remove_worker(size_t i);
  /// True when a retry avoiding `avoid` would find a worker (Router::any_eligible).
  bool any_eligible(std::span<const uint64_t> avoid) const { return router_.any_eligible(avoid); }
  /// Starts the admission scheduler's ticks.
  void start();
  /// Wakes requests blocked in admission (they are answered 503) and refuses new waits.
  void shutdown();
  /// Stops the admission ticks.
  void stop();

  route::Router& router() { return router_; }
  const route::Router& router() const { return router_; }
  RequestQueue& queue() { return *queue_; }
  const RequestQueue& queue() const { return *queue_; }
  SharedBindings* shared() { return shared_.get(); }
  const SharedBindings* shared() const { return shared_.get(); }
  const route::AdmissionController* admission() const { return admission_.get(); }
  route::AdmissionController* admission() { return admission_.get(); }

 private:
  /// Hands the controller the routable serving workers, so a program assigned to a worker that
  /// went away (down, draining, removed) is re-placed at its next request instead of failing
  /// (SPEC 9).
  void sync_admission();

  const Fleet& fleet_;
  const Clock& clock_;
  uint64_t capacity_tokens_;
  route::Router router_;
  std::unique_ptr<SharedBindings> shared_;  ///< destroyed before the router
  std::unique_ptr<route::AdmissionController> admission_;
  std::unique_ptr<route::AdmissionTicker> ticker_;
  std::mutex admission_mu_;              ///< orders worker-set updates to the controller
  std::unique_ptr<RequestQueue> queue_;  ///< destroyed first: its timer reads the router
};

}  // namespace dyn::serve
