// The relay: an API request from its arrival to its request_end row (identity, body, prompt
// hashes, a worker from the Placer, the response streamed to the client, the row written).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dyn/base/clock.h"
#include "dyn/http/prometheus.h"
#include "dyn/http/proxy.h"
#include "dyn/kvevents/translate.h"
#include "dyn/serve/exchange.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/intake.h"
#include "dyn/serve/options.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/request_trace.h"

namespace dyn::serve {

/// The relay's own figures (dyn_frontend_*, dyn_request_*, dyn_tokenizer_errors_total).
struct RelayStats {
  std::atomic<uint64_t> requests{0}, rejected{0}, retries{0}, tokenizer_errors{0};
  std::atomic<size_t> in_flight{0};  ///< API requests being served (streams until they end)
  http::LatencyHistogram ttft, total, itl;
};

/// Runs API requests (SPEC 1, 2, 3.4, 5). Each request is started on the loop (issue 16: no
/// thread switch per request) and runs the stages in order: identity, the body, the upstream
/// request, then (on the handler pool where a stage may block: the tokenizer, the shared binding
/// store) prompt hashing, its priority, program admission, the router queue (SPEC 3.4: a
/// --max-concurrent-requests slot, a worker under its busy thresholds), placement and the relay
/// of the worker's response, which stays on the connection's loop thread. A request held by
/// admission or the queue holds no thread: the queue resumes it on the pool. A stage that
/// answers the request itself ends the exchange (its request_end row is written) and the handler
/// stops.
/// `placer` null = capture mode: worker 0, no routing. `adapters` (the KV feeds' LoRA adapters,
/// null without KV events) choose the seed a request's blocks are hashed from.
class Relay {
 public:
  using ReqPtr = std::shared_ptr<const http::ServerRequest>;
  using ResPtr = std::shared_ptr<http::ServerResponse>;
  using Done = std::function<void()>;

  Relay(const FrontendOptions& opt, const Clock& clock, http::EventLoop& loop, Fleet& fleet, Placer* placer,
        const kvevents::Adapters* adapters, RequestTrace& trace);

  /// One API request; `done` when the response is set.
  void handle_api(Api api, ReqPtr req, ResPtr res, Done done);
  /// Forwards a request as it came to `worker` and relays its answer, untraced and unrouted
  /// (blocking: call on the handler pool). 502 when the worker is unreachable.
  void forward_plain(size_t worker, const http::ServerRequest& req, http::ServerResponse& res);

  /// From now on new API requests get 503 (Connection: close). True for the first call.
  bool begin_drain() { return !draining_.exchange(true); }
  size_t in_flight() const { return stats_.in_flight.load(); }
  const RelayStats& stats() const { return stats_; }

