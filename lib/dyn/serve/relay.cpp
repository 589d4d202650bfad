// The relay: each API request through its stages to a worker and back, then its end counted and
// traced.
#include "dyn/serve/relay.h"

#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dyn/tokens/hash.h"

namespace dyn::serve {

Relay::Relay(const FrontendOptions& opt, const Clock& clock, http::EventLoop& loop, Fleet& fleet, Placer* placer,
             const kvevents::Adapters* adapters, RequestTrace& trace)
    : opt_(opt), clock_(clock), loop_(loop), fleet_(fleet), placer_(placer), adapters_(adapters), trace_(trace) {
  if (!opt_.tokenizer_url.empty())
    tokenizer_ = std::make_unique<EngineTokenizer>(opt_.tokenizer_url, clock_, stats_.tokenizer_errors);
  std::random_device rd;
  id_prefix_ = fmt::format("{:08x}", rd());
}

void Relay::handle_api(Api api, ReqPtr req, ResPtr res, Done done) {
  std::shared_ptr<Exchange> ex = open_exchange(api);
  auto d = std::make_shared<Dispatch>();
  if (auto e = read_identity(*ex, *req, opt_.session, *d)) {
    reject(ex, *res, e->exit_code, "invalid_request_error", e->message);
    return done();
  }
  if (!take_slot(ex, *res)) return done();
  watch_client(ex, *req);
  auto body = read_body(*ex, req->body, !opt_.tokenizer_url.empty());
  if (!body) {
    reject(ex, *res, body.error().exit_code, "invalid_request_error", body.error().message);
    return done();
  }
  build_upstream(*ex, *body, *req, *d);
  auto rest = [this, ex, req, res, d, done, body = std::make_shared<Body>(std::move(*body))] {
    const uint64_t seed = adapters_ ? adapters_->seed_for(ex->model) : tokens::kHashSeed;
    hash_prompt(*ex, *body, tokenizer_.get(), opt_.trace_block_size, seed);
    if (client_left(ex, *res, "while its prompt was tokenized")) return done();
    if (!admit(ex, *res, *d)) return done();
    dispatch(ex, req, res, d, 0, std::nullopt, done);
  };
  if (!opt_.tokenizer_url.empty() || (placer_ && (placer_->admits() || placer_->uses_store())))
    return loop_.handlers().post(std::move(rest));
  rest();
}

std::shared_ptr<Exchange> Relay::open_exchange(Api api) {
  auto ex = std::make_shared<Exchange>();
  ex->api = api;
  ex->start_ms = clock_.now_ms();
  ex->received_unix_ms = clock_.unix_ms();
  ex->request_id = fmt::format("{}-{:06}", id_prefix_, seq_.fetch_add(1) + 1);
  stats_.requests++;
  return ex;
}

bool Relay::take_slot(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res) {
  ex->slot = &stats_.in_flight;
  size_t n = stats_.in_flight.fetch_add(1) + 1;
  if (draining_.load()) {
    res.set_header("Connection", "close");
    reject(ex, res, 503, "service_unavailable", "the router is shutting down");
    return false;
  }
  if (opt_.max_concurrent_requests && n > opt_.max_concurrent_requests) {
    res.set_header("Retry-After", "1");
    reject(ex, res, 429, "rate_limit_error",
           fmt::format("too many concurrent requests (limit {}, --max-concurrent-requests)",
                       opt_.max_concurrent_requests));
    return false;
  }
  return true;
}

bool Relay::admit(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, Dispatch& d) {
  if (!placer_ || !placer_->admits() || !ex->ctx) return true;
  Placer::Admitted a = placer_->admit(*ex->ctx, ex->input_length, ex->lease);
  ex->pause_ms = a.pause_ms;
  if (!a.admitted) {
    reject(ex, res, 503, "service_unavailable", "the router is shutting down");
    return false;
  }
  d.admitted_worker = a.worker;
  return true;
}

void Relay::dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, std::shared_ptr<const Dispatch> d,
                     int attempt, std::optional<route::RetryAdvice> retry, Done done) {
  if (client_left(ex, *res, "before its request was sent")) return done();
  const bool on_loop = loop_.in_loop_thread();
  auto on_pool = [&] { loop_.handlers().post([=, this] { dispatch(ex, req, res, d, attempt, retry, done); }); };
  if (on_loop && placer_ && placer_->uses_store()) return on_pool();  // the store is a Redis round trip
  bool would_wait = false;
  std::optional<size_t> worker = lease_worker(ex, *res, *d, attempt, retry, !on_loop, &would_wait);
  if (would_wait) return on_pool();
  if (!worker) return done();
  ex->tap = std::make_shared<ResponseTap>(ex->api, d->hide_usage);
  auto call = http::ProxyCall::start(fleet_.at(*worker).pool, d->request, ex->tap, clock_, req->executor);
  {
    std::lock_guard<std::mutex> lk(ex->call_mu);
    ex->call = call;
    if (ex->client_gone) call->cancel_for_client();  // the attempt then ends without sending
  }
  call->start_async([this, ex, req, res, d, attempt, retry, done, call](bool ok) mutable {
    if (ok) return relay_response(ex, call, res, done);
    if (client_left(ex, *res, "before the response headers")) return done();
    if (no_response(ex, *call, *res, *d, attempt, retry)) return dispatch(ex, req, res, d, attempt + 1, retry, done);
    done();
  });
}

