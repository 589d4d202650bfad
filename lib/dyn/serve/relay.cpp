// The relay: each API request through its stages to a worker and back, then its end counted and
// traced.
#include "dyn/serve/relay.h"
#include "dyn/serve/tool_events.h"

#include <chrono>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>

#include "dyn/tokens/hash.h"

namespace dyn::serve {

Relay::Relay(const FrontendOptions& opt, const Clock& clock, http::EventLoop& loop, Fleet& fleet, Placer* placer,
             const kvevents::Adapters* adapters, RequestTrace& trace)
    : opt_(opt),
      clock_(clock),
      loop_(loop),
      fleet_(fleet),
      placer_(placer),
      queue_(placer ? &placer->queue() : nullptr),
      adapters_(adapters),
      trace_(trace),
      decisions_(placer ? opt.decision_log_rate : std::nullopt, opt.router.block_size, trace) {
  if (!opt_.tokenizer_url.empty())
    tokenizer_ = std::make_unique<EngineTokenizer>(opt_.tokenizer_url, clock_, stats_.tokenizer_errors);
  if (placer && opt_.kv_policy.any())
    kv_ =
        std::make_unique<KvPolicyRunner>(opt_.kv_policy, fleet, clock, opt_.router.block_size, opt_.health_timeout_ms);
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
  // Without a tokenizer the prompt is hashed as it is rendered, where simdjson read it.
  PromptHashing hashing{opt_.trace_block_size, nullptr};
  if (adapters_) hashing.seed = [a = adapters_](std::string_view model) { return a->seed_for(model); };
  const bool tokenize = !opt_.tokenizer_url.empty();
  auto body = read_body(*ex, req->body, tokenize, tokenize ? nullptr : &hashing);
  if (!body) {
    reject(ex, *res, body.error().exit_code, "invalid_request_error", body.error().message);
    return done();
  }
  ex->body_hints = body->hints;
  build_upstream(*ex, *body, req, *d);
  // What the stream sends is kept only where it may have to continue elsewhere.
  if (placer_ && opt_.migration_limit > 0 && ex->stream && migrates(api)) ex->log = std::make_unique<StreamLog>();
  auto rest = [this, ex, req, res, d, done, body = std::make_shared<Body>(std::move(*body))] {
    const uint64_t seed = adapters_ ? adapters_->seed_for(ex->model) : tokens::kHashSeed;
    hash_prompt(*ex, *body, tokenizer_.get(), opt_.trace_block_size, seed);
    if (client_left(ex, *res, "while its prompt was tokenized")) return done();
    if (placer_) {
      resolve_priority(*ex, *d);
      forward_priority(*body, ex->priority.priority, opt_.worker_priority, *d);
    }
    admit_then_dispatch(ex, req, res, d, done);
  };
  if (!opt_.tokenizer_url.empty() || (placer_ && placer_->uses_store())) return loop_.handlers().post(std::move(rest));
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
  const size_t n = stats_.in_flight.fetch_add(1) + 1;
  if (draining_.load()) {
    res.set_header("Connection", "close");
    reject(ex, res, 503, "service_unavailable", "the router is shutting down");
    return false;
  }
  // Capture mode has no router queue: a request over the cap is refused at once, as SGLang's
  // router does with no queue (serve mode queues it, SPEC 3.4).
  if (!queue_ && opt_.max_concurrent_requests && n > opt_.max_concurrent_requests) {
    res.set_header("Retry-After", "1");
    reject(ex, res, 429, "rate_limit_error",
           fmt::format("too many concurrent requests (limit {}, --max-concurrent-requests)",
                       opt_.max_concurrent_requests));
    return false;
  }
  return true;
}

void Relay::resolve_priority(Exchange& ex, const Dispatch& d) {
  static const std::string kNone;
  const std::string& session = ex.ctx ? ex.ctx->session_id : kNone;
  const std::string& parent = ex.ctx ? ex.ctx->parent_session_id : kNone;
  const bool final_turn = ex.ctx && ex.ctx->session_final.value_or(false);
  ex.priority = queue_->resolver().resolve(d.header_hints, ex.body_hints, session, parent, final_turn);
  if (ex.ctx && ex.priority.source != route::PrioritySource::kDefault) {
    ex.ctx->priority = ex.priority.priority;
    ex.ctx->strict_priority = ex.priority.strict_priority;
  }
}

void Relay::admit_then_dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                                std::shared_ptr<const Dispatch> d, Done done) {
  if (tools_ && ex->ctx && !ex->ctx->session_id.empty()) tools_->on_request(ex->ctx->session_id);
  if (placer_ && placer_->admits() && ex->ctx) {
    Placer::Admitted a = placer_->admit(*ex->ctx, ex->input_length, ex->lease);
    ex->pause_ms = 0;
    if (!a.admitted) {
      ex->queued = true;
      return wait_in_queue(*ex, queue_->defer(a.ticket, queued_request(ex, req, res, d, done)));
    }
    ex->admitted_worker = a.worker;
  }
  dispatch(ex, req, res, d, done);
}