 private:
  /// Arrival: a new exchange with its request id and arrival times, counted in stats.requests.
  std::shared_ptr<Exchange> open_exchange(Api api);
  /// The server's own count: takes a slot of stats.in_flight (the exchange frees it when it
  /// ends). 503 while draining (Connection: close); in capture mode (no router queue) 429 over
  /// --max-concurrent-requests (Retry-After: 1).
  bool take_slot(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res);
  /// SPEC 3.4: the request's priority from its headers, its body's hints and its session, into
  /// the exchange (and its agent_context when it said or inherited one). Serve mode only.
  void resolve_priority(Exchange& ex, const Dispatch& d);
  /// SPEC 9 admission through the Placer, then dispatch: a request of a paused program waits in
  /// the router queue as a deferred item (its wait is dyn.pause_ms) and resumes from there.
  void admit_then_dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                           std::shared_ptr<const Dispatch> d, Done done);
  /// Placement and proxying with one retry: passes the router queue (a first attempt), leases a
  /// worker, sends the request, and relays the response (relay_response), or, when the worker
  /// sent no response, marks it down and retries once elsewhere (no_response). Runs on the loop,
  /// or on the pool where it may block: a placement that would wait for an initializing binding,
  /// or the shared binding store.
  void dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, std::shared_ptr<const Dispatch> d,
                int attempt, std::optional<route::RetryAdvice> retry, Done done);
  /// The router queue's view of the request: its snapshot, a placement that never blocks (run
  /// by the queue's pump) and the resume of dispatch when its wait ends.
  QueuedRequest queued_request(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                               std::shared_ptr<const Dispatch> d, Done done);
  /// What enter() said: true = dispatch on (a slot held); false = queued (resumed later) or
  /// answered here (429 queue full, 503).
  bool passed_queue(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const Entered& e);
  /// The Placer's placement of one attempt: the client's pin, else on the first attempt the
  /// admission controller's worker, else the policy (`retry` avoids the failed worker).
  /// `refuse_busy`: kPlaceAllBusy / kPlacePinnedBusy (its worker in *busy) instead of a busy
  /// worker. `may_wait` false: kPlaceWouldWait where the router would block.
  Expected<route::Placement> place(const Exchange& ex, const Dispatch& d, int attempt,
                                   const std::optional<route::RetryAdvice>& retry, bool may_wait, bool refuse_busy,
                                   uint64_t* busy);
  /// A placement failure's HTTP status and error type (no_compatible_worker when no worker is
  /// healthy, as Dynamo keeps it apart).
  std::pair<int, std::string> placement_error(const Error& e) const;
  /// The worker of the attempt (its lease's, or worker 0 in capture mode): counted as dispatched
  /// (requests, in_flight) and, for session_las, as the session's service.
  size_t take_worker(Exchange& ex);
  /// The worker sent no response (unreachable, or no headers within the read timeout): marks it
  /// down until the health poller sees it again and fails the placement (hard mode invalidates
  /// the binding). True = retry once on another worker (`retry` set to the router's advice):
  /// only for a first attempt that did not time out, without a client pin, with another worker.
  /// Otherwise answers 504 (timed out: the worker may be running the request, so it is never
  /// resent, SPEC 2.3) or 502 and ends the exchange.
  bool no_response(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, http::ServerResponse& res,
                   const Dispatch& d, int attempt, std::optional<route::RetryAdvice>& retry);
  /// The worker answered: commits the placement on a 2xx (the first token then tells the router
  /// prefill is done) or fails it (a 5xx invalidates a hard binding, a 4xx leaves it), and relays
  /// the response as it arrives with x-dyn-worker (serve mode). The exchange ends when the
  /// response to the client has ended, with the error response_error names (a cut stream also
  /// marks the worker down).
  void relay_response(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<http::ProxyCall>& call, ResPtr res,
                      Done done);
  /// Answers the request with an error of the frontend's own (before or instead of a dispatch)
  /// and ends the exchange; counted in stats.rejected. `trace_type`: the row's dyn.error.type
  /// ("http" unless the answer has its own reason, e.g. the queue's).
  void reject(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, int status, const std::string& type,
              const std::string& msg, const std::string& trace_type = "http");
  /// The router queue's 429 / 503 (Retry-After: 1) with its reason as the error type.
  void reject_held(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const QueueVerdict& v);
  /// The end of an exchange, once: the lease given back, count_end, then its request_end row
  /// (with tracing). `out` is null for a rejected request; `err_type` "" = success.
  void finish(const std::shared_ptr<Exchange>& ex, const http::ProxyOutcome* out, int status,
              const std::string& err_type, const std::string& err_msg);
  /// The end in the metrics: the worker's counters (in_flight, cancelled, errors, token usage),
  /// for a success the TTFT and total-time histograms, and the ITL histogram for every stream
  /// with an ITL (two output tokens or more, as the row's dyn.avg_itl_ms), traced or not.
  void count_end(const Exchange& ex, const http::ProxyOutcome* out, const std::string& err_type);

  const FrontendOptions& opt_;
  const Clock& clock_;
  http::EventLoop& loop_;
  Fleet& fleet_;
  Placer* placer_;
  RequestQueue* queue_;  ///< the placer's (null in capture mode)
  const kvevents::Adapters* adapters_;
  RequestTrace& trace_;
  RelayStats stats_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> seq_{0};
  std::string id_prefix_;  ///< this process's request ids: "<8 hex digits>-<sequence>"
};

}  // namespace dyn::serve