std::optional<size_t> Relay::lease_worker(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res,
                                          const Dispatch& d, int attempt,
                                          const std::optional<route::RetryAdvice>& retry, bool may_wait,
                                          bool* would_wait) {
  size_t worker = 0;
  if (placer_) {
    route::RouteRequest rr;
    if (ex->ctx) {
      rr.session_id = ex->ctx->session_id;
      rr.parent_session_id = ex->ctx->parent_session_id;
    }
    size_t complete = ex->input_length / opt_.trace_block_size;
    rr.sequence_hashes = std::span<const uint64_t>(ex->sequence_hashes.data(), complete);
    rr.tokens = ex->input_length;
    rr.worker = d.pinned_worker;
    if (!rr.worker && attempt == 0) rr.worker = d.admitted_worker;  // the retry lets the router choose
    rr.retry = retry;
    rr.fail_instead_of_waiting = !may_wait;
    auto placed = placer_->place(rr);
    if (!placed && placed.error().exit_code == route::kPlaceWouldWait) {
      *would_wait = true;
      return std::nullopt;
    }
    if (!placed) {
      int status = http_status(placed.error());
      reject(ex, res, status, http::error_type_for_status(status), placed.error().message);
      return std::nullopt;
    }
    ex->lease.placement.emplace(std::move(*placed));
    worker = ex->lease.placement->worker();
    ex->binding = route::binding_name(ex->lease.placement->binding());
    ex->rebind_reason = route::rebind_reason_name(ex->lease.placement->rebind_reason());
  }
  ex->worker = static_cast<int>(worker);
  WorkerCounters& wc = fleet_.at(worker).counters;
  wc.requests++;
  // In flight from dispatch, not from the response headers: a request waiting for a stalled
  // worker's headers is that worker's load (placement already counts it; case 32), and the
  // gauge must show it. Every path after this ends it exactly once.
  wc.in_flight++;
  return worker;
}