QueuedRequest Relay::queued_request(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res,
                                    std::shared_ptr<const Dispatch> d, Done done) {
  QueuedRequest q;
  q.item.class_index = ex->priority.class_index;
  q.item.priority = ex->priority.priority;
  q.item.strict_priority = ex->priority.strict_priority;
  q.item.arrival_ms = ex->start_ms;
  if (ex->ctx) q.item.session = ex->ctx->session_id;
  q.sequence_hashes = std::span<const uint64_t>(ex->sequence_hashes.data(), ex->input_length / opt_.trace_block_size);
  q.tokens = ex->input_length;
  // Under the queue's lock, on whatever thread pumps it: never blocks.
  q.place = [this, ex, d](int admitted) {
    PlaceOutcome o;
    if (admitted >= 0) ex->admitted_worker = placer_->live_worker(admitted);
    if (placer_->uses_store()) {
      o.kind = PlaceOutcome::Kind::kBlocking;
      return o;
    }
    auto placed = place(*ex, *d, /*may_wait=*/false, /*refuse_busy=*/true, &o.worker);
    if (placed) {
      ex->lease.placement.emplace(std::move(*placed));
      return o;
    }
    switch (placed.error().exit_code) {
      case route::kPlaceWouldWait: o.kind = PlaceOutcome::Kind::kBlocking; break;
      case route::kPlaceAllBusy: o.kind = PlaceOutcome::Kind::kAllBusy; break;
      case route::kPlacePinnedBusy: o.kind = PlaceOutcome::Kind::kPinnedBusy; break;
      default:
        o.kind = PlaceOutcome::Kind::kFailed;
        std::tie(o.status, o.type) = placement_error(placed.error());
        o.message = placed.error().message;
    }
    return o;
  };
  q.resume = [this, ex, req, res, d, done](QueueVerdict v) {
    ex->queued = true;
    if (v.depth && !ex->queue_depth) ex->queue_depth = v.depth;
    ex->router_queue_ms = ex->router_queue_ms.value_or(0) + v.waited_ms;
    if (v.paused_ms > 0) ex->pause_ms = v.paused_ms;
    if (v.kind == QueueVerdict::Kind::kCancelled) {
      // Admission dropped its ticket: its turn never started, so its end is no failed turn.
      if (v.admission_withdrawn) ex->lease.admission_program.clear();
      if (client_left(ex, *res, v.message.c_str())) return done();
    }
    if (v.kind == QueueVerdict::Kind::kReject) {
      reject_held(ex, *res, v);
      return done();
    }
    ex->dispatch_slot = queue_;
    dispatch(ex, req, res, d, done);
  };
  return q;
}

bool Relay::passed_queue(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const Entered& e) {
  if (e.go) {
    ex->dispatch_slot = queue_;
    return true;
  }
  if (e.queued) {
    wait_in_queue(*ex, e.id);  // its resume sets what the row says of its wait
    return false;
  }
  reject_held(ex, res, e.rejected);
  return false;
}

