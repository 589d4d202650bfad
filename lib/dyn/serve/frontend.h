// The live frontend (dyn-route serve, dyn-trace capture): OpenAI/Anthropic-compatible HTTP proxy
// with session identity, session-aware routing with leases, request_end tracing and admin API;
// serve::run is the whole server's life for a command's main.
#pragma once

#include <memory>
#include <string>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/serve/options.h"

namespace dyn::serve {

/// A running frontend. Construct, bind(), then serve() blocks until stop() (from any thread, e.g.
/// a signal watcher); in-flight responses are finished and their request_end rows written and
/// flushed before serve() returns, so SIGTERM loses no finished request.
/// Request handling (SPEC 1, 2, 5):
/// - POST /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages: identity from
///   headers (400 for an over-long session id or conflicting duplicates), malformed JSON -> 400,
///   placement by the router (503 when no worker is healthy or the binding table is full), the
///   worker's response relayed as it arrives with `x-dyn-worker: <id>`, the placement's lease
///   held until the stream ends; a transport failure before the response invalidates/retries once.
/// - With admission (SPEC 9): a request with a session first passes the AdmissionController
///   (a paused program's request blocks until a scheduler tick releases it, or the resume timeout
///   forces it in), then is sent to the controller's worker; the wait is `dyn.pause_ms`.
///   The controller's worker set follows worker health.
/// - GET /v1/bindings, /v1/programs (admission state), /v1/run-config, /metrics, /health; GET /v1/models is
///   forwarded to a healthy worker. Admin endpoints answer loopback peers only (403 otherwise)
///   unless admin_allow_remote, or live on the admin listener; /health stays on the main listener
///   for load balancers, with worker details for admin peers only.
/// - Limits: a header with CR/LF/NUL -> 400; a body over max_request_bytes -> 413; JSON nested
///   deeper than kMaxJsonDepth -> 400; over max_concurrent_requests in flight -> 429. A worker
///   that sends no response headers within the upstream read timeout -> 504, no retry (the
///   request may be running there), the worker marked unhealthy until its next good /health and
///   the binding failed (hard mode rebinds the next turn, soft mode moves it).
/// - Anything else: 404 with an OpenAI-style error body (capture mode: forwarded untraced).
/// It is put together from parts that each own one job and its state: Fleet (workers, health)
/// with its HealthPoller, Placer (router, bindings, admission), KvFeeds (KV events), Relay (a
/// request's stages and its proxied response), RequestTrace (request_end rows) and AdminPages.
class Frontend {
 public:
  /// Errors (Fatal, exit 2): a bad worker URL, an invalid router, binding store, KV event or
  /// admission configuration.
  Frontend(FrontendOptions options, const Clock& clock = RealClock::instance());
  ~Frontend();
  Frontend(const Frontend&) = delete;
  Frontend& operator=(const Frontend&) = delete;

  /// Binds the listening socket (and the admin listener when configured) and writes the port
  /// files. Returns the main port.
  Expected<int> bind();
  /// Serves until stop(); then drains, flushes the trace and stops the health poller.
  void serve();
  /// Drains (new API requests get 503; waits up to drain_timeout_s for those in flight), then
  /// stops the listeners. Blocks while draining; call from a signal watcher thread, not from a
  /// request handler. Thread-safe, idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The one start-up line of a live frontend, once it listens on `port`: URL, workers (or the
/// capture upstream), routing mode and affinity, trace destination, admin listener.
std::string startup_line(const FrontendOptions& opt, int port);

/// A whole server's life, for dyn-route serve and dyn-trace capture: builds the Frontend, binds
/// (port files), says startup_line on stderr, serves until SIGTERM or SIGINT, then drains the
/// requests in flight and flushes the trace. Returns 0 after a SIGTERM and 130 after a SIGINT
/// (the README's exit table: interrupted), both after the same drain and flush. Start-up errors
/// throw Fatal: a bad configuration (exit 2, as Frontend's constructor), a port or trace folder
/// that cannot be used (exit 4).
int run(FrontendOptions options);

}  // namespace dyn::serve