bool Relay::no_response(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, http::ServerResponse& res,
                        const Dispatch& d, int attempt, std::optional<route::RetryAdvice>& retry) {
  const size_t worker = static_cast<size_t>(ex->worker);
  std::string err = call.error();
  bool timed_out = call.timed_out();
  call.cancel();
  WorkerCounters& wc = fleet_.at(worker).counters;
  wc.in_flight--;
  wc.errors++;
  if (placer_) {
    fleet_.set_health(worker, false, (timed_out ? "a request timed out before headers: " : "a request failed: ") + err);
    route::RetryAdvice advice = ex->lease.placement->fail(false);
    ex->lease.placement.reset();
    // A worker that timed out before headers took the request and may still be running it, so
    // it is never resent: the client gets a clean 504 and hard mode rebinds the next turn
    // (SPEC 2.3).
    bool can_retry = !timed_out && attempt == 0 && !d.pinned_worker && fleet_.size() > 1;
    if (can_retry) {
      if (advice.retry) retry = advice;
      stats_.retries++;
      ex->worker = -1;  // its counters are settled; the next attempt leases its own
      return true;
    }
  }
  http::ProxyOutcome o;
  o.kind = http::ProxyOutcome::Kind::kTransport;
  o.message = err;
  o.end_ms = clock_.now_ms();
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

void Relay::relay_response(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<http::ProxyCall>& call,
                           ResPtr res, Done done) {
  int status = call->status();
  if (auto& placement = ex->lease.placement) {
    if (status >= 200 && status < 300) {
      placement->commit();
      auto* pl = &*placement;
      ex->tap->set_on_first_token([pl] { pl->first_token(); });
    } else {
      // The worker answered with an error: a 5xx is a failed dispatch (hard mode invalidates
      // the binding); a 4xx is about the request, so the binding is left alone.
      placement->fail(status < 500);
      placement.reset();
    }
  }
  std::vector<std::pair<std::string, std::string>> extra;
  if (placer_) extra.emplace_back("x-dyn-worker", std::to_string(ex->worker));
  call->relay(
      *res, extra,
      [this, ex](http::ProxyOutcome o) {
        // A client that hangs up once the API's end event reached it (Codex closes its
        // connection on response.completed) has the whole answer: not a cancellation.
        if (o.kind == http::ProxyOutcome::Kind::kCancelled && ex->tap->facts().terminal_event)
          o.kind = http::ProxyOutcome::Kind::kOk;
        if (o.kind == http::ProxyOutcome::Kind::kStreamCut && placer_)
          fleet_.set_health(ex->worker, false, "a stream was cut: " + o.message);
        auto [type, msg] = response_error(*ex, o);
        finish(ex, &o, o.status, type, msg);
      },
      std::move(done));
}

void Relay::watch_client(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req) {
  if (!req.client) return;
  req.client->on_gone([w = std::weak_ptr<Exchange>(ex)] {
    const auto ex = w.lock();
    if (!ex) return;  // its row is written
    std::shared_ptr<http::ProxyCall> call;
    {
      std::lock_guard<std::mutex> lk(ex->call_mu);
      ex->client_gone = true;
      call = ex->call.lock();
    }
    if (call) call->cancel_for_client();
  });
}

bool Relay::client_left(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const char* when) {
  if (!ex->client_gone) return false;
  http::ProxyOutcome o;
  o.kind = http::ProxyOutcome::Kind::kCancelled;
  o.message = std::string("client went away ") + when;
  o.end_ms = clock_.now_ms();
  http::set_error(res, 499, "cancelled", o.message);
  finish(ex, &o, 499, "cancelled", o.message);
  return true;
}

void Relay::reject(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, int status, const std::string& type,
                   const std::string& msg) {
  stats_.rejected++;
  http::set_error(res, status, type, msg);
  finish(ex, nullptr, status, "http", msg);
}

void Relay::finish(const std::shared_ptr<Exchange>& ex, const http::ProxyOutcome* out, int status,
                   const std::string& err_type, const std::string& err_msg) {
  if (placer_) {
    const ResponseFacts* f = ex->tap ? &ex->tap->facts() : nullptr;
    TurnEnd end;
    end.ok = err_type.empty() && f;
    end.input_tokens = f ? f->input_tokens.value_or(ex->input_length) : ex->input_length;
    end.output_tokens = f ? f->output_tokens.value_or(0) : 0;
    end.session_final = ex->ctx && ex->ctx->session_final.value_or(false);
    placer_->release(ex->lease, end);
  }
  count_end(*ex, out, err_type);
  if (trace_.on()) trace_.write_end(*ex, out, status, err_type, err_msg);
}

void Relay::count_end(const Exchange& ex, const http::ProxyOutcome* out, const std::string& err_type) {
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  if (ex.worker >= 0 && out) {
    WorkerCounters& wc = fleet_.at(ex.worker).counters;
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
    stats_.total.observe((out ? out->end_ms : clock_.now_ms()) - ex.start_ms);
    if (lat.ttft_ms) stats_.ttft.observe(*lat.ttft_ms);
  }
  if (lat.avg_itl_ms) stats_.itl.observe(*lat.avg_itl_ms);
}

void Relay::forward_plain(size_t worker, const http::ServerRequest& req, http::ServerResponse& res) {
  http::ProxyRequest preq;
  preq.method = req.method;
  preq.path = origin_form(req.target.empty() ? req.path : req.target);
  preq.headers = req.headers;
  preq.body = req.body;
  auto call = http::ProxyCall::start(fleet_.at(worker).pool, std::move(preq), nullptr, clock_);
  if (!call->wait_response()) {
    http::set_error(res, 502, "connection", "upstream unreachable: " + call->error());
    return;
  }
  call->relay_blocking(res, {}, nullptr);
}

}  // namespace dyn::serve