void Relay::dispatch(const std::shared_ptr<Exchange>& ex, ReqPtr req, ResPtr res, DispatchPtr d, Done done) {
  if (client_left(ex, *res, "before its request was sent")) return done();
  const bool on_loop = loop_.in_loop_thread();
  auto on_pool = [&] { loop_.handlers().post([=, this] { dispatch(ex, req, res, d, done); }); };
  if (on_loop && placer_ && placer_->uses_store()) return on_pool();  // the store is a Redis round trip
  // The router queue (SPEC 3.4): a first attempt takes a slot, or waits its turn; a retry keeps
  // the slot it holds.
  const bool gated = queue_ && ex->failed.empty() && queue_->active();
  if (gated && !ex->dispatch_slot && !ex->lease.placement) {
    Entered e = queue_->enter(queued_request(ex, req, res, d, done));
    if (!passed_queue(ex, *res, e)) return e.queued ? void() : done();
  }
  if (placer_ && !ex->lease.placement) {
    uint64_t busy = 0;
    auto placed = place(*ex, *d, !on_loop, gated && ex->dispatch_slot != nullptr, &busy);
    if (!placed) {
      const int code = placed.error().exit_code;
      if (code == route::kPlaceWouldWait) return on_pool();
      if (code == route::kPlaceCancelled && client_left(ex, *res, "while its session's binding initialized"))
        return done();
      if (code == route::kPlaceAllBusy || code == route::kPlacePinnedBusy) {
        // Its workers filled since it took its slot: it gives the slot back and waits.
        ex->dispatch_slot = nullptr;
        const bool pinned = code == route::kPlacePinnedBusy;
        Entered e = queue_->enter(queued_request(ex, req, res, d, done),
                                  pinned ? HoldReason::kPinnedBusy : HoldReason::kAllBusy,
                                  pinned ? std::optional<uint64_t>(busy) : std::nullopt);
        if (!passed_queue(ex, *res, e)) return e.queued ? void() : done();
        return dispatch(ex, req, res, d, done);
      }
      auto [status, type] = placement_error(placed.error());
      reject(ex, *res, status, type, placed.error().message);
      return done();
    }
    ex->lease.placement.emplace(std::move(*placed));
  }
  const size_t worker = take_worker(*ex);
  ex->tap = std::make_shared<ResponseTap>(ex->api, d->hide_usage);
  if (ex->log) {
    *ex->log = StreamLog{};  // a retry starts over: the client has nothing yet
    ex->tap->set_log(ex->log.get());
  }
  auto call = http::ProxyCall::start(
      fleet_.at(worker).pool,
      kv_ ? kv_->request_for(*ex, worker, ex->lease.placement->cached_tokens(), d->request) : d->request, ex->tap,
      clock_, req->executor);
  track_call(*ex, call);
  call->start_async([this, ex, req, res, d, done, call](bool ok) {
    if (!ok && client_left(ex, *res, "before the response headers")) return done();
    Failure f;
    if (!ok) {
      f = Failure{call->timed_out() ? "timeout" : "connection", 0, call->error()};
    } else if (const int st = call->status(); st == 429 || st == 502 || st == 503 || st == 504) {
      f = Failure{"http", st, "HTTP " + std::to_string(st)};
    } else {
      return relay_response(ex, call, req, res, d, done);
    }
    if (may_retry(*ex, *d, f, *call)) return retry_later(ex, *call, f, req, res, d, done);
    // The failure is the client's answer: a worker's own response is relayed as it came.
    if (placer_ && f.status != 429) stats_.retries_exhausted++;
    if (ok) return relay_response(ex, call, req, res, d, done);
    no_response(ex, *call, *res);
    done();
  });
}

