// The mock engine's HTTP server: API handlers on the live engine (SPEC 8), KV event publishing,
// /tokenize, /health, /metrics and fault injection, on the shared server helpers (dyn/http).
#include "dyn/mocker/server.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <httplib.h>

#include "dyn/api/api.h"
#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/base/json_limits.h"
#include "dyn/engine/live.h"
#include "dyn/engine/mock_api.h"
#include "dyn/engine/tiers.h"
#include "dyn/http/prometheus.h"
#include "dyn/http/server.h"
#include "dyn/kvevents/pubsub.h"
#include "dyn/mocker/hints.h"
#include "dyn/session/normalize.h"
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"

namespace dyn::mocker {
namespace {

using namespace dyn::engine;

// Tokens of one request as the engine thread reports them.
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generated = 0;
  uint64_t cached = 0;
  uint64_t tier_tokens[3] = {};  // of `cached`: onboarded from G2, G3, G4 (SPEC 8.7)
  bool finished = false;
};

// Token ids of the prompt blocks of requests in the engine, keyed by sequence hash: a BlockStored
// event carries its blocks' tokens (vLLM's layout), and the engine's pool knows only hashes. A
// block is stored while a request holding it is prefilling, so counting holders suffices; a
// cancelled request's references are dropped only after the next publish, since its last step's
// events may still be on their way.
class BlockTokens {
 public:
  void hold(const MockRequest& r, uint32_t block_size) {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < r.block_hashes.size(); ++i) {
      auto& e = map_[r.block_hashes[i]];
      if (e.refs++ == 0) e.tokens.assign(r.tokens.begin() + i * block_size, r.tokens.begin() + (i + 1) * block_size);
    }
  }
  void release(const std::vector<uint64_t>& hashes) {
    std::lock_guard lk(mu_);
    for (uint64_t h : hashes) {
      auto it = map_.find(h);
      if (it != map_.end() && --it->second.refs == 0) map_.erase(it);
    }
  }
  void release_later(std::vector<uint64_t> hashes) {
    std::lock_guard lk(mu_);
    later_.push_back(std::move(hashes));
  }
  void release_deferred() {
    std::vector<std::vector<uint64_t>> l;
    {
      std::lock_guard lk(mu_);
      l.swap(later_);
    }
    for (auto& h : l) release(h);
  }
  /// One more holder of the known blocks among `hashes`: with KV tiers a block's tokens are kept
  /// while it is on any tier (a BlockStored on a lower tier comes after its request ended; the
  /// store before the upper tier's remove keeps it known).
  void retain(const std::vector<uint64_t>& hashes) {
    std::lock_guard lk(mu_);
    for (uint64_t h : hashes)
      if (auto it = map_.find(h); it != map_.end()) ++it->second.refs;
  }
  /// Appends the tokens of block `h`; false when unknown.
  bool append(uint64_t h, std::vector<uint32_t>& out) {
    std::lock_guard lk(mu_);
    auto it = map_.find(h);
    if (it == map_.end()) return false;
    out.insert(out.end(), it->second.tokens.begin(), it->second.tokens.end());
    return true;
  }

 private:
  struct Entry {
    std::vector<uint32_t> tokens;
    uint32_t refs = 0;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> map_;
  std::vector<std::vector<uint64_t>> later_;
};

class Mocker {
 public:
  Mocker(MockerOptions o, std::shared_ptr<EngineGroup> group)
      : opt_(std::move(o)), engine_(opt_.engine, std::move(group)) {}

  void load_replies() {
    if (opt_.replies.empty()) return;
    auto s = ReplyScript::load(opt_.replies);
    if (!s) throw Fatal(s.error().exit_code, s.error().message);
    script_ = std::make_unique<ReplyScript>(std::move(*s));
  }

