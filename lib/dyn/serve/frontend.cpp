// The live frontend: request handling, routing with leases, tracing, health polling, admin API.
#include "dyn/serve/frontend.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <algorithm>

#include <unistd.h>

#include <fmt/format.h>
#include <simdjson.h>

#include "dyn/base/diag.h"
#include "dyn/base/json_limits.h"
#include "dyn/base/json.h"
#include "dyn/http/tokenize.h"
#include "dyn/io/output.h"
#include "dyn/kvevents/pubsub.h"
#include "dyn/kvevents/translate.h"
#include "dyn/route/router.h"
#include "dyn/serve/binding_store.h"
#include "dyn/serve/prometheus.h"
#include "dyn/serve/response_tap.h"
#include "dyn/session/normalize.h"
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"
#include "dyn/records/rows.h"

namespace dyn::serve {

namespace {

/// HTTP status for a router or identity error: Error::exit_code holds the status when it is one
/// (400 … 599); an I/O-class error (no worker) is 503; other codes are the caller's fault (400).
int http_status(const Error& e) {
  if (e.exit_code >= 400 && e.exit_code <= 599) return e.exit_code;
  if (e.exit_code == kExitIo) return 503;
  return 400;
}

/// One request from arrival to its request_end row.
struct Exchange {
  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  /// Frees the request's concurrency slot: the exchange lives until its response has ended.
  ~Exchange() {
    if (slot) slot->fetch_sub(1);
  }
  std::atomic<size_t>* slot = nullptr;  ///< counted in Impl::api_in_flight
  Api api = Api::kChat;
  bool stream = false;
  double start_ms = 0;
  uint64_t received_unix_ms = 0;
  std::optional<session::AgentContext> ctx;
  std::string x_request_id;
  std::string request_id;
  std::string model;
  uint64_t input_length = 0;
  std::vector<uint64_t> sequence_hashes;  ///< with the trailing partial block (SPEC 4.1 replay)
  std::optional<route::Placement> placement;
  int worker = -1;
  std::string binding;             ///< dyn.binding ("" = omit: capture mode)
  std::string admission_program;   ///< admitted by the controller: report its end
  std::optional<double> pause_ms;  ///< dyn.pause_ms (admission wait, SPEC 9)
  std::shared_ptr<ResponseTap> tap;
};

/// `p` as a route pattern that also matches the absolute form "http://authority" + p.
std::string absolute_or_origin(const std::string& p) { return "(?:[hH][tT][tT][pP][sS]?://[^/]*)?" + p; }

/// The origin form of a request target: "http://host:1/v1/x?q" -> "/v1/x?q" (RFC 9112 3.2.2: a
/// proxy forwards the path and query; the authority was for this hop).
std::string origin_form(const std::string& target) {
  size_t scheme = target.find("://");
  if (target.empty() || target[0] == '/' || scheme == std::string::npos) return target;
  size_t path = target.find('/', scheme + 3);
  if (path == std::string::npos) {
    size_t q = target.find('?', scheme + 3);
    return q == std::string::npos ? "/" : "/" + target.substr(q);
  }
  return target.substr(path);
}

/// What the dispatch stage takes from the earlier stages of Frontend::Impl::handle_api, besides
/// the exchange.
struct Dispatch {
  http::ProxyRequest request;               ///< to the worker (build_upstream)
  bool hide_usage = false;                  ///< the frontend asked for the usage chunk: not relayed
  std::optional<uint64_t> pinned_worker;    ///< x-dynamo-worker-instance-id: wins, never retried
  std::optional<uint64_t> admitted_worker;  ///< the admission controller's (first attempt only)
};

/// A request body as the router reads it (Frontend::Impl::parse_body). simdjson reads it and the
/// SPEC 4.2 text is rendered from that reading; a Json tree is built only where a step needs one
/// (--tokenizer-url, a stream_options to edit, a body simdjson refuses or reads ambiguously).
/// Issue 16: parsing every body into a Json tree and printing it again was half the router's
/// instructions.
struct Body {
  /// The top-level stream_options, for the include_usage rewrite (build_upstream).
  enum class Usage { kAbsent, kIncluded, kOther } usage = Usage::kAbsent;
  std::optional<std::string> rendered;  ///< render_request's text, when simdjson read the body
  std::shared_ptr<Json> json;           ///< the Json tree, when a step needed one
};

/// The latency figures of an exchange (SPEC 7) from the tap's content-chunk stamps: one rule for
/// the request_end row and the /metrics histograms. Times in ms from the request's arrival.
struct Latencies {
  std::optional<double> ttft_ms;     ///< first content chunk
  std::optional<double> latency_ms;  ///< last content chunk
  /// usage's count, else the SPEC 4.2 estimate from the content bytes; unset when the response
  /// said nothing (no usage, no content, no outcome).
  std::optional<uint64_t> output_tokens;
  bool output_tokens_estimated = false;
  /// (latency - TTFT) / (output tokens - 1), for a stream with at least 2 output tokens.
  std::optional<double> avg_itl_ms;
};

Latencies latencies_of(const Exchange& ex, const http::ProxyOutcome* out) {
  Latencies l;
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  if (!f) return l;
  if (f->output_tokens) {
    l.output_tokens = *f->output_tokens;
  } else if (f->content_bytes > 0 || out) {
    l.output_tokens = tokens::token_count(f->content_bytes);  // SPEC 4.2 estimate when usage is absent
    l.output_tokens_estimated = true;
  }
  if (f->first_content_ms) {
    l.ttft_ms = *f->first_content_ms - ex.start_ms;
    l.latency_ms = *f->last_content_ms - ex.start_ms;
  }
  uint64_t n = l.output_tokens.value_or(0);
  if (ex.stream && l.ttft_ms && n >= 2) l.avg_itl_ms = (*l.latency_ms - *l.ttft_ms) / static_cast<double>(n - 1);
  return l;
}

/// The error of a relayed response (type, message; type "" = success): a cut upstream stream, a
/// client that went away, an HTTP error status (with the upstream's message), an error event
/// inside a 2xx response (the upstream's own type and message, issue 21.3), or a stream cut
/// before its API's terminal event with no finish reason (stream_incomplete, issue 21.2).
std::pair<std::string, std::string> response_error(const Exchange& ex, const http::ProxyOutcome& o) {
  if (o.kind == http::ProxyOutcome::Kind::kStreamCut) return {"stream_cut", o.message};
  if (o.kind == http::ProxyOutcome::Kind::kCancelled) return {"cancelled", "client went away"};
  const ResponseFacts& f = ex.tap->facts();
  if (o.status >= 400) {
    std::string msg = "worker returned HTTP " + std::to_string(o.status);
    if (!f.error_message.empty()) msg += ": " + f.error_message;
    return {"http", msg};
  }
  if (f.error_event) return {f.error_type, f.error_message};
  if (StreamEnd se = stream_end(ex.api, f); !se.complete) return {"stream_incomplete", se.message};
  return {};
}
}  // namespace

struct Frontend::Impl {
  FrontendOptions opt;
  const Clock& clock;
  /// Loop threads serve every connection and stream; handlers run on its pool (--threads).
  http::EventLoop loop;
  http::EventServer server;
  http::EventServer admin_server;  ///< used when opt.admin_listen.port >= 0
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop_requested = false;  ///< stop() has drained: serve() closes the listeners
  std::atomic<size_t> api_in_flight{0};
  std::atomic<bool> draining{false};  ///< stop() was called: new API requests get 503
  std::vector<std::unique_ptr<http::UpstreamPool>> pools;
  std::unique_ptr<route::Router> router;
  std::unique_ptr<SharedBindings> shared;  ///< --router-binding-store; destroyed before the router
  std::unique_ptr<io::SegmentWriter> writer;
  std::vector<std::unique_ptr<WorkerCounters>> counters;
  std::unique_ptr<std::atomic<bool>[]> healthy;
  LatencyHistogram ttft_hist, total_hist, itl_hist;
  std::atomic<uint64_t> requests_total{0}, rejected_total{0}, retries_total{0};
  std::atomic<uint64_t> seq{0};
  std::string id_prefix;
  std::thread health_thread;
  std::mutex health_mu;
  std::condition_variable health_cv;
  bool stopping = false;
  std::unique_ptr<route::AdmissionController> admission;  ///< SPEC 9; null when off
  std::unique_ptr<route::AdmissionTicker> admission_ticker;
  std::mutex admission_mu;  ///< orders worker-set updates to the controller

  // ---- KV events (SPEC 3.3 event-fed index) -------------------------------------------------
  /// One worker's event feed: its subscriber thread owns it.
  struct KvWorker {
    KvWorker(uint32_t router_block_size, kvevents::Adapters* adapters) : feed(router_block_size, adapters) {}
    kvevents::WorkerFeed feed;
    std::unique_ptr<kvevents::Subscriber> sub;
    std::atomic<uint64_t> resets{0}, problems{0};
  };
  /// LoRA adapters the workers stored blocks under (declared before kv: the feeds point to it).
  kvevents::Adapters adapters;
  std::vector<std::unique_ptr<KvWorker>> kv;  ///< empty unless router.kv_events
  /// Block size each worker reported (health metadata or events); 0 = not known yet.
  std::unique_ptr<std::atomic<uint32_t>[]> worker_block_size;
  /// Refused for a block size mismatch: kept out of routing, its events ignored.
  std::unique_ptr<std::atomic<bool>[]> refused;
  std::unique_ptr<std::atomic<bool>[]> mismatch_warned;
  std::atomic<uint64_t> tokenizer_errors{0};