Expected<route::Placement> Relay::place(const Exchange& ex, const Dispatch& d, bool may_wait, bool refuse_busy,
                                        uint64_t* busy) {
  route::RouteRequest rr;
  if (ex.ctx) {
    rr.session_id = ex.ctx->session_id;
    rr.parent_session_id = ex.ctx->parent_session_id;
  }
  size_t complete = ex.input_length / opt_.trace_block_size;
  rr.sequence_hashes = std::span<const uint64_t>(ex.sequence_hashes.data(), complete);
  rr.tokens = ex.input_length;
  rr.worker = d.pinned_worker;
  if (!rr.worker && ex.failed.empty()) {
    rr.worker = ex.admitted_worker;  // a retry lets the router choose
    rr.worker_from_admission = rr.worker.has_value();
  }
  rr.explain = decisions_.wants(ex);
  rr.retry = ex.advice;
  rr.avoid_workers = ex.avoid;
  rr.fail_instead_of_waiting = !may_wait;
  rr.cancelled = &ex.client_gone;
  rr.refuse_busy = refuse_busy;
  rr.busy_worker = busy;
  return placer_->place(rr);
}

std::pair<int, std::string> Relay::placement_error(const Error& e) const {
  const int status = http_status(e);
  if (status == 503 && !placer_->router().availability().any_usable()) return {503, "no_compatible_worker"};
  return {status, http::error_type_for_status(status)};
}

size_t Relay::take_worker(Exchange& ex) {
  size_t worker = 0;
  if (placer_) {
    const route::Placement& pl = *ex.lease.placement;
    worker = pl.worker();
    ex.binding = route::binding_name(pl.binding());
    ex.rebind_reason = route::rebind_reason_name(pl.rebind_reason());
    decisions_.placed(ex, pl);
    if (queue_->uses_las() && ex.ctx) queue_->record_service(ex.ctx->session_id, ex.input_length - pl.cached_tokens());
  }
  ex.worker = static_cast<int>(worker);
  WorkerCounters& wc = fleet_.at(worker).counters;
  wc.requests++;
  // In flight from dispatch, not from the response headers: a request waiting for a stalled
  // worker's headers is that worker's load (placement already counts it; case 32), and the
  // gauge must show it. Every path after this ends it exactly once.
  wc.in_flight++;
  return worker;
}

bool Relay::may_retry(const Exchange& ex, const Dispatch& d, const Failure& f, const http::ProxyCall& call) const {
  if (!placer_ || d.pinned_worker) return false;
  if (f.type == "timeout") {
    // The worker took the request and may be running it: resent only as a migration (SPEC 2.3).
    if (ex.migrations >= opt_.migration_limit) return false;
  } else if (!opt_.retry.enabled || ex.retries >= opt_.retry.max_retries) {
    return false;
  }
  if (f.status == 429) {
    // Overload is a reason to go elsewhere only when the worker says when to come back, and
    // never for a session hard-bound there (Dynamo's PinnedWorkerOverloaded: no reroute).
    if (call.headers().find("Retry-After") == call.headers().end()) return false;
    const auto& p = ex.lease.placement;
    if (p && p->binding() == route::BindingOutcome::kHit && opt_.router.affinity_mode == route::AffinityMode::kHard)
      return false;
  }
  std::vector<uint64_t> avoid = ex.avoid;
  avoid.push_back(static_cast<uint64_t>(ex.worker));
  return placer_->any_eligible(avoid);
}

void Relay::account_failure(Exchange& ex, const char* stage, const Failure& f, bool mark_down) {
  const size_t w = static_cast<size_t>(ex.worker);
  WorkerCounters& wc = fleet_.at(w).counters;
  wc.in_flight--;
  wc.errors++;
  if (mark_down) fleet_.set_health(w, false, "a request failed (" + f.type + "): " + f.message);
  if (f.status != 429) fleet_.record_outcome(w, false);  // overload is not a broken worker
  ex.failed.push_back(FailedAttempt{ex.worker, stage, f.type, f.status, circuit_name(fleet_.at(w).breaker.state()),
                                    ex.log ? ex.log->tokens : 0});
}

