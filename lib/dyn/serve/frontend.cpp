// The live frontend: its parts put together (fleet, placer, KV feeds, health polls, relay, trace,
// admin pages), its routes, and its lifecycle (bind, serve, drain).
#include "dyn/serve/frontend.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "dyn/http/event_server.h"
#include "dyn/serve/admin.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/health.h"
#include "dyn/serve/intake.h"
#include "dyn/serve/kv_feeds.h"
#include "dyn/serve/membership.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/relay.h"
#include "dyn/serve/request_trace.h"
#include "dyn/serve/tool_events.h"

namespace dyn::serve {

namespace {

/// The options once checked (Fatal, exit 2, for what no part checks): at least one worker (or a
/// worker file, which may name none yet), exactly one in capture mode; in serve mode the trace's
/// block size is the router's.
FrontendOptions checked_options(FrontendOptions o) {
  if (o.workers.empty() && (o.capture || o.worker_file.empty()))
    throw Fatal(kExitUsage, "at least one --worker URL (or a --worker-file) is needed");
  if (o.capture && o.workers.size() != 1) throw Fatal(kExitUsage, "capture takes exactly one --upstream");
  if (!o.capture) o.trace_block_size = o.router.block_size;
  return o;
}

}  // namespace

/// The parts, each owning one job and its state; the Impl wires them and owns the listeners.
/// Declared in the order they are built: each part only uses the ones above it, and is
/// destroyed before them.
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
  std::unique_ptr<Fleet> fleet;
  std::unique_ptr<Placer> placer;        ///< serve mode
  std::unique_ptr<KvFeeds> kv;           ///< --router-kv-events
  std::unique_ptr<Membership> members;   ///< serve mode: workers joining and leaving
  std::unique_ptr<HealthPoller> health;  ///< serve mode
  std::unique_ptr<RequestTrace> trace;
  std::unique_ptr<Relay> relay;
  std::unique_ptr<ToolEventIngress> tools;  ///< --tool-events-endpoint
  std::unique_ptr<AdminPages> admin;

  Impl(FrontendOptions o, const Clock& c);
  /// One loop thread per core (up to 8): more would only add wake-ups.
  static size_t loop_threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8); }
  bool admin_separate() const { return opt.admin_listen.port >= 0; }
  /// The API routes, and in serve mode what any healthy worker answers.
  void add_api_routes();
  /// The admin pages, /health, /, OPTIONS and the answer to every other target.
  void add_other_routes();
};