  // Routes, the KV event publisher and the engine's thread; then bind() and listen(). Call once the
  // signal watcher runs: every thread must inherit the blocked stop signals.
  void start() {
    svr_.set_read_timeout(600, 0);
    svr_.set_write_timeout(600, 0);
    routes(svr_);
    if (!opt_.kv_events_endpoint.empty()) {
      publisher_ = std::make_unique<kvevents::Publisher>(kvevents::PublisherOptions{
          opt_.kv_events_endpoint, opt_.kv_events_replay_endpoint, "", 10'000, opt_.kv_events_layout});
      engine_.set_kv_listener([this](const std::vector<KvEvent>& ev) { publish(ev); });
      diag::note(
          fmt::format("worker {}: KV events on {}{}", opt_.worker_id, publisher_->endpoint(),
                      publisher_->replay_endpoint().empty() ? "" : ", replay on " + publisher_->replay_endpoint()));
    }
    // The engine runs before the port file appears, so a script that waits for the file can send
    // at once.
    engine_.start();
  }
  Expected<int> bind() { return http::bind_server(svr_, opt_.listen); }
  bool listen() { return svr_.listen_after_bind(); }
  // From the signal watcher or a listener that ended (the first call stops the server; open
  // streams end).
  void stop_server() {
    if (!stopping_.exchange(true)) svr_.stop();
  }
  // After the listener returned: stops the engine and sends what the last steps queued.
  void finish() {
    stopping_ = true;
    engine_.stop();
    publisher_.reset();
  }
  const MockerOptions& options() const { return opt_; }

 private:
  void routes(httplib::Server& svr) {
    for (const api::ApiInfo& i : api::kApis) {
      const Api a = i.api;
      svr.Post(i.path, [this, a](const httplib::Request& q, httplib::Response& r) { handle(a, q, r); });
    }
    svr.Post("/v1/messages/count_tokens", [this](const httplib::Request& q, httplib::Response& r) {
      if (json_too_deep(q.body))
        return send_error(r, Api::kMessages, 400, "JSON body nested too deeply", "invalid_request_error");
      Json body = Json::parse(q.body, nullptr, false);
      auto req = parse_mock_request(Api::kMessages, body, opt_.engine.block_size, 1);
      if (!req) return send_error(r, Api::kMessages, 400, req.error().message, "invalid_request_error");
      r.set_content(Json{{"input_tokens", req->prompt_tokens}}.dump(), "application/json");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      Json m = {{"id", opt_.model},         {"object", "model"}, {"created", 0},
                {"owned_by", "dyn-mocker"}, {"type", "model"},   {"display_name", opt_.model}};
      r.set_content(Json{{"object", "list"}, {"data", Json::array({m})}, {"has_more", false}}.dump(),
                    "application/json");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      // The worker metadata a router checks: its KV block size and where its events are.
      Json j{{"status", "ok"},
             {"model", opt_.model},
             {"worker_id", opt_.worker_id},
             {"kv_block_size", opt_.engine.block_size}};
      if (publisher_) {
        j["kv_events_endpoint"] = publisher_->endpoint();
        if (!publisher_->replay_endpoint().empty()) j["kv_events_replay_endpoint"] = publisher_->replay_endpoint();
      }
      r.set_content(j.dump(), "application/json");
    });
    // vLLM/SGLang-style tokenizer endpoint: {"prompt": text} or {"messages": [...], "tools"?}
    // -> {"count", "max_model_len", "tokens"}; the mocker's tokens are SPEC 4.2's 4-byte tokens of
    // the rendered request, the ids its KV events carry.
    svr.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) {
      if (json_too_deep(q.body))
        return send_error(r, Api::kChat, 400, "JSON body nested too deeply", "invalid_request_error");
      Json body = Json::parse(q.body, nullptr, false);
      if (!body.is_object() || (!body.contains("prompt") && !body.contains("messages")))
        return send_error(r, Api::kChat, 400, "tokenize needs a JSON object with \"prompt\" or \"messages\"",
                          "invalid_request_error");
      auto toks = tokens::text_to_tokens(tokens::render_request(body));
      r.set_content(Json{{"count", toks.size()}, {"max_model_len", 1u << 20}, {"tokens", toks}}.dump(),
                    "application/json");
    });
    // KV hints not tied to a request (SPEC 8.6): Dynamo's KvHint v0.1 envelope.
    svr.Post("/v1/kv_hints", [this](const httplib::Request& q, httplib::Response& r) { kv_hints(q, r); });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics(), "text/plain; version=0.0.4");
    });
    // Claude Code probes its base URL with HEAD / before the first request.
    svr.Get("/", [](const httplib::Request&, httplib::Response& r) { r.set_content("dyn-mocker\n", "text/plain"); });
  }

  // POST /v1/kv_hints: 200 with one outcome per action (an unknown action's row carries it back
  // untouched); 400 naming what is wrong with a malformed message.
  void kv_hints(const httplib::Request& q, httplib::Response& r) {
    Json body = json_too_deep(q.body) ? Json(nullptr) : Json::parse(q.body, nullptr, false);
    if (body.is_discarded() || body.is_null()) {
      ++hints_malformed_;
      return send_error(r, Api::kChat, 400, "KV hint: body is not valid JSON", "invalid_request_error");
    }
    auto h = parse_kv_hint(body);
    if (!h) {
      ++hints_malformed_;
      return send_error(r, Api::kChat, 400, h.error().message, "invalid_request_error");
    }
    const std::vector<HintResult> res = engine_.apply_hint(*h);
    Json rows = Json::array();
    for (size_t i = 0; i < res.size(); ++i) {
      Json row = to_json(res[i]);
      if (res[i].outcome == HintOutcome::kPassedThrough) row["action"] = body["actions"][i];
      rows.push_back(std::move(row));
    }
    r.set_content(
        Json{{"protocol_version", h->protocol_version}, {"message_id", h->message_id}, {"results", rows}}.dump(),
        "application/json");
  }

  void send_error(httplib::Response& r, Api api, int code, const std::string& msg, const std::string& type) {
    r.status = code;
    r.set_content(api::error_body(api, msg, type, code).dump(), "application/json");
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
      auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(opt_.stall_ms * 1000));
      while (!stopping_ && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void handle(Api api, const httplib::Request& q, httplib::Response& r) {
    const auto arrived = std::chrono::steady_clock::now();  // before parsing, tokenizing, hashing
    if (inject_fault(api, r)) return;
    if (json_too_deep(q.body)) return send_error(r, api, 400, "JSON body nested too deeply", "invalid_request_error");
    Json body = Json::parse(q.body, nullptr, false);
    if (body.is_discarded()) return send_error(r, api, 400, "request body is not valid JSON", "invalid_request_error");
    auto parsed = parse_mock_request(api, body, opt_.engine.block_size, opt_.default_max_tokens);
    if (!parsed) return send_error(r, api, 400, parsed.error().message, "invalid_request_error");
    auto hint = request_kv_hint(q.get_header_value(kRetentionTtlHeader), body);
    if (!hint) {
      ++hints_malformed_;
      return send_error(r, api, 400, hint.error().message, "invalid_request_error");
    }
    auto req = std::make_shared<MockRequest>(std::move(*parsed));
    if (req->model.empty()) req->model = opt_.model;
    std::optional<Reply> scripted;
    if (script_) scripted = script_->choose(*req);
    auto plan = std::make_shared<ReplyPlan>(plan_reply(*req, scripted));
    const uint64_t id = engine_.next_id();
    auto st = std::make_shared<StreamState>();
    RequestSpec spec{id, req->prompt_tokens, req->block_hashes, plan->tokens()};
    spec.priority = req->priority;
    spec.hint = std::move(*hint);
    // The session and its end as a router forwards them (SPEC 1: x-dynamo-session-final on the
    // last turn), for --kv-eviction session and KV hints; headers that do not normalize leave the
    // request without a session.
    if (auto ident = session::normalize(http::header_list(q.headers), opt_.session); ident && ident->context) {
      spec.session = session_tag(ident->context->session_id);
      spec.session_final = ident->context->session_final.value_or(false);
    }
    if (publisher_) block_tokens_.hold(*req, opt_.engine.block_size);
    auto ok = engine_.submit(
        std::move(spec),
        [this, st, req](const TokenOutput& o) {
          if (o.finished && publisher_) block_tokens_.release(req->block_hashes);
          {
            std::lock_guard lk(st->mu);
            st->generated = o.generated;
            st->cached = o.cached_tokens;
            st->tier_tokens[0] = o.g2_tokens;
            st->tier_tokens[1] = o.g3_tokens;
            st->tier_tokens[2] = o.g4_tokens;
            st->finished = o.finished;
          }
          st->cv.notify_all();
        },
        arrived);
    if (!ok) {
      if (publisher_) block_tokens_.release(req->block_hashes);
      return send_error(r, api, 400, ok.error().message, "invalid_request_error");
    }
    ++requests_;
    const uint64_t created = RealClock::instance().unix_ms() / 1000;
    auto writer = std::make_shared<ResponseWriter>(*req, *plan, id, created);
    r.set_header("x-dyn-worker", std::to_string(opt_.worker_id));
    if (!req->stream) {
      std::unique_lock lk(st->mu);
      st->cv.wait(lk, [&] { return st->finished || stopping_.load(); });
      if (!st->finished) {
        lk.unlock();
        cancel(id, req);
        return send_error(r, api, 503, "server is shutting down", "server_error");
      }
      if (opt_.engine.tiers.enabled())
        writer->set_tier_tokens(st->tier_tokens[0], st->tier_tokens[1], st->tier_tokens[2]);
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
            if (fin && opt_.engine.tiers.enabled())
              writer->set_tier_tokens(st->tier_tokens[0], st->tier_tokens[1], st->tier_tokens[2]);
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
        [this, id, req, done](bool) {
          if (!*done) {
            cancel(id, req);  // client went away or server stopping: free its KV blocks
            ++cancelled_;
          }
        });
  }

  // Drops a request from the engine. Its block tokens stay until the next publish: events of its
  // last step may not have been published yet. (A request that finished meanwhile released them
  // in its sink already; the engine then ignores the cancel and nothing is released twice.)
  void cancel(uint64_t id, const std::shared_ptr<MockRequest>& req) {
    if (engine_.cancel(id) && publisher_) block_tokens_.release_later(req->block_hashes);
  }

  std::string metrics() {
    EngineStats s = engine_.stats();
    const std::string lbl = fmt::format("worker_id=\"{}\",model=\"{}\"", opt_.worker_id, opt_.model);
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, double v) {
      const std::string full = std::string("dyn_mocker_") + name;
      http::prom_family(out, full, type, help);
      http::prom_sample(out, full, lbl, v);
    };
    metric("requests_total", "counter", "Requests accepted", static_cast<double>(requests_.load()));
    metric("requests_finished_total", "counter", "Requests completed", static_cast<double>(s.requests_finished));
    metric("requests_cancelled_total", "counter", "Requests dropped by their client",
           static_cast<double>(s.requests_cancelled));
    metric("request_errors_total", "counter", "Requests answered with an error status",
           static_cast<double>(errors_.load()));
    metric("prompt_tokens_total", "counter", "Prompt tokens of admitted requests",
           static_cast<double>(s.prompt_tokens));
    metric("cached_tokens_total", "counter", "Prompt tokens served from the prefix cache",
           static_cast<double>(s.cached_tokens));
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
    // vLLM's info gauge of its cache configuration (vllm/v1/metrics/loggers.py): its facts are
    // labels, the value is 1. A router reads num_gpu_blocks for its KV budget (SPEC 3.3).
    http::prom_family(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    http::prom_sample(
        out, "vllm:cache_config_info",
        fmt::format(R"(block_size="{}",enable_prefix_caching="{}",num_gpu_blocks="{}")", opt_.engine.block_size,
                    opt_.engine.enable_prefix_caching ? "True" : "False", opt_.engine.num_blocks),
        1);
    if (s.tiered) tier_metrics(out, s);
    kv_hint_metrics(out, lbl, s, hints_malformed_.load());
    metric("faults_failed_total", "counter", "Requests answered with an injected error (--fail-first)",
           static_cast<double>(faults_failed_.load()));
    metric("faults_stalled_total", "counter", "Requests stalled before their headers (--stall-before-headers-ms)",
           static_cast<double>(faults_stalled_.load()));
    return out;
  }

  // The KV tiers' gauges and counters (SPEC 8.7), one sample per tier (label tier="g1".."g4").
  void tier_metrics(std::string& out, const EngineStats& s) {
    const std::string lbl = fmt::format("worker_id=\"{}\",model=\"{}\"", opt_.worker_id, opt_.model);
    auto per_tier = [&](const char* name, const char* type, const char* help, auto value) {
      const std::string full = std::string("dyn_mocker_") + name;
      http::prom_family(out, full, type, help);
      for (int t = 1; t <= 4; ++t)
        http::prom_sample(out, full, fmt::format("{},tier=\"g{}\"", lbl, t), static_cast<double>(value(t)));
    };
    const TierStats& ts = s.tiers;
    per_tier("kv_tier_blocks_used", "gauge", "KV blocks held per tier (g4: the process's shared pool)",
             [&](int t) { return t == 1 ? s.active_blocks + s.cached_blocks : ts.used[t]; });
    per_tier("kv_tier_blocks_capacity", "gauge", "KV blocks per tier",
             [&](int t) { return t == 1 ? s.total_blocks : ts.capacity[t]; });
    per_tier("kv_tier_cached_tokens_total", "counter", "Prompt tokens served from the cache, by the tier they were on",
             [&](int t) {
               const uint64_t lower = s.g2_tokens + s.g3_tokens + s.g4_tokens;
               return t == 1 ? s.cached_tokens - lower : t == 2 ? s.g2_tokens : t == 3 ? s.g3_tokens : s.g4_tokens;
             });
    per_tier("kv_tier_onboarded_blocks_total", "counter", "KV blocks onboarded to G1, by the tier they came from",
             [&](int t) { return t == 1 ? 0 : ts.onboarded_blocks[t]; });
    auto metric = [&](const char* name, const char* help, double v) {
      const std::string full = std::string("dyn_mocker_") + name;
      http::prom_family(out, full, "counter", help);
      http::prom_sample(out, full, lbl, v);
    };
    metric("kv_offloaded_bytes_total", "Bytes copied G1 -> G2 (offload of evicted blocks)",
           static_cast<double>(ts.offloaded_bytes));
    metric("kv_onboarded_bytes_total", "Bytes copied G2 -> G1 (onboarding before prefill)",
           static_cast<double>(ts.onboarded_bytes));
  }

  // One engine step's KV events as one vLLM KVEventBatch (kvevents::encode_batch): block ids are
  // the engine's sequence hashes, token ids the blocks' prompt tokens.
  void publish(const std::vector<KvEvent>& events) {
    kvevents::EventBatch b;
    b.ts = static_cast<double>(RealClock::instance().unix_ms()) / 1000.0;
    // vLLM's publisher stamps every batch with its data-parallel rank since the map form (0 here:
    // one engine); the older array form had no such field.
    if (opt_.kv_events_layout == kvevents::Layout::kMaps) b.data_parallel_rank = 0;
    const bool tiered = opt_.engine.tiers.enabled();
    for (const KvEvent& e : events) {
      switch (e.kind) {
        case KvEvent::Kind::kStored: {
          kvevents::BlockStored s;
          s.block_hashes = e.block_hashes;
          s.parent_block_hash = e.parent_hash;
          s.block_size = opt_.engine.block_size;
          s.medium = std::string(tier_medium(e.tier));
          bool ok = true;
          for (uint64_t h : e.block_hashes) ok = ok && block_tokens_.append(h, s.token_ids);
          if (!ok) {
            diag::warning("KV events", "a stored block's tokens are unknown; its BlockStored is not published");
            continue;
          }
          if (tiered) block_tokens_.retain(e.block_hashes);
          b.events.emplace_back(std::move(s));
          break;
        }
        case KvEvent::Kind::kRemoved:
          b.events.emplace_back(kvevents::BlockRemoved{e.block_hashes, std::string(tier_medium(e.tier))});
          if (tiered) block_tokens_.release_later(e.block_hashes);
          break;
        case KvEvent::Kind::kCleared: b.events.emplace_back(kvevents::AllBlocksCleared{}); break;
      }
    }
    if (!b.events.empty()) publisher_->publish(b);
    block_tokens_.release_deferred();
  }

  const MockerOptions opt_;  // this engine's (engine_options)
  httplib::Server svr_;
  LiveEngine engine_;
  std::unique_ptr<ReplyScript> script_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0}, errors_{0}, cancelled_{0};
  std::atomic<uint64_t> api_seq_{0}, faults_failed_{0}, faults_stalled_{0}, hints_malformed_{0};
  std::unique_ptr<kvevents::Publisher> publisher_;
  BlockTokens block_tokens_;
};

