// dyn-mocker: a mock OpenAI-compatible inference engine running the SPEC 8 engine model in
// real time (HTTP wiring only; the model and wire shapes live in lib/dyn/engine).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/base/json_limits.h"
#include "dyn/cli/run_tool.h"
#include "dyn/http/pool.h"
#include "dyn/engine/live.h"
#include "dyn/engine/mock_api.h"
#include "engine_flags.h"

namespace {

using dyn::Json;
using namespace dyn::engine;

struct Options {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string port_file;
  std::string model = "mock-model";
  int64_t worker_id = 0;
  EngineConfig engine;
  bool kv_events = false;
  std::string replies;
  uint64_t default_max_tokens = 128;
  size_t threads = 1024;
  // Fault injection for chaos tests (see the man page, FAULT INJECTION): API requests are
  // numbered in arrival order; the first `fault_after` are served normally, the next `fail_first`
  // are answered with `fail_status`, then `stall_count` (0 = all) wait `stall_ms` before headers.
  uint64_t fault_after = 0;
  uint64_t fail_first = 0;
  int fail_status = 503;
  double stall_ms = 0;
  uint64_t stall_count = 0;
};

// Tokens of one request as the engine thread reports them.
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generated = 0;
  uint64_t cached = 0;
  bool finished = false;
};

// One KV-event subscriber (GET /v1/kv_events).
struct Subscriber {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  bool closed = false;
};

class Mocker {
 public:
  explicit Mocker(Options o) : opt_(std::move(o)), engine_(opt_.engine) {}

  void load_replies() {
    if (opt_.replies.empty()) return;
    auto s = ReplyScript::load(opt_.replies);
    if (!s) throw dyn::Fatal(s.error().exit_code, s.error().message);
    script_ = std::make_unique<ReplyScript>(std::move(*s));
  }

  int serve() {
    // Block the stop signals in every thread; one thread waits for them and stops the server
    // from outside the signal handler (httplib's stop() is not async-signal-safe).
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    httplib::Server svr;
    const size_t threads = opt_.threads;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr.set_keep_alive_max_count(100000);
    // Each SSE chunk is a small write: without TCP_NODELAY, Nagle holds it until the client's
    // delayed ACK (~40 ms), which inflates ITL and caps a keep-alive connection at ~25 req/s.
    svr.set_tcp_nodelay(true);
    svr.set_read_timeout(600, 0);
    svr.set_write_timeout(600, 0);
    routes(svr);
    if (opt_.kv_events)
      engine_.set_kv_listener([this](const std::vector<KvEvent>& ev) { publish(ev); });

    int port = opt_.port;
    if (port == 0) {
      port = svr.bind_to_any_port(opt_.host);
      if (port < 0) throw dyn::Fatal(dyn::kExitIo, fmt::format("cannot bind {}", opt_.host));
    } else if (!svr.bind_to_port(opt_.host, port)) {
      throw dyn::Fatal(dyn::kExitIo, fmt::format("cannot bind {}:{}", opt_.host, port));
    }
    // cpp-httplib 0.11 listens with a backlog of 5: a burst of connects (replay start, 2,000
    // streams) would be reset after ~1 s.
    dyn::http::widen_listen_backlog(port);
    engine_.start();
    if (!opt_.port_file.empty()) {
      // Written after bind, so a script that waits for the file can connect at once.
      std::string tmp = opt_.port_file + ".tmp";
      { std::ofstream(tmp) << port << "\n"; }
      std::rename(tmp.c_str(), opt_.port_file.c_str());
    }
    dyn::diag::note(fmt::format("listening on http://{}:{} (model {}, worker {})", opt_.host, port, opt_.model,
                                opt_.worker_id));
    std::atomic<int> got_signal{0};
    std::thread watcher([&] {
      int sig = 0;
      sigwait(&set, &sig);
      got_signal = sig;
      stopping_ = true;
      close_subscribers();
      svr.stop();
    });
    bool ok = svr.listen_after_bind();
    stopping_ = true;
    close_subscribers();
    if (!got_signal) pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    engine_.stop();
    if (!ok && !got_signal) throw dyn::Fatal(dyn::kExitIo, "server stopped unexpectedly");
    dyn::diag::note("stopped");
    return dyn::kExitOk;
  }