  /// Records worker i's block size from `source`; false when the worker is (now) refused.
  bool check_block_size(size_t i, uint32_t bs, const char* source) {
    worker_block_size[i] = bs;
    if (bs == opt.router.block_size) {
      if (refused[i].exchange(false))
        diag::note(fmt::format("worker {} ({}) now reports block size {}: accepted again", i, opt.workers[i], bs));
      return true;
    }
    std::string what =
        fmt::format("worker {} ({}) has KV block size {} ({}) but the router's --kv-cache-block-size is {}", i,
                    opt.workers[i], bs, source, opt.router.block_size);
    if (opt.allow_block_size_mismatch) {
      if (!mismatch_warned[i].exchange(true))
        diag::warning("", what + "; routing to it stays approximate (--allow-block-size-mismatch)");
      return true;
    }
    if (!refused[i].exchange(true)) {
      diag::error("", what +
                          ": the worker is refused (not routed to, its KV events ignored); start it with block size " +
                          std::to_string(opt.router.block_size) + " or pass --allow-block-size-mismatch");
      set_worker_health(i, false, "refused: block size mismatch");
    }
    return false;
  }
  void on_kv_batch(size_t i, const kvevents::EventBatch& b);
  void on_kv_reset(size_t i, const std::string& why);
  /// Token ids of a request from the tokenizer endpoint; an Error when it fails.
  Expected<std::vector<uint32_t>> tokenize(Api api, const Json& body, const std::string& model);

  Impl(FrontendOptions o, const Clock& c)
      : opt(std::move(o)),
        clock(c),
        loop(loop_threads(), opt.listen.threads),
        server(loop, opt.max_request_bytes),
        admin_server(loop, opt.max_request_bytes) {}
  /// One loop thread per core (up to 8): more would only add wake-ups.
  static size_t loop_threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8); }

  // ---- request handling (SPEC 1, 2, 5) --------------------------------------------------------
  // handle_api runs one API request through the stages below, in this order. A stage that answers
  // the request itself (an error) returns false or nullopt; it has then set the response and
  // ended the exchange (finish: its request_end row is written), and the handler stops.

  using ReqPtr = std::shared_ptr<const http::ServerRequest>;
  using ResPtr = std::shared_ptr<http::ServerResponse>;
  using Done = std::function<void()>;
  /// The whole request, started on the loop (issue 16: no thread switch per request): the
  /// stages in order; `done` when the response is set. The stages that may block (the
  /// tokenizer, the admission wait, the shared binding store) run on the handler pool.
  void handle_api(Api api, ReqPtr req, ResPtr res, Done done);
  /// Arrival: a new exchange with its request id and arrival times, counted in requests_total.
  std::shared_ptr<Exchange> open_exchange(Api api);
  /// Identity (SPEC 1): the session headers normalized into the exchange's agent_context and
  /// x-request-id, and the client's worker pin into `d`. 400 for conflicting or over-long session
  /// headers (session::normalize) and for session ids or x-request-id that are not valid UTF-8
  /// (they end up in trace rows and /v1/bindings, which must stay printable JSON).
  bool read_identity(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req, http::ServerResponse& res,
                     Dispatch& d);
  /// Admission to the server: takes a slot of api_in_flight (the exchange frees it when it ends).
  /// 503 while draining (Connection: close), 429 over --max-concurrent-requests (Retry-After: 1).
  bool take_slot(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res);
  /// The JSON body: 400 when empty, nested deeper than kMaxJsonDepth, malformed (the byte offset
  /// only: the parser's message quotes body bytes) or not an object. Notes the request's model
  /// and whether it streams in the exchange.
  std::optional<Body> parse_body(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req,
                                 http::ServerResponse& res);
  /// The Json tree path of parse_body: nlohmann's verdict and messages for what simdjson refused.
  std::optional<Body> parse_body_json(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req,
                                      http::ServerResponse& res);
  /// The request to the worker, into `d`: the origin-form target (RFC 9112 3.2.2), the client's
  /// headers and its body; a chat/completions stream that does not ask for usage gets
  /// stream_options.include_usage added to `body` (for the trace's token counts) and the usage
  /// chunk hidden from the client.
  void build_upstream(const Exchange& ex, Body& body, const http::ServerRequest& req, Dispatch& d);
  /// Prompt hashing: SPEC 4.2 tokens (or the --tokenizer-url ids) and SPEC 4.1 sequence hashes of
  /// the rendered request at the trace block size, the trailing partial block included (routing
  /// uses the complete blocks only).
  void hash_prompt(Exchange& ex, const Body& body);
  /// SPEC 9 admission: a paused program's request waits here (no polling) until the scheduler
  /// tick releases it or the resume timeout forces it in (the wait is dyn.pause_ms); its worker
  /// goes into `d`. 503 when the router shuts down meanwhile. Without admission or a session:
  /// nothing to do.
  bool admit(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, Dispatch& d);
  /// Placement and proxying with one retry: leases a worker, sends the request, and relays the
  /// response (relay_response), or, when the worker sent no response, marks it down and retries
  /// once elsewhere (no_response). Runs on the loop, or on the pool where it may block: a
  /// placement that would wait for an initializing binding, or the shared binding store.
  void dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, std::shared_ptr<const Dispatch> d,
                int attempt, std::optional<route::RetryAdvice> retry, Done done);
  /// The worker of one attempt: the router's placement (shared store or this replica's table;
  /// the client's pin, else on the first attempt the admission controller's worker, else the
  /// policy; `retry` avoids the failed worker), held in the exchange as a lease until finish;
  /// worker 0 in capture mode. Counts the dispatch (requests, in_flight). nullopt = rejected
  /// with the router's status (503 no healthy worker or a full binding table, 4xx identity).
  /// `may_wait` false (on the loop): where the router would block, nothing is leased and
  /// *would_wait is set instead.
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
  /// Answers the request with an error of the frontend's own (before or instead of a dispatch)
  /// and ends the exchange; counted in rejected_total.
  void reject(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, int status, const std::string& type,
              const std::string& msg) {
    rejected_total++;
    http::set_error(res, status, type, msg);
    finish(ex, nullptr, status, "http", msg);
  }
  /// The end of an exchange, once: release, count_end, then its request_end row (with tracing).
  /// `out` is null for a rejected request; `err_type` "" = success.
  void finish(const std::shared_ptr<Exchange>& ex, const http::ProxyOutcome* out, int status,
              const std::string& err_type, const std::string& err_msg);
  /// Gives back what the exchange held: the placement's lease, and the admission program's turn
  /// (SPEC 9 tool boundary: usage sets its working set, a failure keeps the old one,
  /// session_final releases the program).
  void release(Exchange& ex, const std::string& err_type);
  /// The end in the metrics: the worker's counters (in_flight, cancelled, errors, token usage),
  /// for a success the TTFT and total-time histograms, and the ITL histogram for every stream
  /// with an ITL (two output tokens or more, as the row's dyn.avg_itl_ms), traced or not.
  void count_end(const Exchange& ex, const http::ProxyOutcome* out, const std::string& err_type);
  /// The request_end row of a finished exchange (records::append_request_end), no newline.
  std::string request_end_row(const Exchange& ex, const http::ProxyOutcome* out, int status,
                              const std::string& err_type, const std::string& err_msg) const;
  void forward_plain(size_t worker, const http::ServerRequest& req, http::ServerResponse& res);
  /// The content types a JSON API cannot take: form and multipart bodies get 415 (the server
  /// answered 413 over --max-request-bytes and 400 for an unreadable body already). False = the
  /// response is set.
  bool check_content_type(const http::ServerRequest& req, http::ServerResponse& res);
  bool admin_separate() const { return opt.admin_listen.port >= 0; }
  /// Admin endpoints on the main listener: loopback peers, or anyone with admin_allow_remote.
  bool admin_allowed(const http::ServerRequest& req) const {
    return opt.admin_allow_remote || http::is_loopback_address(req.remote_addr);
  }
  void add_admin_routes(http::EventServer& s, bool guarded);

  // ---- admin -------------------------------------------------------------------------------
  /// GET /v1/bindings: {"affinity", "store"?, "count", "bindings": [...]}, one binding per line.
  std::string bindings_text() const;
  std::string metrics_text() const;
  Json health_json(bool* any_healthy) const;
  /// Hands the controller the healthy workers, so a program assigned to a worker that went away
  /// is re-placed at its next request instead of failing (SPEC 9).
  void sync_admission() {
    if (!admission) return;
    std::lock_guard<std::mutex> lk(admission_mu);
    std::vector<route::AdmissionWorker> ws;
    for (size_t i = 0; i < opt.workers.size(); ++i)
      if (healthy[i]) ws.push_back(route::AdmissionWorker{static_cast<int>(i), opt.admission_capacity_tokens});
    admission->set_workers(std::move(ws));
  }
  /// Marks worker `i` healthy or down (router and admission controller included) and notes each
  /// change on stderr with its cause, so an operator can tell a failed poll from a failed request.
  void set_worker_health(size_t i, bool ok, const std::string& why) {
    if (healthy[i].exchange(ok) == ok) return;
    if (router) router->set_healthy(i, ok);
    sync_admission();
    diag::note(fmt::format("worker {} ({}) is {}: {}", i, opt.workers[i], ok ? "healthy" : "unhealthy", why));
  }
  void health_loop();
};

