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
#include "dyn/serve/decision_log.h"
#include "dyn/serve/exchange.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/intake.h"
#include "dyn/serve/kv_hints.h"
#include "dyn/serve/options.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/request_trace.h"
#include "dyn/serve/tokenizer.h"

namespace dyn::serve {

class ToolEventIngress;

/// The relay's own figures (dyn_frontend_*, dyn_request_*, dyn_tokenizer_errors_total).
struct RelayStats {
  std::atomic<uint64_t> requests{0}, rejected{0}, retries{0}, retries_exhausted{0}, migrations{0}, migrations_failed{0},
      tokenizer_errors{0};
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
/// Failures (issue 53):
/// - before the first byte reaches the client, a dispatch that met a connection error or a 502,
///   503 or 504 (or a 429 with Retry-After, unless the session is hard-bound there) is retried on
///   another eligible worker, never one it failed on, after an exponential backoff with jitter
///   (RetryOptions), unless the client pinned the worker; a timeout before headers is resent
///   only with --migration-limit (it counts as a migration: the worker may be running it). Other
///   4xx pass through untouched. The last failure reaches the client when no retry is left or no
///   other worker is eligible.
/// - mid-stream, with --migration-limit N, a chat or messages stream whose worker dies or stalls
///   past the upstream read timeout continues on another worker from the prompt plus the text
///   already sent (continuation_body, ContinuationTap): one client stream, up to N moves.
/// - every dispatch outcome feeds the worker's circuit breaker (Fleet::record_outcome).
class Relay {
 public:
  using ReqPtr = std::shared_ptr<const http::ServerRequest>;
  using ResPtr = std::shared_ptr<http::ServerResponse>;
  using Done = std::function<void()>;
  using DispatchPtr = std::shared_ptr<const Dispatch>;

  Relay(const FrontendOptions& opt, const Clock& clock, http::EventLoop& loop, Fleet& fleet, Placer* placer,
        const kvevents::Adapters* adapters, RequestTrace& trace);

  /// One API request; `done` when the response is set.
  void handle_api(Api api, ReqPtr req, ResPtr res, Done done);
  /// Forwards a request as it came to `worker` and relays its answer, untraced and unrouted
  /// (blocking: call on the handler pool). 502 when the worker is unreachable.
  void forward_plain(size_t worker, const http::ServerRequest& req, http::ServerResponse& res);

  /// From now on new API requests get 503 (Connection: close). True for the first call.
  bool begin_drain() { return !draining_.exchange(true); }
  /// Harness tool events (--tool-events-endpoint): each session's finished responses and their
  /// tool calls go there, for the events' join. Set before serving.
  void set_tool_events(ToolEventIngress* tools) { tools_ = tools; }
  size_t in_flight() const { return stats_.in_flight.load(); }
  const RelayStats& stats() const { return stats_; }
  const DecisionLog& decisions() const { return decisions_; }
  /// --kv-policy's runner (null without a policy, and in capture mode).
  const KvPolicyRunner* kv_policies() const { return kv_.get(); }
  KvPolicyRunner* kv_policies() { return kv_.get(); }

