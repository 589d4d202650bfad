// The live frontend (dyn-route serve, dyn-trace capture): OpenAI/Anthropic-compatible HTTP proxy
// with session identity, session-aware routing with leases, request_end tracing and admin API;
// serve::run is the whole server's life for a command's main.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/defaults.h"
#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/http/proxy.h"
#include "dyn/http/server.h"
#include "dyn/io/segment_writer.h"
#include "dyn/route/admission.h"
#include "dyn/route/config.h"
#include "dyn/session/normalize.h"

namespace dyn::serve {

/// Where one worker publishes its KV events (vLLM's ZMQ PUB and replay ROUTER addresses).
struct KvEventSource {
  std::string endpoint;
  std::string replay_endpoint;  ///< "" = gaps clear the worker's index instead of being replayed
};

/// Everything the frontend needs. Serve mode routes over `workers`; capture mode forwards to the
/// single upstream workers[0] without routing (and forwards any other path untraced).
struct FrontendOptions {
  http::ListenOptions listen;
  std::vector<std::string> workers;  ///< base URLs; worker id = index (SPEC: order of --worker)
  bool capture = false;
  /// How request headers are normalized (SPEC 1.1: --session-header-aliases).
  session::NormalizeOptions session;
  route::RouterConfig router;  ///< serve mode only
  /// Block size of the trace's replay block (serve: the router's block size).
  uint32_t trace_block_size = kDefaultKvBlockSize;
  bool trace = false;  ///< write request_end rows (SPEC 5.2)
  io::SegmentWriterOptions trace_file;
  double health_interval_ms = 1000;  ///< GET /health polling period per worker (serve mode)
  double health_timeout_ms = 1000;
  /// Consecutive failed polls before a worker is marked down (SGLang's router and Kubernetes
  /// probes default to 3): one slow poll on a loaded machine must not move hard-affinity sessions
  /// off a live worker. A failed proxied request still marks the worker down at once.
  unsigned health_failure_threshold = 3;
  http::UpstreamTimeouts upstream;
  std::string tool_name = "dyn-route";
  /// How this process was started (cli::run_config: version, flags and their sources, environment
  /// variables). When not null it is served at GET /v1/run-config (an admin endpoint) and, with
  /// tracing on, written once to `<trace prefix>.run-config.json` beside the segments when
  /// serve() starts (replacing the previous run's: the segments of one prefix keep counting up),
  /// so a trace carries the configuration that produced it.
  Json run_config;
  /// Shared binding store of router replicas, redis://HOST:PORT[/DB] ("" = this process's table
  /// only). Needs session affinity (router.affinity_ttl_secs); see serve::SharedBindings.
  std::string binding_store;
  /// Program-aware admission (SPEC 9, serve mode only); mode none = no controller.
  route::AdmissionConfig admission;
  /// Each worker's KV capacity in tokens for admission accounting (KV blocks x block size).
  uint64_t admission_capacity_tokens = 0;
  /// Largest request body accepted, in bytes; a larger one gets 413 with an OpenAI-style error
  /// body before any of it is buffered past the limit. 0 = no limit.
  size_t max_request_bytes = size_t{32} << 20;
  /// Most API requests in flight at once (a stream counts until it ends); one more gets 429
  /// (rate_limit_error, Retry-After: 1), as SGLang's router answers. 0 = no limit.
  size_t max_concurrent_requests = 0;
  /// A separate admin listener for /v1/bindings, /v1/programs, /metrics and the detailed /health
  /// (port < 0 = none; then those endpoints are on the main listener and answer only loopback
  /// peers unless admin_allow_remote). Its host defaults to loopback whatever --host says.
  http::ListenOptions admin_listen{"127.0.0.1", -1, "", 16};
  /// Serve admin endpoints on the main listener to any peer (e.g. a remote Prometheus scraper).
  bool admin_allow_remote = false;
  /// On stop (SIGTERM), wait up to this long for the API requests in flight to finish before
  /// closing connections (new requests get 503 meanwhile).
  double drain_timeout_s = 60;
  /// Per worker (same order as `workers`), when router.kv_events: the index is fed by these
  /// publishers (SPEC 3.3 event-fed mode). Required for every worker in that mode.
  std::vector<KvEventSource> kv_events;
  /// A worker whose block size (its /health `kv_block_size`, or an event's block_size) differs
  /// from the router's is refused (not routed to, its events ignored) unless this is set; then a
  /// warning is printed and its events are cut into router blocks (approximate).
  bool allow_block_size_mismatch = false;
  /// OpenAI-compatible tokenizer base URL (vLLM/SGLang `POST /tokenize`): requests are hashed
  /// from the token ids it returns instead of the SPEC 4.2 4-byte tokens. "" = 4-byte tokens.
  std::string tokenizer_url;
};

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
class Frontend {
 public:
  /// Errors (Fatal, exit 2): a bad worker URL or an invalid router configuration.
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