Frontend::Frontend(FrontendOptions options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), clock)) {
  Impl& m = *impl_;
  if (m.opt.workers.empty()) throw Fatal(kExitUsage, "at least one --worker URL is needed");
  if (m.opt.capture && m.opt.workers.size() != 1) throw Fatal(kExitUsage, "capture takes exactly one --upstream");
  for (const auto& w : m.opt.workers) {
    auto u = http::UpstreamUrl::parse(w);
    if (!u) throw Fatal(kExitUsage, u.error().message);
    m.pools.push_back(std::make_unique<http::UpstreamPool>(*u, m.loop, m.opt.upstream));
    m.counters.push_back(std::make_unique<WorkerCounters>());
  }
  m.healthy = std::make_unique<std::atomic<bool>[]>(m.opt.workers.size());
  m.worker_block_size = std::make_unique<std::atomic<uint32_t>[]>(m.opt.workers.size());
  m.refused = std::make_unique<std::atomic<bool>[]>(m.opt.workers.size());
  m.mismatch_warned = std::make_unique<std::atomic<bool>[]>(m.opt.workers.size());
  for (size_t i = 0; i < m.opt.workers.size(); ++i) {
    m.healthy[i] = true;
    m.worker_block_size[i] = 0;
    m.refused[i] = false;
    m.mismatch_warned[i] = false;
  }
  if (!m.opt.capture) {
    if (auto e = m.opt.router.validate()) throw Fatal(kExitUsage, e->message);
    m.router = std::make_unique<route::Router>(m.opt.router, m.clock);
    for (size_t i = 0; i < m.opt.workers.size(); ++i) {
      if (auto e = m.router->add_worker(route::WorkerSpec{i, 0, 0})) throw Fatal(kExitUsage, e->message);
    }
    m.opt.trace_block_size = m.opt.router.block_size;
    if (!m.opt.binding_store.empty()) {
      if (!m.opt.router.affinity_enabled())
        throw Fatal(kExitUsage, "--router-binding-store needs session affinity (--router-session-affinity-ttl-secs)");
      auto url = StoreUrl::parse(m.opt.binding_store);
      if (!url) throw Fatal(kExitUsage, url.error().message);
      uint64_t ttl_ms = m.opt.router.affinity_ttl_secs * uint64_t{1000};
      m.shared = std::make_unique<SharedBindings>(*m.router, make_redis_store(*url, ttl_ms), m.opt.workers, m.clock);
    }
    if (m.opt.router.kv_events) {
      if (m.opt.kv_events.size() != m.opt.workers.size())
        throw Fatal(kExitUsage, fmt::format("--router-kv-events needs the KV event endpoint of every worker "
                                            "(--worker-kv-events URL=ENDPOINT[,REPLAY]); {} of {} given",
                                            m.opt.kv_events.size(), m.opt.workers.size()));
      for (size_t i = 0; i < m.opt.workers.size(); ++i) {
        const KvEventSource& src = m.opt.kv_events[i];
        if (src.endpoint.empty())
          throw Fatal(kExitUsage, fmt::format("worker {} ({}) has no KV event endpoint", i, m.opt.workers[i]));
        auto kw = std::make_unique<Impl::KvWorker>(m.opt.router.block_size, &m.adapters);
        kvevents::Subscriber::Handler h;
        h.batch = [&m, i](uint64_t, const kvevents::EventBatch& b, bool) { m.on_kv_batch(i, b); };
        h.reset = [&m, i](const std::string& why) { m.on_kv_reset(i, why); };
        kw->sub = std::make_unique<kvevents::Subscriber>(
            kvevents::SubscriberOptions{src.endpoint, src.replay_endpoint, "",
                                        fmt::format("worker {} ({})", i, src.endpoint), 2000},
            std::move(h));
        m.kv.push_back(std::move(kw));
      }
    } else if (!m.opt.kv_events.empty()) {
      throw Fatal(kExitUsage, "--worker-kv-events needs --router-kv-events (the index is predicted otherwise)");
    }
    if (m.opt.admission.enabled()) {
      if (m.opt.admission_capacity_tokens == 0) throw Fatal(kExitUsage, "admission needs a worker KV capacity > 0");
      m.admission =
          std::make_unique<route::AdmissionController>(m.opt.admission, std::vector<route::AdmissionWorker>{});
      m.sync_admission();
    }
  }
  if (m.opt.trace_block_size == 0) throw Fatal(kExitUsage, "block size must be > 0");
  std::random_device rd;
  m.id_prefix = fmt::format("{:08x}", rd());

  // The server reads bodies before routing, as JSON (no form parsing); other content types get
  // a clear 415 here (issue 21.10).
  auto with_body = [&m](http::EventServer::Handler fn) {
    return [&m, fn](const http::ServerRequest& req, http::ServerResponse& res) {
      if (m.check_content_type(req, res)) fn(req, res);
    };
  };
  auto api_route = [&m](Api api) {
    return [&m, api](Impl::ReqPtr req, Impl::ResPtr res, Impl::Done done) {
      if (!m.check_content_type(*req, *res)) return done();
      m.handle_api(api, std::move(req), std::move(res), std::move(done));
    };
  };
  // Each route also matches the absolute form of its target ("POST http://host/v1/messages",
  // RFC 9112 3.2.2), which clients configured to use the router as an HTTP proxy send.
  for (const api::ApiInfo& a : api::kApis) m.server.route_async("POST", absolute_or_origin(a.path), api_route(a.api));
  if (!m.opt.capture) {
    // Anthropic's token counting (the SDK's messages.count_tokens): no generation, so no routing
    // state; any healthy worker answers it.
    m.server.route("POST", absolute_or_origin("/v1/messages/count_tokens"),
                   with_body([&m](const http::ServerRequest& req, http::ServerResponse& res) {
                     for (size_t i = 0; i < m.pools.size(); ++i) {
                       if (m.healthy[i]) return m.forward_plain(i, req, res);
                     }
                     http::set_error(res, 503, "service_unavailable", "no healthy worker");
                   }));
  }
  if (m.admin_separate()) {
    m.add_admin_routes(m.admin_server, /*guarded=*/false);
  } else {
    m.add_admin_routes(m.server, /*guarded=*/true);
  }
  if (!m.opt.capture) {
    // Liveness for load balancers stays on the main listener; worker URLs only for admin peers.
    m.server.route("GET", "/health", [&m](const http::ServerRequest& req, http::ServerResponse& res) {
      bool any = false;
      Json j = m.health_json(&any);
      res.status = any ? 200 : 503;
      if (m.admin_separate() || !m.admin_allowed(req)) j.erase("workers");
      res.set_content(j.dump() + "\n", "application/json");
    });
    m.server.route("GET", absolute_or_origin("/v1/models(?:/.*)?"),
                   [&m](const http::ServerRequest& req, http::ServerResponse& res) {
                     for (size_t i = 0; i < m.pools.size(); ++i) {
                       if (m.healthy[i]) return m.forward_plain(i, req, res);
                     }
                     http::set_error(res, 503, "service_unavailable", "no healthy worker");
                   });
  }
  // GET or HEAD / (the server answers HEAD with the GET handler, without the body): what this
  // is, for load balancers and people probing the port.
  m.server.route("GET", absolute_or_origin("/"), [&m](const http::ServerRequest&, http::ServerResponse& res) {
    Json j = Json::object();
    j["service"] = m.opt.capture ? "dyn-trace capture" : "dyn-route serve";
    j["apis"] = Json::array();
    for (const api::ApiInfo& a : api::kApis) j["apis"].push_back(a.path);
    res.set_content(j.dump() + "\n", "application/json");
  });
  // OPTIONS (any target, and "*"): the methods this server takes; no CORS grants.
  m.server.route("OPTIONS", ".*", [](const http::ServerRequest&, http::ServerResponse& res) {
    res.status = 204;
    res.set_header("Allow", "GET, HEAD, POST, OPTIONS");
  });
  auto other = [&m](const http::ServerRequest& req, http::ServerResponse& res) {
    if (m.opt.capture) return m.forward_plain(0, req, res);
    http::set_error(res, 404, "not_found_error", "unknown route " + req.method + " " + req.path);
  };
  m.server.route("GET", ".*", other);
  for (const char* method : {"POST", "PUT", "PATCH"}) m.server.route(method, ".*", with_body(other));
  m.server.route("DELETE", ".*", other);
  // Last: the subscriber threads use the router, health flags and admission set up above. A bad
  // ZMQ address is a usage error here, before any thread of serve() exists.
  for (auto& k : m.kv) k->sub->start();
}

bool Frontend::Impl::check_content_type(const http::ServerRequest& req, http::ServerResponse& res) {
  auto unsupported = [&](const std::string& what) {
    http::set_error(res, 415, "invalid_request_error",
                    "Content-Type " + what + " is not supported: send the JSON body with " +
                        "'Content-Type: application/json' (curl: -H 'Content-Type: application/json')");
    return false;
  };
  std::string ct = req.get_header_value("Content-Type");
  std::string lower = ct.substr(0, ct.find(';'));
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!lower.empty() && lower.back() == ' ') lower.pop_back();
  if (lower == "multipart/form-data" || lower == "application/x-www-form-urlencoded") return unsupported(lower);
  return true;
}