 private:
  void routes(httplib::Server& svr) {
    svr.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { handle(Api::kChat, q, r); });
    svr.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { handle(Api::kCompletions, q, r); });
    svr.Post("/v1/messages", [this](const httplib::Request& q, httplib::Response& r) { handle(Api::kMessages, q, r); });
    svr.Post("/v1/responses", [this](const httplib::Request& q, httplib::Response& r) { handle(Api::kResponses, q, r); });
    svr.Post("/v1/messages/count_tokens", [this](const httplib::Request& q, httplib::Response& r) {
      if (dyn::json_too_deep(q.body))
        return send_error(r, Api::kMessages, 400, "JSON body nested too deeply", "invalid_request_error");
      Json body = Json::parse(q.body, nullptr, false);
      auto req = parse_mock_request(Api::kMessages, body, opt_.engine.block_size, 1);
      if (!req) return send_error(r, Api::kMessages, 400, req.error().message, "invalid_request_error");
      r.set_content(Json{{"input_tokens", req->prompt_tokens}}.dump(), "application/json");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      Json m = {{"id", opt_.model}, {"object", "model"}, {"created", 0}, {"owned_by", "dyn-mocker"},
                {"type", "model"}, {"display_name", opt_.model}};
      r.set_content(Json{{"object", "list"}, {"data", Json::array({m})}, {"has_more", false}}.dump(), "application/json");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(Json{{"status", "ok"}, {"model", opt_.model}, {"worker_id", opt_.worker_id}}.dump(), "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics(), "text/plain; version=0.0.4");
    });
    svr.Get("/v1/kv_events", [this](const httplib::Request&, httplib::Response& r) { kv_events(r); });
    // Claude Code probes its base URL with HEAD / before the first request.
    svr.Get("/", [](const httplib::Request&, httplib::Response& r) { r.set_content("dyn-mocker\n", "text/plain"); });
  }

  void send_error(httplib::Response& r, Api api, int code, const std::string& msg, const std::string& type) {
    r.status = code;
    r.set_content(error_body(api, msg, type, code).dump(), "application/json");
    ++errors_;
  }

  // Applies the fault schedule to the next API request: true when it was answered with an
  // injected error; otherwise it may first have waited (a stall before the response headers).
  bool inject_fault(Api api, httplib::Response& r) {
    const uint64_t n = api_seq_.fetch_add(1);  // 0-based arrival index
    if (n < opt_.fault_after) return false;
    const uint64_t k = n - opt_.fault_after;
    if (k < opt_.fail_first) {
      ++faults_failed_;
      send_error(r, api, opt_.fail_status,
                 fmt::format("injected fault: worker {} failing (--fail-first)", opt_.worker_id),
                 opt_.fail_status == 429 ? "rate_limit_error" : "server_error");
      return true;
    }
    const uint64_t j = k - opt_.fail_first;
    if (opt_.stall_ms > 0 && (opt_.stall_count == 0 || j < opt_.stall_count)) {
      ++faults_stalled_;
      // Sleep in slices so SIGTERM still stops the server promptly.
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(opt_.stall_ms * 1000));
      while (!stopping_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void handle(Api api, const httplib::Request& q, httplib::Response& r) {
    if (inject_fault(api, r)) return;
    if (dyn::json_too_deep(q.body))
      return send_error(r, api, 400, "JSON body nested too deeply", "invalid_request_error");
    Json body = Json::parse(q.body, nullptr, false);
    if (body.is_discarded()) return send_error(r, api, 400, "request body is not valid JSON", "invalid_request_error");
    auto parsed = parse_mock_request(api, body, opt_.engine.block_size, opt_.default_max_tokens);
    if (!parsed) return send_error(r, api, 400, parsed.error().message, "invalid_request_error");
    auto req = std::make_shared<MockRequest>(std::move(*parsed));
    if (req->model.empty()) req->model = opt_.model;
    std::optional<Reply> scripted;
    if (script_) scripted = script_->choose(*req);
    auto plan = std::make_shared<ReplyPlan>(plan_reply(*req, scripted));
    const uint64_t id = engine_.next_id();
    auto st = std::make_shared<StreamState>();
    RequestSpec spec{id, req->prompt_tokens, req->block_hashes, plan->tokens()};
    auto ok = engine_.submit(std::move(spec), [st](const TokenOutput& o) {
      {
        std::lock_guard lk(st->mu);
        st->generated = o.generated;
        st->cached = o.cached_tokens;
        st->finished = o.finished;
      }
      st->cv.notify_all();
    });
    if (!ok) return send_error(r, api, 400, ok.error().message, "invalid_request_error");
    ++requests_;
    const uint64_t created = dyn::RealClock::instance().unix_ms() / 1000;
    auto writer = std::make_shared<ResponseWriter>(*req, *plan, id, created);
    r.set_header("x-dyn-worker", std::to_string(opt_.worker_id));
    if (!req->stream) {
      std::unique_lock lk(st->mu);
      st->cv.wait(lk, [&] { return st->finished || stopping_.load(); });
      if (!st->finished) {
        lk.unlock();
        engine_.cancel(id);
        return send_error(r, api, 503, "server is shutting down", "server_error");
      }
      r.set_content(writer->full_body(st->cached).dump(), "application/json");
      return;
    }
    r.set_header("Cache-Control", "no-cache");
    auto sent = std::make_shared<uint64_t>(0);
    auto started = std::make_shared<bool>(false);
    auto done = std::make_shared<bool>(false);
    r.set_chunked_content_provider(
        "text/event-stream",
        [this, st, writer, req, plan, sent, started, done](size_t, httplib::DataSink& sink) {
          if (!*started) {
            *started = true;
            std::string s = writer->stream_start();
            if (!s.empty() && !sink.write(s.data(), s.size())) return false;
          }
          uint64_t gen;
          bool fin;
          uint64_t cached;
          {
            std::unique_lock lk(st->mu);
            while (st->generated <= *sent && !st->finished && !stopping_) {
              st->cv.wait_for(lk, std::chrono::milliseconds(200));
              if (!sink.is_writable()) return false;
            }
            gen = st->generated;
            fin = st->finished;
            cached = st->cached;
          }
          if (stopping_ && !fin) return false;
          std::string s = writer->stream_tokens(*sent, gen);
          *sent = gen;
          if (fin) s += writer->stream_end(cached);
          if (!s.empty() && !sink.write(s.data(), s.size())) return false;
          if (fin) {
            *done = true;
            sink.done();
          }
          return true;
        },
        [this, id, done](bool) {
          if (!*done) {
            engine_.cancel(id);  // client went away or server stopping: free its KV blocks
            ++cancelled_;
          }
        });
  }

  std::string metrics() {
    EngineStats s = engine_.stats();
    std::string lbl = fmt::format("{{worker_id=\"{}\",model=\"{}\"}}", opt_.worker_id, opt_.model);
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, double v) {
      out += fmt::format("# HELP dyn_mocker_{} {}\n# TYPE dyn_mocker_{} {}\ndyn_mocker_{}{} {}\n", name, help, name, type,
                         name, lbl, v);
    };
    metric("requests_total", "counter", "Requests accepted", static_cast<double>(requests_.load()));
    metric("requests_finished_total", "counter", "Requests completed", static_cast<double>(s.requests_finished));
    metric("requests_cancelled_total", "counter", "Requests dropped by their client", static_cast<double>(s.requests_cancelled));
    metric("request_errors_total", "counter", "Requests answered with an error status", static_cast<double>(errors_.load()));
    metric("prompt_tokens_total", "counter", "Prompt tokens of admitted requests", static_cast<double>(s.prompt_tokens));
    metric("cached_tokens_total", "counter", "Prompt tokens served from the prefix cache", static_cast<double>(s.cached_tokens));
    metric("generation_tokens_total", "counter", "Output tokens generated", static_cast<double>(s.generated_tokens));
    metric("prefix_cache_hit_ratio", "gauge", "cached_tokens_total / prompt_tokens_total",
           s.prompt_tokens ? static_cast<double>(s.cached_tokens) / static_cast<double>(s.prompt_tokens) : 0.0);
    metric("num_requests_running", "gauge", "Sequences running", static_cast<double>(s.running));
    metric("num_requests_waiting", "gauge", "Sequences queued (queue depth)", static_cast<double>(s.waiting));
    metric("kv_blocks_total", "gauge", "KV blocks in the pool", static_cast<double>(s.total_blocks));
    metric("kv_blocks_active", "gauge", "KV blocks held by running sequences", static_cast<double>(s.active_blocks));
    metric("kv_blocks_cached", "gauge", "Inactive KV blocks kept for reuse", static_cast<double>(s.cached_blocks));
    metric("kv_cache_usage_ratio", "gauge", "Active KV blocks / total", s.kv_usage);
    metric("preemptions_total", "counter", "Sequences preempted for recompute", static_cast<double>(s.preemptions));
    metric("kv_evictions_total", "counter", "Cached KV blocks evicted", static_cast<double>(s.evictions));
    metric("engine_steps_total", "counter", "Engine steps run", static_cast<double>(s.steps));
    metric("faults_failed_total", "counter", "Requests answered with an injected error (--fail-first)",
           static_cast<double>(faults_failed_.load()));
    metric("faults_stalled_total", "counter", "Requests stalled before their headers (--stall-before-headers-ms)",
           static_cast<double>(faults_stalled_.load()));
    return out;
  }

  // KV events as SSE: one `data: {...}` per event (SPEC 3.3); block hashes are sequence hashes.
  void publish(const std::vector<KvEvent>& events) {
    std::vector<std::string> lines;
    {
      std::lock_guard lk(sub_mu_);
      if (subs_.empty()) return;
      for (const KvEvent& e : events) lines.push_back(event_line(e));
    }
    std::lock_guard lk(sub_mu_);
    for (auto& s : subs_) {
      {
        std::lock_guard l2(s->mu);
        for (auto& l : lines) s->lines.push_back(l);
      }
      s->cv.notify_all();
    }
  }

  std::string event_line(const KvEvent& e) {
    Json j = {{"event_id", next_event_id_++}, {"worker_id", opt_.worker_id}};
    switch (e.kind) {
      case KvEvent::Kind::kStored:
        j["type"] = "stored";
        j["block_hashes"] = e.block_hashes;
        j["parent_hash"] = e.parent_hash ? Json(*e.parent_hash) : Json(nullptr);
        break;
      case KvEvent::Kind::kRemoved:
        j["type"] = "removed";
        j["block_hashes"] = e.block_hashes;
        break;
      case KvEvent::Kind::kCleared: j["type"] = "cleared"; break;
    }
    return "data: " + j.dump() + "\n\n";
  }

  void close_subscribers() {
    std::lock_guard lk(sub_mu_);
    for (auto& s : subs_) {
      {
        std::lock_guard l2(s->mu);
        s->closed = true;
      }
      s->cv.notify_all();
    }
  }

  void kv_events(httplib::Response& r) {
    if (!opt_.kv_events) {
      r.status = 404;
      r.set_content(error_body(Api::kChat, "KV events are off (start with --kv-events)", "not_found", 404).dump(),
                    "application/json");
      return;
    }
    auto sub = std::make_shared<Subscriber>();
    {
      // A new subscriber starts from "cleared": it knows nothing; blocks stored from now on follow.
      std::lock_guard lk(sub_mu_);
      sub->lines.push_back(event_line(KvEvent{KvEvent::Kind::kCleared, {}, std::nullopt}));
      subs_.push_back(sub);
    }
    r.set_header("Cache-Control", "no-cache");
    r.set_chunked_content_provider(
        "text/event-stream",
        [this, sub](size_t, httplib::DataSink& sink) {
          std::string out;
          {
            std::unique_lock lk(sub->mu);
            while (sub->lines.empty() && !sub->closed && !stopping_) {
              sub->cv.wait_for(lk, std::chrono::milliseconds(200));
              if (!sink.is_writable()) return false;
            }
            if (sub->closed || stopping_) return false;
            while (!sub->lines.empty()) {
              out += sub->lines.front();
              sub->lines.pop_front();
            }
          }
          return sink.write(out.data(), out.size());
        },
        [this, sub](bool) {
          std::lock_guard lk(sub_mu_);
          subs_.remove(sub);
        });
  }

  Options opt_;
  LiveEngine engine_;
  std::unique_ptr<ReplyScript> script_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0}, errors_{0}, cancelled_{0};
  std::atomic<uint64_t> api_seq_{0}, faults_failed_{0}, faults_stalled_{0};
  std::mutex sub_mu_;
  std::list<std::shared_ptr<Subscriber>> subs_;
  uint64_t next_event_id_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Mock OpenAI-compatible inference engine with a KV cache and timing model", "dyn-mocker"};
  Options o;
  app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--port-file", o.port_file, "Write the bound port to FILE once listening")->type_name("FILE");
  app.add_option("--model", o.model, "Model name served and reported")->capture_default_str();
  app.add_option("--worker-id", o.worker_id, "Worker id in metrics, KV events and the x-dyn-worker header")->capture_default_str();
  dyn::cmd::add_engine_flags(app, o.engine);
  app.add_flag("--kv-events", o.kv_events, "Publish KV cache events at GET /v1/kv_events (SSE)");
  app.add_option("--replies", o.replies,
                 "JSONL of scripted replies: {\"text\"} or {\"tool_call\": {\"name\", \"arguments\"}}, optional conditions \"match\", \"offered\", \"first_turn\", \"after_tool\"")
      ->type_name("FILE")->check(CLI::ExistingFile);
  app.add_option("--default-max-tokens", o.default_max_tokens,
                 "Output tokens when a request sets no limit")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "HTTP worker threads (one per concurrent stream)")
      ->capture_default_str()->check(CLI::Range(4, 65536));
  const char* fg = "Fault injection";
  app.add_option("--fault-after", o.fault_after,
                 "Serve this many API requests normally before any injected fault")
      ->capture_default_str()->group(fg);
  app.add_option("--fail-first", o.fail_first,
                 "Answer the first N API requests (after --fault-after) with --fail-status, then recover")
      ->capture_default_str()->group(fg);
  app.add_option("--fail-status", o.fail_status, "HTTP status of injected failures")
      ->capture_default_str()->check(CLI::Range(400, 599))->group(fg);
  app.add_option("--stall-before-headers-ms", o.stall_ms,
                 "Hold API requests (after the failures) this long before sending response headers")
      ->capture_default_str()->check(CLI::Range(0.0, 3.6e6))->group(fg);
  app.add_option("--stall-count", o.stall_count, "Stall only this many requests (0 = every one)")
      ->capture_default_str()->group(fg);
  return dyn::cli::run_tool(argc, argv, app, [&] {
    o.engine.kv_events = o.kv_events;
    if (auto err = o.engine.validate(); !err.empty()) throw dyn::Fatal(dyn::kExitUsage, err);
    Mocker m(o);
    m.load_replies();
    return m.serve();
  });
}