Frontend::Impl::Impl(FrontendOptions o, const Clock& c)
    : opt(checked_options(std::move(o))),
      clock(c),
      loop(loop_threads(), opt.listen.threads),
      server(loop, opt.max_request_bytes),
      admin_server(loop, opt.max_request_bytes) {
  CircuitOptions circuit = opt.circuit;
  if (opt.capture) circuit.enabled = false;  // one upstream, nowhere else to go
  fleet = std::make_unique<Fleet>(opt.workers, loop, opt.upstream, opt.capture ? 0 : opt.router.block_size,
                                  opt.allow_block_size_mismatch, circuit, clock);
  if (!opt.capture) {
    placer = std::make_unique<Placer>(opt, *fleet, clock,
                                      [this](std::function<void()> f) { loop.handlers().post(std::move(f)); });
    fleet->on_health_change([p = placer.get()](size_t i, bool ok) { p->on_health_change(i, ok); });
    // The engines' own KV sizes, unless --router-worker-kv-blocks gave one (flag > learned > default).
    if (opt.learn_worker_kv_blocks)
      fleet->on_kv_blocks([p = placer.get()](size_t i, uint64_t n) { p->router().set_worker_kv_blocks(i, n); });
    if (opt.router.kv_events) {
      kv = std::make_unique<KvFeeds>(*fleet, placer->router(), opt.router.block_size);
      if (opt.kv_events.size() != fleet->size())
        throw Fatal(kExitUsage, fmt::format("--router-kv-events needs the KV event endpoint of every worker "
                                            "(--worker-kv-events URL=ENDPOINT[,REPLAY]); {} of {} given",
                                            opt.kv_events.size(), fleet->size()));
      for (size_t i = 0; i < opt.kv_events.size(); ++i)
        if (auto e = kv->add(i, opt.kv_events[i])) throw Fatal(kExitUsage, e->message);
    } else if (!opt.kv_events.empty()) {
      throw Fatal(kExitUsage, "--worker-kv-events needs --router-kv-events (the index is predicted otherwise)");
    }
    members = std::make_unique<Membership>(opt, *fleet, *placer, kv.get());
    health = std::make_unique<HealthPoller>(
        *fleet, HealthPollOptions{opt.health_interval_ms, opt.health_timeout_ms, opt.health_failure_threshold,
                                  opt.learn_worker_kv_blocks});
  }
  if (opt.trace_block_size == 0) throw Fatal(kExitUsage, "block size must be > 0");
  trace = std::make_unique<RequestTrace>(clock, opt.trace_block_size, !opt.capture,
                                         opt.capture ? nullptr : &opt.queue.classes);
  relay = std::make_unique<Relay>(opt, clock, loop, *fleet, placer.get(), kv ? &kv->adapters() : nullptr, *trace);
  if (!opt.tool_events_endpoint.empty()) {
    tools =
        std::make_unique<ToolEventIngress>(clock, *trace, placer ? placer->admission() : nullptr, relay->kv_policies());
    relay->set_tool_events(tools.get());
  }
  admin = std::make_unique<AdminPages>(
      AdminSources{opt, clock, *fleet, placer.get(), kv.get(), *relay, *trace, members.get(), tools.get()});
  add_api_routes();
  add_other_routes();
  // Last: the subscriber threads use the router, health flags and admission set up above. A bad
  // ZMQ address is a usage error here, before any thread of serve() exists; an unreadable worker
  // file an I/O error, before the server says it listens.
  if (members) members->start();
  if (kv) kv->start();
}

void Frontend::Impl::add_api_routes() {
  // Each route also matches the absolute form of its target ("POST http://host/v1/messages",
  // RFC 9112 3.2.2), which clients configured to use the router as an HTTP proxy send.
  for (const api::ApiInfo& a : api::kApis) {
    server.route_async("POST", absolute_or_origin(a.path),
                       [this, api = a.api](Relay::ReqPtr req, Relay::ResPtr res, Relay::Done done) {
                         // The server reads bodies before routing, as JSON (no form parsing);
                         // other content types get a clear 415 here (issue 21.10).
                         if (!check_content_type(*req, *res)) return done();
                         relay->handle_api(api, std::move(req), std::move(res), std::move(done));
                       });
  }
  if (opt.capture) return;
  // Requests any healthy worker answers: Anthropic's token counting (the SDK's
  // messages.count_tokens: no generation, so no routing state) and the model list.
  auto any_worker = [this](const http::ServerRequest& req, http::ServerResponse& res) {
    if (auto w = fleet->first_healthy()) return relay->forward_plain(*w, req, res);
    http::set_error(res, 503, "service_unavailable", "no healthy worker");
  };
  server.route("POST", absolute_or_origin("/v1/messages/count_tokens"),
               [any_worker](const http::ServerRequest& req, http::ServerResponse& res) {
                 if (check_content_type(req, res)) any_worker(req, res);
               });
  server.route("GET", absolute_or_origin("/v1/models(?:/.*)?"), any_worker);
}