void Frontend::Impl::add_admin_routes(http::EventServer& s, bool guarded) {
  // Wraps an admin handler: on the main listener only loopback peers (or --admin-allow-remote).
  auto admin = [this, guarded](http::EventServer::Handler fn) {
    return [this, guarded, fn](const http::ServerRequest& req, http::ServerResponse& res) {
      if (guarded && !admin_allowed(req)) {
        return http::set_error(res, 403, "permission_error",
                               "admin endpoint " + req.path +
                                   " answers loopback clients only (see --admin-port and --admin-allow-remote)");
      }
      fn(req, res);
    };
  };
  if (!opt.capture) {
    s.route("GET", "/v1/bindings", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(bindings_text(), "application/json");
            }));
    s.route("GET", "/v1/programs", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              Json j = admission ? admission->snapshot_json(clock.now_ms())
                                 : Json{{"admission", "none"}, {"programs", Json::array()}};
              res.set_content(j.dump(2) + "\n", "application/json");
            }));
  }
  if (!opt.run_config.is_null()) {
    s.route("GET", "/v1/run-config", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(opt.run_config.dump(2, ' ', false, Json::error_handler_t::replace) + "\n",
                              "application/json");
            }));
  }
  s.route("GET", "/metrics", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
            res.set_content(metrics_text(), "text/plain; version=0.0.4");
          }));
  if (guarded || opt.capture) return;
  s.route("GET", "/health", [this](const http::ServerRequest&, http::ServerResponse& res) {
    bool any = false;
    Json j = health_json(&any);
    res.status = any ? 200 : 503;
    res.set_content(j.dump() + "\n", "application/json");
  });
}

Frontend::~Frontend() { stop(); }

Expected<int> Frontend::bind() {
  if (impl_->opt.trace) {
    // serve() opens the trace; a folder it cannot write to is an error before the server says
    // "listening" (and before its port file appears), not right after.
    std::string dir = std::filesystem::path(impl_->opt.trace_file.prefix).parent_path().string();
    if (dir.empty()) dir = ".";
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return Error{dir + ": trace folder cannot be written: " + std::strerror(errno), kExitIo};
  }
  if (impl_->admin_separate()) {
    auto a = impl_->admin_server.bind(impl_->opt.admin_listen);
    if (!a) return a.error();
  }
  return impl_->server.bind(impl_->opt.listen);
}

void Frontend::serve() {
  Impl& m = *impl_;
  if (m.opt.trace) {
    io::SegmentWriterOptions wo = m.opt.trace_file;
    wo.drop_on_error = true;  // a full disk must not stop the proxy: rows are dropped and reported
    m.writer = std::make_unique<io::SegmentWriter>(wo);
    if (!m.opt.run_config.is_null()) {
      // Beside the segments, so the trace says what produced it; not being able to write it is a
      // warning like a dropped row, never a reason to stop serving.
      const std::string path = wo.prefix + ".run-config.json";
      try {
        io::Output f(path);
        f.line(m.opt.run_config.dump(2, ' ', false, Json::error_handler_t::replace));
        f.close();
      } catch (const Fatal& e) {
        diag::warning(path, std::string("run configuration not written: ") + e.what());
      }
    }
  }
  if (!m.opt.capture) m.health_thread = std::thread([&m] { m.health_loop(); });
  if (m.admission) m.admission_ticker = std::make_unique<route::AdmissionTicker>(*m.admission, m.clock);
  m.loop.start();
  m.server.start();
  if (m.admin_separate()) m.admin_server.start();
  {
    // Until stop() has drained (at once when it came first: a signal during start-up).
    std::unique_lock lk(m.stop_mu);
    m.stop_cv.wait(lk, [&m] { return m.stop_requested; });
  }
  // Streams still running after the drain are cut (their rows say cancelled); the loop then
  // finishes the handlers and the last operations.
  m.server.close();
  m.admin_server.close();
  m.loop.shutdown();
  if (m.admission_ticker) m.admission_ticker->stop();
  {
    std::lock_guard<std::mutex> lk(m.health_mu);
    m.stopping = true;
  }
  m.health_cv.notify_all();
  if (m.health_thread.joinable()) m.health_thread.join();
  for (auto& k : m.kv) k->sub->stop();
  if (m.writer) m.writer->close();
}

void Frontend::stop() {
  Impl& m = *impl_;
  // Requests blocked in admission wake and are answered 503, so the server's pool can drain.
  if (m.admission) m.admission->shutdown();
  // Drain first: closing the listeners cuts every stream in flight. New requests get 503
  // meanwhile; streams still running after drain_timeout_s are cut (their rows say cancelled).
  if (!m.draining.exchange(true)) {
    // Real time, not the injected clock: a fake clock would never reach the deadline.
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(m.opt.drain_timeout_s * 1e6));
    while (m.api_in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lk(m.stop_mu);
    m.stop_requested = true;
  }
  m.stop_cv.notify_all();
  {
    std::lock_guard<std::mutex> lk(impl_->health_mu);
    impl_->stopping = true;
  }
  impl_->health_cv.notify_all();
}

// ---- request handling ------------------------------------------------------------------------

void Frontend::Impl::handle_api(Api api, ReqPtr req, ResPtr res, Done done) {
  std::shared_ptr<Exchange> ex = open_exchange(api);
  auto d = std::make_shared<Dispatch>();
  if (!read_identity(ex, *req, *res, *d) || !take_slot(ex, *res)) return done();
  auto body = parse_body(ex, *req, *res);
  if (!body) return done();
  build_upstream(*ex, *body, *req, *d);
  auto rest = [this, ex, req, res, d, done, body = std::make_shared<Body>(std::move(*body))] {
    hash_prompt(*ex, *body);
    if (!admit(ex, *res, *d)) return done();
    dispatch(ex, req, res, d, 0, std::nullopt, done);
  };
  if (!opt.tokenizer_url.empty() || admission || shared) return loop.handlers().post(std::move(rest));
  rest();
}

std::shared_ptr<Exchange> Frontend::Impl::open_exchange(Api api) {
  auto ex = std::make_shared<Exchange>();
  ex->api = api;
  ex->start_ms = clock.now_ms();
  ex->received_unix_ms = clock.unix_ms();
  ex->request_id = fmt::format("{}-{:06}", id_prefix, seq.fetch_add(1) + 1);
  requests_total++;
  return ex;
}

bool Frontend::Impl::read_identity(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req,
                                   http::ServerResponse& res, Dispatch& d) {
  auto ident = session::normalize(http::header_list(req.headers), opt.session);
  if (!ident) {
    reject(ex, res, http_status(ident.error()), "invalid_request_error", ident.error().message);
    return false;
  }
  if (ident->context && (!valid_utf8(ident->context->session_id) || !valid_utf8(ident->context->parent_session_id))) {
    reject(ex, res, 400, "invalid_request_error", "session id headers must be valid UTF-8");
    return false;
  }
  if (!valid_utf8(ident->x_request_id)) {
    reject(ex, res, 400, "invalid_request_error", "x-request-id must be valid UTF-8");
    return false;
  }
  ex->ctx = ident->context;
  ex->x_request_id = ident->x_request_id;
  d.pinned_worker = ident->worker_instance_id;
  return true;
}

bool Frontend::Impl::take_slot(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res) {
  ex->slot = &api_in_flight;
  size_t n = api_in_flight.fetch_add(1) + 1;
  if (draining.load()) {
    res.set_header("Connection", "close");
    reject(ex, res, 503, "service_unavailable", "the router is shutting down");
    return false;
  }
  if (opt.max_concurrent_requests && n > opt.max_concurrent_requests) {
    res.set_header("Retry-After", "1");
    reject(
        ex, res, 429, "rate_limit_error",
        fmt::format("too many concurrent requests (limit {}, --max-concurrent-requests)", opt.max_concurrent_requests));
    return false;
  }
  return true;
}

namespace {

/// Reads the top-level members the router needs from a simdjson object into `ex` and `b`. False
/// when a key repeats (a Json tree keeps the last value; parse_body_json decides then).
bool read_top_level(simdjson::dom::object o, Exchange& ex, Body& b) {
  std::vector<std::string_view> keys;
  for (auto field : o) {
    for (std::string_view k : keys)
      if (k == field.key) return false;
    keys.push_back(field.key);
    std::string_view sv;
    bool flag = false;
    if (field.key == "model" && field.value.get(sv) == simdjson::SUCCESS) ex.model = sv;
    if (field.key == "stream") ex.stream = field.value.get(flag) == simdjson::SUCCESS && flag;
    if (field.key == "stream_options") {
      simdjson::dom::element iu;
      b.usage =
          field.value.at_key("include_usage").get(iu) == simdjson::SUCCESS && iu.get(flag) == simdjson::SUCCESS && flag
              ? Body::Usage::kIncluded
              : Body::Usage::kOther;
    }
  }
  return true;
}

}  // namespace