void Relay::retry_later(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, const Failure& f, ReqPtr req,
                        ResPtr res, DispatchPtr d, Done done) {
  call.cancel();
  account_failure(*ex, "dispatch", f, /*mark_down=*/f.type != "http");
  fleet_.at(ex->worker).counters.retried++;
  if (auto& p = ex->lease.placement) {
    route::RetryAdvice a = p->fail(/*client_cancelled=*/f.status == 429);  // a 429 keeps the binding
    p.reset();
    if (a.retry) ex->advice = a;
  }
  ex->avoid.push_back(static_cast<uint64_t>(ex->worker));
  if (f.type == "timeout") {
    ex->migrations++;
    stats_.migrations++;
  } else {
    ex->retries++;
    stats_.retries++;
  }
  // SGLang's backoff: the k-th retry waits min(initial * multiplier^k, max) * (1 +- jitter).
  const RetryOptions& o = opt_.retry;
  const unsigned k = ex->retries + ex->migrations - 1;
  double ms = std::min(o.initial_backoff_ms * std::pow(o.multiplier, static_cast<double>(k)), o.max_backoff_ms);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  ms *= 1.0 + o.jitter * std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
  auto timer = std::make_shared<boost::asio::steady_timer>(req->executor ? req->executor : loop_.next_executor(),
                                                           std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
  timer->async_wait(
      [this, timer, ex, req, res, d, done](const boost::system::error_code&) { dispatch(ex, req, res, d, done); });
}

void Relay::no_response(const std::shared_ptr<Exchange>& ex, http::ProxyCall& call, http::ServerResponse& res) {
  const size_t worker = static_cast<size_t>(ex->worker);
  std::string err = call.error();
  bool timed_out = call.timed_out();
  call.cancel();
  WorkerCounters& wc = fleet_.at(worker).counters;
  wc.in_flight--;
  wc.errors++;
  if (placer_) {
    fleet_.set_health(worker, false, (timed_out ? "a request timed out before headers: " : "a request failed: ") + err);
    fleet_.record_outcome(worker, false);
    ex->lease.placement->fail(false);
    ex->lease.placement.reset();
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
    return;
  }
  http::set_error(res, 502, "connection", "worker " + std::to_string(worker) + " unreachable: " + err);
  finish(ex, &o, 502, "connection", "worker unreachable: " + err);
}

void Relay::relay_response(const std::shared_ptr<Exchange>& ex, const std::shared_ptr<http::ProxyCall>& call,
                           ReqPtr req, ResPtr res, DispatchPtr d, Done done) {
  int status = call->status();
  if (auto& placement = ex->lease.placement) {
    if (status >= 200 && status < 300) {
      placement->commit();
      auto* pl = &*placement;
      // Prefill done: a worker over its prefill threshold may take a queued request now.
      ex->tap->set_on_first_token([pl, q = queue_] {
        pl->first_token();
        if (q) q->pump_if_waiting();
      });
    } else {
      // The worker answered with an error: a 5xx is a failed dispatch (hard mode invalidates
      // the binding); a 4xx is about the request, so the binding is left alone.
      placement->fail(status < 500);
      placement.reset();
    }
  }
  if (ex->log && status >= 200 && status < 300 && call->is_event_stream()) watch_for_cut(*call, ex, req, d);
  std::vector<std::pair<std::string, std::string>> extra;
  if (placer_) extra.emplace_back("x-dyn-worker", std::to_string(ex->worker));
  call->relay(
      *res, extra, [this, ex](const http::ProxyOutcome& o) { relayed(ex, o); }, std::move(done));
}

void Relay::relayed(const std::shared_ptr<Exchange>& ex, http::ProxyOutcome o) {
  // A client that hangs up once the API's end event reached it (Codex closes its connection on
  // response.completed) has the whole answer: not a cancellation.
  if (o.kind == http::ProxyOutcome::Kind::kCancelled && ex->tap->facts().terminal_event)
    o.kind = http::ProxyOutcome::Kind::kOk;
  if (o.kind == http::ProxyOutcome::Kind::kStreamCut && placer_)
    fleet_.set_health(ex->worker, false, "a stream was cut: " + o.message);
  auto [type, msg] = response_error(*ex, o);
  finish(ex, &o, o.status, type, msg);
}

void Relay::track_call(Exchange& ex, const std::shared_ptr<http::ProxyCall>& call) {
  std::lock_guard<std::mutex> lk(ex.call_mu);
  ex.call = call;
  if (ex.client_gone) call->cancel_for_client();  // the attempt then ends without sending
}

void Relay::wait_in_queue(Exchange& ex, uint64_t item) {
  if (!item) return;  // answered at once (shutdown)
  ex.queue_item = item;
  // A hang-up seen before the store found no item to cancel: this thread cancels it.
  if (ex.client_gone) queue_->cancel(item);
}

void Relay::watch_client(const std::shared_ptr<Exchange>& ex, const http::ServerRequest& req) {
  if (!req.client) return;
  req.client->on_gone([this, w = std::weak_ptr<Exchange>(ex)] {
    const auto ex = w.lock();
    if (!ex) return;  // its row is written
    std::shared_ptr<http::ProxyCall> call;
    {
      std::lock_guard<std::mutex> lk(ex->call_mu);
      ex->client_gone = true;
      call = ex->call.lock();
    }
    if (call) call->cancel_for_client();
    // A request waiting for its turn leaves the router queue, and one waiting for its session's
    // first dispatch wakes (Router::place sees client_gone).
    if (const uint64_t item = ex->queue_item) queue_->cancel(item);
    if (placer_) placer_->router().wake_waiters();
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
                   const std::string& msg, const std::string& trace_type) {
  stats_.rejected++;
  http::set_error(res, status, type, msg);
  finish(ex, nullptr, status, trace_type, msg);
}

void Relay::reject_held(const std::shared_ptr<Exchange>& ex, http::ServerResponse& res, const QueueVerdict& v) {
  if (v.status == 429 || v.status == 503) res.set_header("Retry-After", "1");
  reject(ex, res, v.status, v.type, v.message, v.type);
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
    ex->end_dispatch();  // its worker's load is gone: a queued request may take its place
    if (end.session_final) queue_->forget_session(ex->ctx->session_id);
  }
  count_end(*ex, out, err_type);
  if (kv_) kv_->on_end(*ex, ex->tap ? &ex->tap->facts() : nullptr, err_type.empty());
  decisions_.ended(*ex, ex->tap ? &ex->tap->facts() : nullptr);
  if (tools_ && ex->ctx && !ex->ctx->session_id.empty()) {
    std::vector<std::string> calls;
    if (ex->tap)
      for (const ToolCall& c : ex->tap->facts().tool_calls)
        if (!c.id.empty()) calls.push_back(c.id);
    tools_->on_response(ex->ctx->session_id, ex->request_id, calls);
  }
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
    // The circuit hears how the dispatch ended: a 5xx or a cut stream is a failure, a response
    // relayed whole a success; a 4xx, a 429 and a client that left say nothing about the worker.
    if (placer_ && out->kind != http::ProxyOutcome::Kind::kTransport &&
        out->kind != http::ProxyOutcome::Kind::kCancelled && out->status != 429) {
      if (out->kind == http::ProxyOutcome::Kind::kStreamCut || out->status >= 500)
        fleet_.record_outcome(ex.worker, false);
      else if (out->kind == http::ProxyOutcome::Kind::kOk && out->status < 400 && err_type.empty())
        fleet_.record_outcome(ex.worker, true);
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
  preq.body = std::make_shared<const std::string>(req.body);
  auto call = http::ProxyCall::start(fleet_.at(worker).pool, std::move(preq), nullptr, clock_);
  if (!call->wait_response()) {
    http::set_error(res, 502, "connection", "upstream unreachable: " + call->error());
    return;
  }
  call->relay_blocking(res, {}, nullptr);
}

}  // namespace dyn::serve