void Frontend::Impl::add_other_routes() {
  // Routes match whole targets, the first one registered winning: only the catch-alls at the
  // end overlap the others.
  if (admin_separate()) {
    admin->add_routes(admin_server, /*guarded=*/false);
  } else {
    admin->add_routes(server, /*guarded=*/true);
  }
  // Liveness for load balancers stays on the main listener; worker URLs only for admin peers.
  if (!opt.capture) admin->add_health_route(server);
  // GET or HEAD / (the server answers HEAD with the GET handler, without the body): what this
  // is, for load balancers and people probing the port.
  server.route("GET", absolute_or_origin("/"), [this](const http::ServerRequest&, http::ServerResponse& res) {
    Json j = Json::object();
    j["service"] = opt.capture ? "dyn-trace capture" : "dyn-route serve";
    j["apis"] = Json::array();
    for (const api::ApiInfo& a : api::kApis) j["apis"].push_back(a.path);
    res.set_content(j.dump() + "\n", "application/json");
  });
  // OPTIONS (any target, and "*"): the methods this server takes; no CORS grants.
  server.route("OPTIONS", ".*", [](const http::ServerRequest&, http::ServerResponse& res) {
    res.status = 204;
    res.set_header("Allow", "GET, HEAD, POST, OPTIONS");
  });
  auto other = [this](const http::ServerRequest& req, http::ServerResponse& res) {
    if (opt.capture) return relay->forward_plain(0, req, res);
    http::set_error(res, 404, "not_found_error", "unknown route " + req.method + " " + req.path);
  };
  auto other_with_body = [other](const http::ServerRequest& req, http::ServerResponse& res) {
    if (check_content_type(req, res)) other(req, res);
  };
  server.route("GET", ".*", other);
  for (const char* method : {"POST", "PUT", "PATCH"}) server.route(method, ".*", other_with_body);
  server.route("DELETE", ".*", other);
}

Frontend::Frontend(FrontendOptions options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), clock)) {}

Frontend::~Frontend() { stop(); }

Expected<int> Frontend::bind() {
  Impl& m = *impl_;
  // serve() opens the trace; a folder it cannot write to is an error before the server says
  // "listening" (and before its port file appears), not right after.
  if (m.opt.trace) {
    if (auto e = RequestTrace::check_folder(m.opt.trace_file.prefix)) return *e;
  }
  if (m.admin_separate()) {
    auto a = m.admin_server.bind(m.opt.admin_listen);
    if (!a) return a.error();
  }
  // Before the server says it listens: a harness may send as soon as it sees the port.
  if (m.tools) {
    try {
      m.tools->start(m.opt.tool_events_endpoint, m.opt.tool_events_topic);
    } catch (const Fatal& e) {
      return Error{e.what(), e.exit_code()};
    }
  }
  return m.server.bind(m.opt.listen);
}

void Frontend::serve() {
  Impl& m = *impl_;
  if (m.opt.trace) m.trace->open(m.opt.trace_file, m.opt.run_config);
  if (m.health) m.health->start();
  if (m.placer) m.placer->start();
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
  m.fleet->close_idle();  // an idle upstream connection's wait would hold the loop (5 s)
  m.loop.shutdown();
  if (m.placer) m.placer->stop();
  if (m.health) m.health->join();
  if (m.members) m.members->stop();
  if (m.kv) m.kv->stop();
  if (m.tools) m.tools->stop();
  m.trace->close();
}

void Frontend::stop() {
  Impl& m = *impl_;
  // Requests blocked in admission wake and are answered 503, so the server's pool can drain.
  if (m.placer) m.placer->shutdown();
  // Drain first: closing the listeners cuts every stream in flight. New requests get 503
  // meanwhile; streams still running after drain_timeout_s are cut (their rows say cancelled).
  if (m.relay->begin_drain()) {
    // Real time, not the injected clock: a fake clock would never reach the deadline.
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(m.opt.drain_timeout_s * 1e6));
    while (m.relay->in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lk(m.stop_mu);
    m.stop_requested = true;
  }
  m.stop_cv.notify_all();
  if (m.health) m.health->stop();
}

}  // namespace dyn::serve