std::optional<Body> Frontend::Impl::parse_body(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req,
                                               http::ServerResponse& res) {
  if (req.body.empty()) {
    reject(ex, res, 400, "invalid_request_error", "empty request body (a JSON object is required)");
    return std::nullopt;
  }
  // One parser per loop thread: it keeps its buffers from one body to the next. It refuses
  // nesting deeper than kMaxJsonDepth as json_too_deep does (parse_body_json then says so).
  thread_local simdjson::dom::parser parser = [] {
    simdjson::dom::parser p;
    if (p.allocate(64 << 10, kMaxJsonDepth) != simdjson::SUCCESS) throw std::bad_alloc();
    return p;
  }();
  simdjson::dom::element doc;
  simdjson::dom::object top;
  Body b;
  if (!opt.tokenizer_url.empty() || parser.parse(req.body).get(doc) != simdjson::SUCCESS ||
      doc.get(top) != simdjson::SUCCESS || !read_top_level(top, *ex, b))
    return parse_body_json(ex, req, res);
  b.rendered = tokens::render_request_dom(doc);
  if (!b.rendered) return parse_body_json(ex, req, res);
  return b;
}

std::optional<Body> Frontend::Impl::parse_body_json(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req,
                                                    http::ServerResponse& res) {
  auto bad = [&](const std::string& msg) {
    reject(ex, res, 400, "invalid_request_error", msg);
    return std::nullopt;
  };
  // Deep nesting would overflow the stack of the recursive code that renders and prints bodies.
  if (json_too_deep(req.body)) return bad(fmt::format("JSON body nested deeper than {} levels", kMaxJsonDepth));
  Body b;
  b.json = std::make_shared<Json>();
  Json& body = *b.json;
  try {
    body = Json::parse(req.body);
  } catch (const Json::parse_error& e) {
    // The position only: the parser's own message quotes body bytes, which must not reach traces.
    return bad(fmt::format("malformed JSON body (invalid JSON or UTF-8 near byte {})", e.byte));
  }
  if (!body.is_object()) return bad("request body must be a JSON object");
  if (auto it = body.find("model"); it != body.end() && it->is_string()) ex->model = it->get<std::string>();
  auto st = body.find("stream");
  ex->stream = st != body.end() && st->is_boolean() && st->get<bool>();
  return b;
}

void Frontend::Impl::build_upstream(const Exchange& ex, Body& b, const http::ServerRequest& req, Dispatch& d) {
  http::ProxyRequest& p = d.request;
  p.method = "POST";
  p.path = origin_form(req.target.empty() ? req.path : req.target);
  p.headers = req.headers;
  p.body = req.body;
  if (!ex.stream || !api::has_stream_usage_option(ex.api)) return;
  if (!b.json && b.usage == Body::Usage::kIncluded) return;
  d.hide_usage = true;
  if (!b.json && b.usage == Body::Usage::kAbsent) {
    // The member goes first, so the client's bytes are forwarded as they came after it.
    size_t open = p.body.find('{') + 1;
    size_t next = p.body.find_first_not_of(" \t\r\n", open);
    p.body.insert(open, p.body[next] == '}' ? R"("stream_options":{"include_usage":true})"
                                            : R"("stream_options":{"include_usage":true},)");
    return;
  }
  if (!b.json) b.json = std::make_shared<Json>(Json::parse(req.body));
  Json& so = (*b.json)["stream_options"];
  if (!so.is_object()) so = Json::object();
  auto iu = so.find("include_usage");
  if (iu != so.end() && iu->is_boolean() && iu->get<bool>()) {
    d.hide_usage = false;
    return;
  }
  so["include_usage"] = true;
  p.body = b.json->dump();
}

void Frontend::Impl::hash_prompt(Exchange& ex, const Body& b) {
  std::vector<uint32_t> toks;
  if (!opt.tokenizer_url.empty()) {
    auto t = tokenize(ex.api, *b.json, ex.model);
    if (t) {
      toks = std::move(*t);
    } else if (tokenizer_errors++ % 100 == 0) {
      diag::warning("tokenizer", t.error().message + "; hashing the 4-byte tokens instead (routing is approximate)");
    }
  }
  if (toks.empty()) toks = tokens::text_to_tokens(b.rendered ? *b.rendered : tokens::render_request(*b.json));
  ex.input_length = toks.size();
  auto blocks = tokens::block_hashes(toks, opt.trace_block_size, /*include_partial=*/true, adapters.seed_for(ex.model));
  ex.sequence_hashes = tokens::sequence_hashes(blocks);
}

bool Frontend::Impl::admit(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, Dispatch& d) {
  if (!admission || !ex->ctx) return true;
  double waited = 0, t0 = clock.now_ms();
  route::AdmitDecision a =
      admission->admit_blocking(ex->ctx->session_id, ex->ctx->parent_session_id, ex->input_length, clock, &waited);
  ex->pause_ms = a.admitted ? waited : clock.now_ms() - t0;
  if (!a.admitted) {
    reject(ex, res, 503, "service_unavailable", "the router is shutting down");
    return false;
  }
  ex->admission_program = ex->ctx->session_id;
  // The controller's worker unless it went away meanwhile (the policy chooses then).
  if (a.worker >= 0 && static_cast<size_t>(a.worker) < pools.size() && healthy[a.worker]) d.admitted_worker = a.worker;
  return true;
}

void Frontend::Impl::dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                              std::shared_ptr<const Dispatch> d, int attempt, std::optional<route::RetryAdvice> retry,
                              Done done) {
  const bool on_loop = loop.in_loop_thread();
  auto on_pool = [&] { loop.handlers().post([=, this] { dispatch(ex, req, res, d, attempt, retry, done); }); };
  if (on_loop && shared) return on_pool();  // the store is a Redis round trip
  bool would_wait = false;
  std::optional<size_t> worker = lease_worker(ex, *res, *d, attempt, retry, !on_loop, &would_wait);
  if (would_wait) return on_pool();
  if (!worker) return done();
  ex->tap = std::make_shared<ResponseTap>(ex->api, d->hide_usage);
  auto call = http::ProxyCall::start(*pools[*worker], d->request, ex->tap, clock, req->executor);
  call->start_async([this, ex, req, res, d, attempt, retry, done, call](bool ok) mutable {
    if (ok) return relay_response(ex, call, res, done);
    if (no_response(ex, *call, *res, *d, attempt, retry)) return dispatch(ex, req, res, d, attempt + 1, retry, done);
    done();
  });
}

std::optional<size_t> Frontend::Impl::lease_worker(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res,
                                                   const Dispatch& d, int attempt,
                                                   const std::optional<route::RetryAdvice>& retry, bool may_wait,
                                                   bool* would_wait) {
  size_t worker = 0;
  if (router) {
    route::RouteRequest rr;
    if (ex->ctx) {
      rr.session_id = ex->ctx->session_id;
      rr.parent_session_id = ex->ctx->parent_session_id;
    }
    size_t complete = ex->input_length / opt.trace_block_size;
    rr.sequence_hashes = std::span<const uint64_t>(ex->sequence_hashes.data(), complete);
    rr.tokens = ex->input_length;
    rr.worker = d.pinned_worker;
    if (!rr.worker && attempt == 0) rr.worker = d.admitted_worker;  // the retry lets the router choose
    rr.retry = retry;
    rr.fail_instead_of_waiting = !may_wait;
    auto placed = shared ? shared->place(rr) : router->place(rr);
    if (!placed && placed.error().exit_code == route::kPlaceWouldWait) {
      *would_wait = true;
      return std::nullopt;
    }
    if (!placed) {
      int status = http_status(placed.error());
      reject(ex, res, status, http::error_type_for_status(status), placed.error().message);
      return std::nullopt;
    }
    ex->placement.emplace(std::move(*placed));
    worker = ex->placement->worker();
    ex->binding = route::binding_name(ex->placement->binding());
  }
  ex->worker = static_cast<int>(worker);
  WorkerCounters& wc = *counters[worker];
  wc.requests++;
  // In flight from dispatch, not from the response headers: a request waiting for a stalled
  // worker's headers is that worker's load (placement already counts it; case 32), and the
  // gauge must show it. Every path after this ends it exactly once.
  wc.in_flight++;
  return worker;
}

bool Frontend::Impl::no_response(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, http::ServerResponse& res,
                                 const Dispatch& d, int attempt, std::optional<route::RetryAdvice>& retry) {
  const size_t worker = static_cast<size_t>(ex->worker);
  std::string err = call.error();
  bool timed_out = call.timed_out();
  call.cancel();
  WorkerCounters& wc = *counters[worker];
  wc.in_flight--;
  wc.errors++;
  if (router) {
    set_worker_health(worker, false, (timed_out ? "a request timed out before headers: " : "a request failed: ") + err);
    route::RetryAdvice advice = ex->placement->fail(false);
    ex->placement.reset();
    // A worker that timed out before headers took the request and may still be running it, so
    // it is never resent: the client gets a clean 504 and hard mode rebinds the next turn
    // (SPEC 2.3).
    bool can_retry = !timed_out && attempt == 0 && !d.pinned_worker && pools.size() > 1;
    if (can_retry) {
      if (advice.retry) retry = advice;
      retries_total++;
      return true;
    }
  }
  http::ProxyOutcome o;
  o.kind = http::ProxyOutcome::Kind::kTransport;
  o.message = err;
  o.end_ms = clock.now_ms();
  if (timed_out) {
    std::string msg = "worker " + std::to_string(worker) + " timed out: " + err;
    http::set_error(res, 504, "timeout", msg);
    res.set_header("x-dyn-worker", std::to_string(worker));
    finish(ex, &o, 504, "timeout", msg);
    return false;
  }
  http::set_error(res, 502, "connection", "worker " + std::to_string(worker) + " unreachable: " + err);
  finish(ex, &o, 502, "connection", "worker unreachable: " + err);
  return false;
}