 private:
  class Migrator;
  /// Why one dispatch failed before the client got a byte.
  struct Failure {
    std::string type;  ///< connection, timeout, http
    int status = 0;    ///< the worker's HTTP status (0: no response)
    std::string message;
  };

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
  /// Placement and proxying with retries: passes the router queue (a first attempt), leases a
  /// worker, sends the request, and relays the response (relay_response), or retries elsewhere
  /// after a retryable failure (retry_later), or answers the failure (no_response). Runs on the loop, or on the pool
  /// where it may block: a placement that would wait for an initializing binding, or the shared binding store.
  void dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, DispatchPtr d, Done done);
  /// The router queue's view of the request: its snapshot, a placement that never blocks (run
  /// by the queue's pump) and the resume of dispatch when its wait ends.
  QueuedRequest queued_request(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                               std::shared_ptr<const Dispatch> d, Done done);
  /// What enter() said: true = dispatch on (a slot held); false = queued (resumed later) or
  /// answered here (429 queue full, 503).
  bool passed_queue(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const Entered& e);
  /// The Placer's placement of one attempt: the client's pin, else on the first attempt the
  /// admission controller's worker, else the policy, avoiding the workers the request failed on
  /// (`ex.avoid`, the router's retry advice). `refuse_busy`: kPlaceAllBusy / kPlacePinnedBusy
  /// (its worker in *busy) instead of a busy worker. `may_wait` false (on the loop):
  /// kPlaceWouldWait where the router would block. Other errors carry the HTTP status to answer
  /// (503 no healthy worker or a full binding table, 4xx identity).
  Expected<route::Placement> place(const Exchange& ex, const Dispatch& d, bool may_wait, bool refuse_busy,
                                   uint64_t* busy);
  /// A placement failure's HTTP status and error type (no_compatible_worker when no worker is
  /// healthy, as Dynamo keeps it apart).
  std::pair<int, std::string> placement_error(const Error& e) const;
  /// The worker of the attempt (its lease's, or worker 0 in capture mode): counted as dispatched
  /// (requests, in_flight) and, for session_las, as the session's service.
  size_t take_worker(Exchange& ex);
  /// True when the failure `f` of the exchange's current dispatch may be retried elsewhere: the
  /// kind, the retry budget, no client pin, another eligible worker (see the class comment).
  bool may_retry(const Exchange& ex, const Dispatch& d, const Failure& f, const http::ProxyCall& call) const;
  /// Gives up the current dispatch for a retry: the call cancelled, the worker's counters,
  /// health (a connection failure or timeout marks it down) and circuit, the placement failed
  /// (a hard binding moves), the attempt recorded; then dispatch() again after the backoff.
  void retry_later(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, const Failure& f, ReqPtr req, ResPtr res,
                   DispatchPtr d, Done done);
  /// The worker sent no response (unreachable, or no headers within the read timeout) and the
  /// request is not retried: marks it down until the health poller sees it again, fails the
  /// placement (hard mode invalidates the binding) and answers 504 (timed out: the worker may be
  /// running the request, so it is never resent without --migration-limit, SPEC 2.3) or 502,
  /// ending the exchange.
  void no_response(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, http::ServerResponse& res);
  /// The worker answered: commits the placement on a 2xx (the first token then tells the router
  /// prefill is done) or fails it (a 5xx invalidates a hard binding, a 4xx leaves it), and relays
  /// the response as it arrives with x-dyn-worker (serve mode). The exchange ends when the
  /// response to the client has ended, with the error response_error names (a cut stream also
  /// marks the worker down) — unless the stream migrates (Migrator).
  void relay_response(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<http::ProxyCall>& call, ReqPtr req,
                      ResPtr res, DispatchPtr d, Done done);
  /// The end of a relayed response (relay_response, a migration's continuation).
  void relayed(const std::shared_ptr<Exchange>& ex, http::ProxyOutcome o);
  /// Makes `call` the exchange's attempt in flight, cancelled when its client hangs up (at once
  /// when it already has).
  void track_call(Exchange& ex, const std::shared_ptr<http::ProxyCall>& call);
  /// Tells the exchange when its client hangs up (req.client): the flag every stage checks, the
  /// attempt in flight cancelled (issue 51.4: the worker stops computing for nobody), a wait in
  /// the router queue or admission cancelled (RequestQueue::cancel) and a wait for the session's
  /// first dispatch woken (Router::wake_waiters): seen within 100 ms in every state.
  void watch_client(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req);
  /// The exchange waits in the router queue as `item` (0: it was answered at once): a hang-up
  /// from now on cancels it, and one seen before is acted on here (the watch had no item yet).
  void wait_in_queue(Exchange& ex, uint64_t item);
  /// When the client has hung up: ends the exchange as cancelled (499 set, row status
  /// "cancelled", `when` in its message) and returns true. The worker counters are those of the
  /// attempt whose worker is in ex.worker (none before a dispatch).
  bool client_left(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const char* when);
  /// Makes `call` ask the relay at a cut whether its stream migrates (Migrator).
  void watch_for_cut(http::ProxyCall& call, const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d);
  /// True when the exchange's stream, cut with `error` at its current worker, may continue
  /// elsewhere (--migration-limit left, a continuable API and log, another eligible worker).
  bool may_migrate(const Exchange& ex, const Dispatch& d) const;
  /// Continues the exchange's stream on another worker (relay_migrate.cpp): the cut worker's
  /// counters, health and circuit, the attempt recorded, then continue_on().
  void migrate(const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d, std::shared_ptr<http::BodyStream> out,
               const std::string& error);
  /// Places the continuation `cd` (its body continuation_body's) and relays it into `out`; a
  /// continuation that fails before its events moves again while the limit allows, else the
  /// client's stream is cut (cut_stream).
  void continue_on(const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d, DispatchPtr cd,
                   std::shared_ptr<http::BodyStream> out);
  /// Ends a stream that cannot go on: an SSE error event and an aborted response to the client,
  /// the row a stream_cut.
  void cut(const std::shared_ptr<Exchange>& ex, std::shared_ptr<http::BodyStream> out, const std::string& error);
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
  /// The end in the metrics: the worker's counters (in_flight, cancelled, errors, token usage)
  /// and circuit, for a success the TTFT and total-time histograms, and the ITL histogram for
  /// every stream with an ITL (two output tokens or more, as the row's dyn.avg_itl_ms), traced or
  /// not.
  void count_end(const Exchange& ex, const http::ProxyOutcome* out, const std::string& err_type);
  /// The current dispatch of `ex` failed at its worker: counters (in_flight, errors), health (a
  /// connection failure marks it down), circuit, the attempt recorded in the exchange.
  void account_failure(Exchange& ex, const char* stage, const Failure& f, bool mark_down);

  const FrontendOptions& opt_;
  const Clock& clock_;
  http::EventLoop& loop_;
  Fleet& fleet_;
  Placer* placer_;
  RequestQueue* queue_;  ///< the placer's (null in capture mode)
  const kvevents::Adapters* adapters_;
  RequestTrace& trace_;
  ToolEventIngress* tools_ = nullptr;
  RelayStats stats_;
  DecisionLog decisions_;
  std::unique_ptr<EngineTokenizer> tokenizer_;  ///< --tokenizer-url (null without)
  std::unique_ptr<KvPolicyRunner> kv_;          ///< --kv-policy (null without)
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> seq_{0};
  std::string id_prefix_;  ///< this process's request ids: "<8 hex digits>-<sequence>"
};

}  // namespace dyn::serve