// The options of engine `i` of a --num-workers process: worker id, HTTP port and KV event
// addresses counted on from the first engine's; the port file is the process's (serve). Throws
// Fatal (usage) for a KV event address the engines cannot each bind.
MockerOptions engine_options(const MockerOptions& o, int i) {
  MockerOptions e = o;
  e.worker_id = o.worker_id + i;
  if (o.listen.port != 0) e.listen.port = o.listen.port + i;
  e.listen.port_file.clear();
  for (auto [flag, from, to] :
       {std::tuple{"--kv-events-endpoint", &o.kv_events_endpoint, &e.kv_events_endpoint},
        std::tuple{"--kv-events-replay-endpoint", &o.kv_events_replay_endpoint, &e.kv_events_replay_endpoint}}) {
    if (from->empty()) continue;
    auto ep = engine_endpoint(*from, i);
    if (!ep) throw Fatal(kExitUsage, std::string(flag) + ": " + ep.error().message);
    *to = *ep;
  }
  return e;
}

// Serves until a stop signal or a listener ending on its own; returns the signal (0 = none) and
// whether every listener ended cleanly.
std::pair<int, bool> run_listeners(std::vector<std::unique_ptr<Mocker>>& ms, http::SignalWatcher& watcher) {
  auto stop_all = [&] {
    for (auto& m : ms) m->stop_server();
  };
  std::vector<char> ok(ms.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < ms.size(); ++i)
    threads.emplace_back([&, i] {
      ok[i] = ms[i]->listen();
      stop_all();  // one listener gone: the process stops (a supervisor restarts it whole)
    });
  ok[0] = ms[0]->listen();
  stop_all();
  for (auto& t : threads) t.join();
  watcher.stop();
  return {watcher.received(), std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; })};
}

}  // namespace