void Frontend::Impl::relay_response(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<http::ProxyCall>& call,
                                    ResPtr res, Done done) {
  int status = call->status();
  if (ex->placement) {
    if (status >= 200 && status < 300) {
      ex->placement->commit();
      auto* pl = &*ex->placement;
      ex->tap->set_on_first_token([pl] { pl->first_token(); });
    } else {
      // The worker answered with an error: a 5xx is a failed dispatch (hard mode invalidates
      // the binding); a 4xx is about the request, so the binding is left alone.
      ex->placement->fail(status < 500);
      ex->placement.reset();
    }
  }
  std::vector<std::pair<std::string, std::string>> extra;
  if (router) extra.emplace_back("x-dyn-worker", std::to_string(ex->worker));
  call->relay(
      *res, extra,
      [this, ex](const http::ProxyOutcome& o) {
        if (o.kind == http::ProxyOutcome::Kind::kStreamCut && router)
          set_worker_health(ex->worker, false, "a stream was cut: " + o.message);
        auto [type, msg] = response_error(*ex, o);
        finish(ex, &o, o.status, type, msg);
      },
      std::move(done));
}

void Frontend::Impl::finish(const std::shared_ptr<Exchange>& ex, const http::ProxyOutcome* out, int status,
                            const std::string& err_type, const std::string& err_msg) {
  release(*ex, err_type);
  count_end(*ex, out, err_type);
  if (!writer) return;
  // Invalid UTF-8 in a header or message becomes U+FFFD: a stray byte must never cost the row.
  writer->write_line(request_end_row(*ex, out, status, err_type, err_msg));
}

void Frontend::Impl::release(Exchange& ex, const std::string& err_type) {
  if (ex.placement) {
    ex.placement->finish();
    ex.placement.reset();
  }
  if (!admission || ex.admission_program.empty()) return;
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  double now = clock.now_ms();
  if (err_type.empty() && f) {
    admission->on_response(ex.admission_program, f->input_tokens.value_or(ex.input_length),
                           f->output_tokens.value_or(0), now);
  } else {
    admission->on_request_failed(ex.admission_program, now);
  }
  if (ex.ctx && ex.ctx->session_final.value_or(false)) admission->release_program(ex.admission_program, now);
  ex.admission_program.clear();
}

void Frontend::Impl::count_end(const Exchange& ex, const http::ProxyOutcome* out, const std::string& err_type) {
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  if (ex.worker >= 0 && out) {
    WorkerCounters& wc = *counters[ex.worker];
    // A transport failure ended its in_flight and counted its error where it happened (no_response).
    if (out->kind != http::ProxyOutcome::Kind::kTransport) wc.in_flight--;
    if (out->kind == http::ProxyOutcome::Kind::kCancelled) {
      wc.cancelled++;
    } else if (!err_type.empty() && out->kind != http::ProxyOutcome::Kind::kTransport) {
      wc.errors++;
    } else if (err_type.empty() && out->kind == http::ProxyOutcome::Kind::kOk) {
      wc.answered++;
    }
    if (f) {
      wc.input_tokens += f->input_tokens.value_or(0);
      wc.output_tokens += f->output_tokens.value_or(0);
      wc.cached_tokens += f->cached_tokens.value_or(0);
    }
  }
  Latencies lat = latencies_of(ex, out);
  if (err_type.empty()) {
    total_hist.observe((out ? out->end_ms : clock.now_ms()) - ex.start_ms);
    if (lat.ttft_ms) ttft_hist.observe(*lat.ttft_ms);
  }
  if (lat.avg_itl_ms) itl_hist.observe(*lat.avg_itl_ms);
}

std::string Frontend::Impl::request_end_row(const Exchange& ex, const http::ProxyOutcome* out, int status,
                                            const std::string& err_type, const std::string& err_msg) const {
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  double end = out ? out->end_ms : clock.now_ms();
  const Latencies lat = latencies_of(ex, out);
  records::RequestEnd r;
  r.event_time_unix_ms = ex.received_unix_ms + static_cast<uint64_t>(std::max(0.0, end - ex.start_ms));
  r.event_source = "router";
  if (ex.ctx) r.agent_context = records::ContextRef::of(*ex.ctx);
  r.request_id = ex.request_id;
  if (!ex.x_request_id.empty()) r.x_request_id = ex.x_request_id;
  const std::string& model = f && !f->model.empty() ? f->model : ex.model;
  if (!model.empty()) r.model = model;
  uint64_t in = ex.input_length;
  if (f && f->input_tokens) {
    in = *f->input_tokens;
  } else {
    r.input_tokens_estimated = true;
  }
  r.input_tokens = in;
  if (lat.output_tokens) {
    r.output_tokens = *lat.output_tokens;
    if (lat.output_tokens_estimated) r.output_tokens_estimated = true;
  }
  if (f && f->cached_tokens) r.cached_tokens = *f->cached_tokens;
  r.request_received_ms = ex.received_unix_ms;
  if (ex.stream && lat.ttft_ms) r.ttft_ms = *lat.ttft_ms;
  r.total_time_ms = end - ex.start_ms;
  if (lat.avg_itl_ms) r.avg_itl_ms = *lat.avg_itl_ms;
  if (f && f->cached_tokens && in > 0) r.kv_hit_rate = static_cast<double>(*f->cached_tokens) / static_cast<double>(in);
  if (ex.worker >= 0 && router) r.worker = ex.worker;
  r.replay =
      records::RequestEnd::Replay{static_cast<uint64_t>(opt.trace_block_size), ex.input_length, ex.sequence_hashes};
  std::vector<records::RequestEnd::ToolCall> calls;
  if (f) {
    if (f->finish_reason) r.finish_reason = *f->finish_reason;
    for (const auto& tc : f->tool_calls) calls.push_back({tc.choice_index, tc.tool_call_index, tc.id, tc.name});
    r.tool_calls = calls;
  }

  bool cancelled = out && out->kind == http::ProxyOutcome::Kind::kCancelled;
  bool error = !err_type.empty() && !cancelled;
  r.status = cancelled ? "cancelled" : (error ? "error" : "ok");
  std::string warning;
  if (error) {
    bool transport = err_type == "connection" || err_type == "stream_cut";
    r.error =
        records::RequestEnd::Failure{transport ? 0 : status, err_type,
                                     err_msg.empty() ? std::string_view("the stream carried an error event") : err_msg};
  } else if (!cancelled && f) {
    if (StreamEnd se = stream_end(ex.api, *f); !se.warning.empty()) {
      warning = std::move(se.warning);
      r.warning = warning;
    }
  }
  if (f && f->first_content_ms && f->second_content_ms) r.ttst_ms = *f->second_content_ms - *f->first_content_ms;
  if (ex.stream && f && !f->inter_chunk_ms.empty()) r.inter_chunk_ms = f->inter_chunk_ms;
  // Per-chunk token counts when the worker sent per-chunk usage (issue 21.4), as dyn-replay does.
  if (ex.stream && f && f->content_chunks > 0 && f->chunk_tokens.size() == f->content_chunks)
    r.chunk_tokens = f->chunk_tokens;
  if (lat.latency_ms) r.request_latency_ms = *lat.latency_ms;
  if (!ex.binding.empty()) r.binding = ex.binding;
  r.pause_ms = ex.pause_ms;
  std::string line;
  line.reserve(1024);
  records::append_request_end(line, r);
  return line;
}

void Frontend::Impl::on_kv_batch(size_t i, const kvevents::EventBatch& b) {
  KvWorker& k = *kv[i];
  k.feed.apply(
      b, [&](const route::KvEvent& e) { router->apply_kv_event(i, e); },
      [&](uint32_t bs) { return check_block_size(i, bs, "a BlockStored event"); },
      [&](const std::string& why) {
        if (k.problems++ % 100 == 0) diag::warning(fmt::format("worker {} KV events", i), why + " (event skipped)");
      });
}

void Frontend::Impl::on_kv_reset(size_t i, const std::string&) {
  kv[i]->feed.reset([&](const route::KvEvent& e) { router->apply_kv_event(i, e); });
  kv[i]->resets++;
}

Expected<std::vector<uint32_t>> Frontend::Impl::tokenize(Api api, const Json& body, const std::string& model) {
  return http::tokenize(opt.tokenizer_url, http::tokenize_request(api, body, model, &tokens::render_request));
}

void Frontend::Impl::forward_plain(size_t worker, const http::ServerRequest& req, http::ServerResponse& res) {
  http::ProxyRequest preq;
  preq.method = req.method;
  preq.path = origin_form(req.target.empty() ? req.path : req.target);
  preq.headers = req.headers;
  preq.body = req.body;
  auto call = http::ProxyCall::start(*pools[worker], std::move(preq), nullptr, clock);
  if (!call->wait_response()) {
    http::set_error(res, 502, "connection", "upstream unreachable: " + call->error());
    return;
  }
  call->relay_blocking(res, {}, nullptr);
}

// ---- admin ---------------------------------------------------------------------------------

namespace {
/// The identity columns of a /v1/bindings row: a session's key, or a parent group's parent id.
Json binding_key_json(const std::string& key, const std::string& parent) {
  Json j = Json::object();
  if (!parent.empty()) {
    j["key"] = nullptr;
    j["parent_session_id"] = parent;
    j["kind"] = "parent_group";
  } else {
    j["key"] = key;
    j["kind"] = "session";
  }
  return j;
}
}  // namespace

