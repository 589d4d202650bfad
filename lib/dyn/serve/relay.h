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
#include "dyn/serve/tokenizer.h"

namespace dyn::serve {

/// The relay's own figures (dyn_frontend_*, dyn_request_*, dyn_tokenizer_errors_total).
struct RelayStats {
  std::atomic<uint64_t> requests{0}, rejected{0}, retries{0}, tokenizer_errors{0};
  std::atomic<size_t> in_flight{0};  ///< API requests being served (streams until they end)
  http::LatencyHistogram ttft, total, itl;
};

/// Runs API requests (SPEC 1, 2, 5). Each request is started on the loop (issue 16: no thread
/// switch per request) and runs the stages in order: identity, a concurrency slot, the body, the
/// upstream request, then (on the handler pool where a stage may block: the tokenizer, the
/// admission wait, the shared binding store) prompt hashing, admission, placement and the relay
/// of the worker's response, which stays on the connection's loop thread. A stage that answers
/// the request itself ends the exchange (its request_end row is written) and the handler stops.
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
  /// Admission to the server: takes a slot of stats.in_flight (the exchange frees it when it
  /// ends). 503 while draining (Connection: close), 429 over --max-concurrent-requests
  /// (Retry-After: 1).
  bool take_slot(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res);
  /// SPEC 9 admission through the Placer (the wait is dyn.pause_ms); its worker goes into `d`.
  /// 503 when the router shuts down meanwhile. Without admission or a session: nothing to do.
  bool admit(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, Dispatch& d);
  /// Placement and proxying with one retry: leases a worker, sends the request, and relays the
  /// response (relay_response), or, when the worker sent no response, marks it down and retries
  /// once elsewhere (no_response). Runs on the loop, or on the pool where it may block: a
  /// placement that would wait for an initializing binding, or the shared binding store.
  void dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, std::shared_ptr<const Dispatch> d,
                int attempt, std::optional<route::RetryAdvice> retry, Done done);
  /// The worker of one attempt: the Placer's placement (the client's pin, else on the first
  /// attempt the admission controller's worker, else the policy; `retry` avoids the failed
  /// worker), held in the exchange's lease until finish; worker 0 in capture mode. Counts the
  /// dispatch (requests, in_flight). nullopt = rejected with the router's status (503 no healthy
  /// worker or a full binding table, 4xx identity). `may_wait` false (on the loop): where the
  /// router would block, nothing is leased and *would_wait is set instead.
  std::optional<size_t> lease_worker(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const Dispatch& d,
                                     int attempt, const std::optional<route::RetryAdvice>& retry, bool may_wait,
                                     bool* would_wait);
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
  /// Tells the exchange when its client hangs up (req.client): the flag every stage checks, and
  /// the attempt in flight cancelled (issue 51.4: the worker stops computing for nobody).
  void watch_client(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req);
  /// When the client has hung up: ends the exchange as cancelled (499 set, row status
  /// "cancelled", `when` in its message) and returns true. The worker counters are those of the
  /// attempt whose worker is in ex.worker (none before a dispatch).
  bool client_left(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const char* when);
  /// Answers the request with an error of the frontend's own (before or instead of a dispatch)
  /// and ends the exchange; counted in stats.rejected.
  void reject(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, int status, const std::string& type,
              const std::string& msg);
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
  const kvevents::Adapters* adapters_;
  RequestTrace& trace_;
  RelayStats stats_;
  std::unique_ptr<EngineTokenizer> tokenizer_;  ///< --tokenizer-url (null without)
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> seq_{0};
  std::string id_prefix_;  ///< this process's request ids: "<8 hex digits>-<sequence>"
};

}  // namespace dyn::serve