Expected<std::string> engine_endpoint(const std::string& endpoint, int index) {
  if (index == 0) return endpoint;
  const size_t colon = endpoint.rfind(':');
  const bool tcp = endpoint.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon > 5;
  const std::string port = tcp ? endpoint.substr(colon + 1) : "";
  if (port == "*") return endpoint;
  const bool digits = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), ::isdigit);
  if (!digits)
    return Error{
        "each engine binds its own KV event socket: with --num-workers > 1 the address must be "
        "tcp://HOST:PORT (engine i takes PORT + i) or tcp://HOST:* (each a free port), not " +
            endpoint,
        kExitUsage};
  const int p = std::stoi(port) + index;
  if (p > 65535)
    return Error{fmt::format("{}: engine {} would need port {} (past 65535)", endpoint, index, p), kExitUsage};
  return endpoint.substr(0, colon + 1) + std::to_string(p);
}

int serve(const MockerOptions& options) {
  MockerOptions base = options;
  std::shared_ptr<EngineGroup> group;
  if (base.engine.tiers.enabled() && base.engine.tiers.g4_blocks && base.num_workers > 1) {
    // One G4 pool for the process, as --sim gives every worker the same one (SPEC 8.7).
    base.engine.shared_g4 = std::make_shared<SharedTier>(base.engine.tiers);
    group = std::make_shared<EngineGroup>();
  }
  std::vector<std::unique_ptr<Mocker>> ms;
  if (options.listen.port != 0 && options.listen.port + base.num_workers - 1 > 65535)
    throw Fatal(kExitUsage,
                fmt::format("--port {} with --num-workers {} needs ports up to {} (past 65535)", options.listen.port,
                            base.num_workers, options.listen.port + base.num_workers - 1));
  for (int i = 0; i < std::max(1, base.num_workers); ++i) {
    ms.push_back(std::make_unique<Mocker>(engine_options(base, i), group));
    ms.back()->load_replies();
  }
  // First, before the engines' and ZMQ's threads start: every thread inherits the blocked stop
  // signals, and the watcher stops the servers from outside a signal handler (httplib's stop()
  // is not async-signal-safe).
  http::SignalWatcher watcher([&ms](int) {
    for (auto& m : ms) m->stop_server();
  });
  auto finish_all = [&] {
    for (auto& m : ms) m->finish();
  };
  std::vector<int> ports;
  for (auto& m : ms) {
    m->start();
    auto port = m->bind();
    if (!port) {
      finish_all();
      throw Fatal(port.error().exit_code, port.error().message);
    }
    ports.push_back(*port);
  }
  if (auto e = http::write_port_file(options.listen.port_file, ports)) {
    finish_all();
    throw Fatal(e->exit_code, e->message);
  }
  for (size_t i = 0; i < ms.size(); ++i)
    diag::note(fmt::format("listening on http://{}:{} (model {}, worker {})", options.listen.host, ports[i],
                           options.model, ms[i]->options().worker_id));
  const auto [sig, ok] = run_listeners(ms, watcher);
  finish_all();
  if (!ok && !sig) throw Fatal(kExitIo, "server stopped unexpectedly");
  diag::note("stopped");
  // The README's exit table: SIGINT is "interrupted" (130); SIGTERM is the normal stop (0).
  return sig == SIGINT ? kExitInterrupted : kExitOk;
}

}  // namespace dyn::mocker