std::string Frontend::Impl::bindings_text() const {
  double now = clock.now_ms();
  uint64_t unix_now = clock.unix_ms();
  auto local = router->bindings();
  std::optional<Expected<std::vector<StoredBinding>>> stored;
  if (shared && shared->store().up()) stored = shared->store().list();
  const bool from_store = stored && *stored;
  // The document is written row by row, each binding on one line: the table can hold 65,536
  // bindings, and one Json tree of them all (plus its indented dump) peaked at about 150 MB.
  Json head = Json::object();
  head["affinity"] = opt.router.affinity_enabled() ? Json{{"ttl_secs", opt.router.affinity_ttl_secs},
                                                          {"mode", route::affinity_mode_name(opt.router.affinity_mode)}}
                                                   : Json(nullptr);
  if (shared) {
    // Which table this is: the shared one, or this replica's own while the store is unreachable.
    head["store"] = Json{{"url", opt.binding_store}, {"up", from_store}, {"table", from_store ? "shared" : "local"}};
  }
  head["count"] = from_store ? (**stored).size() : local.size();
  std::string out = head.dump(2, ' ', false, Json::error_handler_t::replace);
  out.resize(out.size() - 2);  // "\n}": the rows follow
  out += ",\n  \"bindings\": [";
  bool first = true;
  auto emit = [&](const Json& j) {
    out += first ? "\n    " : ",\n    ";
    first = false;
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  if (from_store) {
    // The shared table: every replica's bindings as the store holds them; leases, state and
    // version are this replica's view (other replicas' leases are not in the store).
    std::map<std::pair<std::string, std::string>, const route::BindingInfo*> mine;
    for (const auto& b : local) mine[{b.key, b.parent_session_id}] = &b;
    std::vector<StoredBinding>& rows = **stored;
    std::sort(rows.begin(), rows.end(), [](const StoredBinding& a, const StoredBinding& b) {
      return std::tie(a.session_id, a.parent_session_id) < std::tie(b.session_id, b.parent_session_id);
    });
    for (const auto& r : rows) {
      Json j = binding_key_json(r.session_id, r.parent_session_id);
      auto wi = std::find(opt.workers.begin(), opt.workers.end(), r.worker_url);
      bool known = wi != opt.workers.end();
      j["worker"] = known ? Json(static_cast<uint64_t>(wi - opt.workers.begin())) : Json(nullptr);
      j["worker_url"] = r.worker_url;
      auto m = mine.find({r.session_id, r.parent_session_id});
      const route::BindingInfo* b = m == mine.end() ? nullptr : m->second;
      j["state"] = !known ? "unknown_worker" : (b && b->initializing ? "initializing" : "bound");
      j["active_leases"] = b ? b->active_leases : 0;
      j["version"] = b ? b->version : 0;
      if (r.ttl_ms >= 0) {
        j["idle_deadline_unix_ms"] = unix_now + static_cast<uint64_t>(r.ttl_ms);
        j["idle_expires_in_ms"] = static_cast<double>(r.ttl_ms);
      } else {
        j["idle_deadline_unix_ms"] = nullptr;
      }
      emit(j);
    }
  } else {
    for (const auto& b : local) {
      Json j = binding_key_json(b.key, b.parent_session_id);
      j["worker"] = b.worker;
      j["worker_url"] = b.worker < opt.workers.size() ? opt.workers[b.worker] : "";
      j["state"] = b.initializing ? "initializing" : "bound";
      j["active_leases"] = b.active_leases;
      j["version"] = b.version;
      if (b.idle_deadline_ms) {
        double left = *b.idle_deadline_ms - now;
        j["idle_deadline_unix_ms"] = unix_now + static_cast<uint64_t>(std::max(0.0, left));
        j["idle_expires_in_ms"] = std::max(0.0, left);
      } else {
        j["idle_deadline_unix_ms"] = nullptr;
      }
      emit(j);
    }
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Json Frontend::Impl::health_json(bool* any_healthy) const {
  Json ws = Json::array();
  bool any = false;
  for (size_t i = 0; i < opt.workers.size(); ++i) {
    bool h = healthy[i].load();
    any = any || h;
    ws.push_back(Json{{"worker", i}, {"url", opt.workers[i]}, {"healthy", h}});
  }
  if (any_healthy) *any_healthy = any;
  Json j = Json::object();
  j["status"] = any ? "ok" : "no healthy worker";
  j["workers"] = std::move(ws);
  return j;
}

std::string Frontend::Impl::metrics_text() const {
  std::string o;
  auto wl = [&](size_t i) { return fmt::format("worker=\"{}\",url=\"{}\"", i, opt.workers[i]); };
  prom_family(o, "dyn_frontend_requests_total", "counter", "API requests received");
  prom_sample(o, "dyn_frontend_requests_total", "", static_cast<double>(requests_total.load()));
  prom_family(o, "dyn_frontend_rejected_total", "counter",
              "requests answered by the frontend with an error before dispatch");
  prom_sample(o, "dyn_frontend_rejected_total", "", static_cast<double>(rejected_total.load()));
  prom_family(o, "dyn_frontend_retries_total", "counter",
              "dispatches retried on another worker after a transport failure");
  prom_sample(o, "dyn_frontend_retries_total", "", static_cast<double>(retries_total.load()));
  struct F {
    const char* name;
    const char* help;
    std::atomic<uint64_t> WorkerCounters::*m;
  };
  const F fams[] = {
      {"dyn_worker_requests_total", "requests dispatched to the worker", &WorkerCounters::requests},
      {"dyn_worker_errors_total", "dispatched requests that ended in an error", &WorkerCounters::errors},
      {"dyn_worker_cancelled_total", "dispatched requests whose client went away", &WorkerCounters::cancelled},
      {"dyn_worker_input_tokens_total", "input tokens reported by the worker", &WorkerCounters::input_tokens},
      {"dyn_worker_output_tokens_total", "output tokens reported by the worker", &WorkerCounters::output_tokens},
      {"dyn_worker_cached_tokens_total", "cached prompt tokens reported by the worker", &WorkerCounters::cached_tokens},
  };
  for (const auto& fam : fams) {
    prom_family(o, fam.name, "counter", fam.help);
    for (size_t i = 0; i < counters.size(); ++i)
      prom_sample(o, fam.name, wl(i), static_cast<double>(((*counters[i]).*fam.m).load()));
  }
  prom_family(o, "dyn_worker_in_flight", "gauge",
              "requests dispatched to the worker and not ended (awaiting its headers or being relayed)");
  for (size_t i = 0; i < counters.size(); ++i)
    prom_sample(o, "dyn_worker_in_flight", wl(i), static_cast<double>(counters[i]->in_flight.load()));
  prom_family(o, "dyn_worker_healthy", "gauge", "1 when the worker's /health answered 200 at the last poll");
  for (size_t i = 0; i < counters.size(); ++i) prom_sample(o, "dyn_worker_healthy", wl(i), healthy[i].load() ? 1 : 0);
  if (router) {
    route::RouterStats s = router->stats();
    prom_family(o, "dyn_router_decisions_total", "counter", "routing decisions per chosen worker");
    for (const auto& [w, n] : s.decisions_per_worker)
      prom_sample(o, "dyn_router_decisions_total", fmt::format("worker=\"{}\"", w), static_cast<double>(n));
    prom_family(o, "dyn_router_bindings_total", "counter",
                "binding outcomes of routed requests (SPEC 5.1 dyn.binding)");
    const std::pair<const char*, uint64_t> outcomes[] = {{"new", s.binding_new},
                                                         {"hit", s.binding_hit},
                                                         {"rebound", s.binding_rebound},
                                                         {"expired", s.binding_expired},
                                                         {"none", s.binding_none}};
    for (const auto& [k, v] : outcomes)
      prom_sample(o, "dyn_router_bindings_total", fmt::format("outcome=\"{}\"", k), static_cast<double>(v));
    prom_family(o, "dyn_router_bindings_live", "gauge", "live session bindings");
    prom_sample(o, "dyn_router_bindings_live", "", static_cast<double>(s.bindings_live));
    prom_family(o, "dyn_router_binding_table_full_total", "counter", "new bindings refused at the table limit");
    prom_sample(o, "dyn_router_binding_table_full_total", "", static_cast<double>(s.table_full));
    prom_family(o, "dyn_router_binding_waits_total", "counter", "requests that waited for an initializing binding");
    prom_sample(o, "dyn_router_binding_waits_total", "", static_cast<double>(s.waits));
    if (shared) {
      BindingStore::Stats bs = shared->store().stats();
      SharedBindings::Stats ss = shared->stats();
      prom_family(o, "dyn_router_binding_store_up", "gauge",
                  "1 while the shared binding store answers (--router-binding-store)");
      prom_sample(o, "dyn_router_binding_store_up", "", shared->store().up() ? 1 : 0);
      const std::tuple<const char*, const char*, uint64_t> fams[] = {
          {"dyn_router_binding_store_outages_total", "times the binding store became unreachable", bs.outages},
          {"dyn_router_binding_store_errors_total", "failed binding store calls", bs.errors},
          {"dyn_router_binding_store_reads_total", "placements that read the binding store (one round trip)",
           ss.round_trips},
          {"dyn_router_binding_store_cached_total",
           "placements that trusted a copy of the store's binding (no round trip)", ss.cached},
          {"dyn_router_binding_store_claims_total", "atomic claims and compare-and-sets sent to the binding store",
           ss.claims},
          {"dyn_router_binding_store_conflicts_total",
           "claims lost to another replica (the request followed its binding)", ss.conflicts},
          {"dyn_router_binding_store_bad_values_total",
           "store bindings naming a worker URL this replica does not have (ignored)", ss.bad_values},
          {"dyn_router_binding_store_local_only_total", "placements made on the local table alone (store unreachable)",
           ss.local_only},
          {"dyn_router_binding_store_updates_dropped_total",
           "queued TTL refreshes and deletes dropped while the store was unreachable", bs.async_dropped},
          {"dyn_router_binding_store_notifications_total", "binding changes announced by other replicas",
           bs.notifications},
      };
      for (const auto& [name, help, v] : fams) {
        prom_family(o, name, "counter", help);
        prom_sample(o, name, "", static_cast<double>(v));
      }
    }
    prom_family(o, "dyn_router_index_blocks", "gauge", "KV blocks the router's index holds for the worker");
    for (const auto& l : router->loads())
      prom_sample(o, "dyn_router_index_blocks", fmt::format("worker=\"{}\"", l.worker),
                  static_cast<double>(l.cached_blocks));
  }
  if (!kv.empty()) {
    struct S {
      const char* name;
      const char* type;
      const char* help;
      std::function<double(size_t)> v;
    };
    const S kvf[] = {
        {"dyn_kv_events_batches_total", "counter", "KV event batches applied (replayed ones included)",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().batches.load()); }},
        {"dyn_kv_events_replayed_batches_total", "counter", "KV event batches fetched from the replay socket",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().replayed_batches.load()); }},
        {"dyn_kv_events_gaps_total", "counter", "sequence gaps detected in the worker's KV event stream",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().gaps.load()); }},
        {"dyn_kv_events_gaps_unrecovered_total", "counter",
         "gaps the replay socket could not fill (the worker's index was cleared)",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().gaps_unrecovered.load()); }},
        {"dyn_kv_events_publisher_restarts_total", "counter",
         "publisher restarts or reconnections seen (the worker's index was cleared)",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().restarts.load()); }},
        {"dyn_kv_events_index_resets_total", "counter", "times the worker's index was cleared for lost events",
         [this](size_t i) { return static_cast<double>(kv[i]->resets.load()); }},
        {"dyn_kv_events_bad_batches_total", "counter", "undecodable KV event messages",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().bad_batches.load()); }},
        {"dyn_kv_events_last_seq", "gauge", "sequence number of the last KV event batch applied (-1 = none)",
         [this](size_t i) { return static_cast<double>(kv[i]->sub->stats().last_seq.load()); }},
        {"dyn_kv_events_engine_blocks", "gauge", "engine blocks the event translator knows for the worker",
         [this](size_t i) { return static_cast<double>(kv[i]->feed.counts().engine_blocks.load()); }},
    };
    for (const auto& f : kvf) {
      prom_family(o, f.name, f.type, f.help);
      for (size_t i = 0; i < kv.size(); ++i) prom_sample(o, f.name, wl(i), f.v(i));
    }
    prom_family(o, "dyn_kv_events_total", "counter", "KV events received, by type");
    for (size_t i = 0; i < kv.size(); ++i) {
      const kvevents::FeedCounts& c = kv[i]->feed.counts();
      prom_sample(o, "dyn_kv_events_total", wl(i) + ",type=\"BlockStored\"", static_cast<double>(c.stored.load()));
      prom_sample(o, "dyn_kv_events_total", wl(i) + ",type=\"BlockRemoved\"", static_cast<double>(c.removed.load()));
      prom_sample(o, "dyn_kv_events_total", wl(i) + ",type=\"AllBlocksCleared\"",
                  static_cast<double>(c.cleared.load()));
    }
    prom_family(o, "dyn_kv_events_skipped_total", "counter",
                "KV events not applied to the worker's index, by reason (never their batch)");
    for (size_t i = 0; i < kv.size(); ++i)
      for (size_t r = 0; r < kvevents::kSkipReasons; ++r)
        prom_sample(o, "dyn_kv_events_skipped_total",
                    wl(i) + ",reason=\"" + kvevents::skip_name(static_cast<kvevents::Skip>(r)) + "\"",
                    static_cast<double>(kv[i]->feed.counts().skipped[r].load()));
  }
  if (!opt.tokenizer_url.empty()) {
    prom_family(o, "dyn_tokenizer_errors_total", "counter",
                "requests hashed from 4-byte tokens because the tokenizer failed");
    prom_sample(o, "dyn_tokenizer_errors_total", "", static_cast<double>(tokenizer_errors.load()));
  }
  if (router) {
    prom_family(o, "dyn_worker_block_size", "gauge", "KV block size the worker reported (0 = not known)");
    for (size_t i = 0; i < opt.workers.size(); ++i)
      prom_sample(o, "dyn_worker_block_size", wl(i), worker_block_size[i].load());
  }
  prom_family(o, "dyn_frontend_in_flight_requests", "gauge", "API requests being served (streams until they end)");
  prom_sample(o, "dyn_frontend_in_flight_requests", "", static_cast<double>(api_in_flight.load()));
  if (writer) {
    prom_family(o, "dyn_trace_rows_dropped_total", "counter",
                "request_end rows lost to failed trace writes (disk full)");
    prom_sample(o, "dyn_trace_rows_dropped_total", "", static_cast<double>(writer->dropped_rows()));
  }
  prom_family(o, "dyn_request_ttft_seconds", "histogram", "time to first token of successful requests");
  ttft_hist.render(o, "dyn_request_ttft_seconds", "");
  prom_family(o, "dyn_request_duration_seconds", "histogram", "total time of successful requests");
  total_hist.render(o, "dyn_request_duration_seconds", "");
  prom_family(o, "dyn_request_itl_seconds", "histogram", "average inter-token latency per streamed request");
  itl_hist.render(o, "dyn_request_itl_seconds", "");
  return o;
}

