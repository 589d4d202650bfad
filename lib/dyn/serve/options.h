// The settings of a live frontend (dyn-route serve, dyn-trace capture), shared by its parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/defaults.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/http/proxy.h"
#include "dyn/http/server.h"
#include "dyn/io/segment_writer.h"
#include "dyn/kvpolicy/kv_policy.h"
#include "dyn/route/admission.h"
#include "dyn/route/config.h"
#include "dyn/route/queue.h"
#include "dyn/serve/fleet.h"
#include "dyn/session/normalize.h"

namespace dyn::serve {

/// Where one worker publishes its KV events (vLLM's ZMQ PUB and replay ROUTER addresses).
struct KvEventSource {
  std::string endpoint;
  std::string replay_endpoint;  ///< "" = gaps clear the worker's index instead of being replayed
};

/// Retries before the first byte reaches the client (SGLang model gateway's --retry-* flags and
/// defaults): delay k (0-based) = min(initial * multiplier^k, max), times 1 +- jitter.
struct RetryOptions {
  bool enabled = true;       ///< --disable-retries clears it
  unsigned max_retries = 5;  ///< retries after the first attempt
  double initial_backoff_ms = 50;
  double max_backoff_ms = 5000;
  double multiplier = 2.0;
  double jitter = 0.1;  ///< 0..1
};

/// How a request's resolved priority (SPEC 3.4; Dynamo's scale, higher is more important) reaches
/// its worker: the body's top-level `priority`, the field vLLM and SGLang schedule by, in the
/// polarity the engine was started with (Dynamo docs/agents/priority-scheduling.md: Dynamo
/// converts per engine, so clients never negate).
enum class WorkerPriority { kOff, kLowerFirst, kHigherFirst };
inline constexpr Named<WorkerPriority> kWorkerPriorities[] = {
    {WorkerPriority::kOff, "off", "not forwarded (vLLM refuses a priority unless it schedules by priority)"},
    {WorkerPriority::kLowerFirst, "lower-first",
     "negated: vLLM --scheduling-policy priority, SGLang --schedule-low-priority-values-first"},
    {WorkerPriority::kHigherFirst, "higher-first", "as resolved: SGLang --enable-priority-scheduling"},
};

/// Everything the frontend needs. Serve mode routes over `workers`; capture mode forwards to the
/// single upstream workers[0] without routing (and forwards any other path untraced).
struct FrontendOptions {
  http::ListenOptions listen;
  /// Base URLs of the workers at start; worker id = index (SPEC: order of --worker), later
  /// workers (--worker-file, POST /v1/workers) get the next ids.
  std::vector<std::string> workers;
  /// --worker-file: the workers to serve over, watched for changes ("" = none; serve mode).
  std::string worker_file;
  double worker_file_interval_ms = 1000;  ///< how often the worker file is read
  /// Per-worker circuit breaker (SGLang's --cb-* flags); retries before the first byte.
  CircuitOptions circuit;
  RetryOptions retry;
  /// Dynamo's --migration-limit (env DYN_MIGRATION_LIMIT): how many times one streamed
  /// generation may move to another worker when its worker dies or stalls past the upstream read
  /// timeout after streaming began (0 = never: the stream is cut as before).
  unsigned migration_limit = 0;
  bool capture = false;
  /// How request headers are normalized (SPEC 1.1: --session-header-aliases).
  session::NormalizeOptions session;
  route::RouterConfig router;  ///< serve mode only
  /// Block size of the trace's replay block (serve: the router's block size).
  uint32_t trace_block_size = kDefaultKvBlockSize;
  bool trace = false;  ///< write request_end rows (SPEC 5.2)
  /// --router-decision-log[=RATE]: the fraction of placements (sampled per request id) whose
  /// route_decision row goes into the trace; unset = none (serve mode, needs `trace`).
  std::optional<double> decision_log_rate;
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
  /// Read each worker's KV capacity from its engine (GET /metrics, vLLM's cache_config_info
  /// num_gpu_blocks) for router.worker_kv_blocks' uses, the approximate index's budget among them
  /// (SPEC 3.3); false when --router-worker-kv-blocks was given (flag > learned > default).
  bool learn_worker_kv_blocks = true;
  /// Each worker's KV capacity in tokens for admission accounting (KV blocks x block size).
  uint64_t admission_capacity_tokens = 0;
  /// Largest request body accepted, in bytes; a larger one gets 413 with an OpenAI-style error
  /// body before any of it is buffered past the limit. 0 = no limit.
  size_t max_request_bytes = size_t{32} << 20;
  /// Most API requests dispatched to workers at once (a stream counts until it ends); one more
  /// waits in the router queue, as in SGLang's router (SPEC 3.4). 0 = no limit.
  size_t max_concurrent_requests = 0;
  /// The router queue (SPEC 3.4): policy classes, per-session defaults, --queue-size and
  /// --queue-timeout-secs (serve mode).
  route::QueueConfig queue;
  /// Whether and in which polarity the resolved priority is forwarded (SPEC 3.4, serve mode).
  WorkerPriority worker_priority = WorkerPriority::kOff;
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
  /// publishers (SPEC 3.3 event-fed mode). Required for every worker in that mode (workers that
  /// join later name theirs in their spec).
  std::vector<KvEventSource> kv_events;
  /// A worker whose block size (its /health `kv_block_size`, or an event's block_size) differs
  /// from the router's is refused (not routed to, its events ignored) unless this is set; then a
  /// warning is printed and its events are cut into router blocks (approximate).
  bool allow_block_size_mismatch = false;
  /// OpenAI-compatible tokenizer base URL (vLLM/SGLang `POST /tokenize`): requests are hashed
  /// from the token ids it returns instead of the SPEC 4.2 4-byte tokens. "" = 4-byte tokens.
  std::string tokenizer_url;
  /// Harness tool events (issue 49, Dynamo's DYN_REQUEST_TRACE_TOOL_EVENTS_ZMQ_ENDPOINT and
  /// _TOPIC): the ZMQ PULL address to bind ("" = none; port 0 = a free one) and the first frame
  /// to accept ("" = any).
  std::string tool_events_endpoint;
  std::string tool_events_topic = "agent-tool-events";
  /// The router's KV retention policies (SPEC 6.4, --kv-policy; serve mode): none by default.
  kvpolicy::KvPolicyConfig kv_policy;
};

}  // namespace dyn::serve