void Frontend::Impl::health_loop() {
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (const auto& p : pools) {
    auto c = std::make_unique<httplib::Client>(p->url().scheme_host_port);
    auto us = std::chrono::microseconds(static_cast<int64_t>(opt.health_timeout_ms * 1000));
    c->set_connection_timeout(us);
    c->set_read_timeout(us);
    // A fresh connection per poll: a reused keep-alive connection may have been closed by the
    // worker (idle timeout, request cap, restart), and the poll then fails with a write error that
    // says nothing about the worker's health. Seen under load in the soak ("GET /health failed:
    // Write") as a healthy worker marked down and its hard-affinity sessions moved. Proxied
    // requests do not need this: ProxyCall retries a reused connection once on a fresh one.
    c->set_keep_alive(false);
    clients.push_back(std::move(c));
  }
  std::vector<unsigned> failed_polls(clients.size(), 0);  // consecutive, per worker
  std::vector<uint64_t> answered_seen(clients.size(), 0);
  for (;;) {
    for (size_t i = 0; i < clients.size(); ++i) {
      auto r = clients[i]->Get(pools[i]->url().path_prefix + "/health");
      bool ok = r && r->status == 200;
      // A poll that got no answer from a worker that completed requests since the last poll is
      // not a failure: the worker is alive, its HTTP server busy (a thread-per-connection engine
      // with every thread streaming queues the poll's connection). Counting it turned overload
      // into an outage: at 2,000 streams on one dyn-mocker, the router marked its only worker
      // down and answered 503 "no healthy worker" (issue 16). A worker that stops answering
      // proxied requests too fails on the next poll, and a failed proxied request marks it down
      // at once (no_response).
      const uint64_t answered = counters[i]->answered.load();
      const bool busy = !r && answered != answered_seen[i];
      answered_seen[i] = answered;
      if (busy) {
        failed_polls[i] = 0;
        continue;
      }
      std::string why = ok  ? "GET /health answered 200"
                        : r ? fmt::format("GET /health answered {}", r->status)
                            : "GET /health failed: " + httplib::to_string(r.error());
      if (ok) {
        // Worker metadata: dyn-mocker reports its block size here (vLLM's /health is empty).
        Json j = Json::parse(r->body, nullptr, false);
        if (j.is_object()) {
          auto it = j.find("kv_block_size");
          if (it != j.end() && it->is_number_unsigned() && it->get<uint64_t>() > 0 && it->get<uint64_t>() <= UINT32_MAX)
            check_block_size(i, it->get<uint32_t>(), "GET /health kv_block_size");
        }
        if (refused[i]) {
          set_worker_health(i, false, "refused: block size mismatch");
          continue;
        }
      }
      failed_polls[i] = ok ? 0 : failed_polls[i] + 1;
      if (ok || failed_polls[i] >= std::max(1u, opt.health_failure_threshold)) {
        if (!ok && failed_polls[i] > 1) why += fmt::format(" ({} polls in a row)", failed_polls[i]);
        set_worker_health(i, ok, why);
      }
    }
    std::unique_lock<std::mutex> lk(health_mu);
    if (health_cv.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>(opt.health_interval_ms * 1000)),
                           [&] { return stopping; })) {
      return;
    }
  }
}

}  // namespace dyn::serve
