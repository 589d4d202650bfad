// The relay's request migration (--migration-limit, issue 53): a stream whose worker died or
// stalled continues on another worker, spliced into the client's one stream.
#include "dyn/serve/relay.h"

namespace dyn::serve {

/// The continuation of one exchange's stream, asked by its call's pump at a cut.
class Relay::Migrator final : public http::StreamContinuation {
 public:
  Migrator(Relay& relay, std::shared_ptr<Exchange> ex, ReqPtr req, DispatchPtr d)
      : relay_(relay), ex_(std::move(ex)), req_(std::move(req)), d_(std::move(d)) {}
  bool may_continue(const std::string& error) override {
    error_ = error;
    if (relay_.may_migrate(*ex_, *d_)) return true;
    relay_.stats_.migrations_failed++;
    return false;
  }
  void take(std::shared_ptr<http::BodyStream> out) override { relay_.migrate(ex_, req_, d_, std::move(out), error_); }

 private:
  Relay& relay_;
  std::shared_ptr<Exchange> ex_;
  ReqPtr req_;
  DispatchPtr d_;
  std::string error_;
};

void Relay::watch_for_cut(http::ProxyCall& call, const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d) {
  call.set_continuation(std::make_shared<Migrator>(*this, ex, std::move(req), std::move(d)));
}

bool Relay::may_migrate(const Exchange& ex, const Dispatch& d) const {
  if (!placer_ || !ex.log || !ex.log->continuable || d.pinned_worker || ex.migrations >= opt_.migration_limit)
    return false;
  std::vector<uint64_t> avoid = ex.avoid;
  avoid.push_back(static_cast<uint64_t>(ex.worker));
  return placer_->any_eligible(avoid);
}

void Relay::migrate(const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d,
                    std::shared_ptr<http::BodyStream> out, const std::string& error) {
  ex->tap->drop_partial();  // the cut event never reached the client; the continuation regenerates it
  account_failure(*ex, "stream", Failure{"stream_cut", 0, error}, /*mark_down=*/true);
  fleet_.at(ex->worker).counters.migrated++;
  // The lease ends here; the continuation's placement avoids the worker, so a binding to it
  // moves ("rebound", unhealthy).
  if (auto& p = ex->lease.placement) {
    p->finish();
    p.reset();
  }
  ex->avoid.push_back(static_cast<uint64_t>(ex->worker));
  ex->migrations++;
  stats_.migrations++;
  auto body = continuation_body(ex->api, d->request.bytes(), *ex->log);
  if (!body) {
    stats_.migrations_failed++;
    return cut(ex, std::move(out), "the stream could not be continued: " + body.error().message);
  }
  auto cd = std::make_shared<Dispatch>(*d);
  cd->request.body = std::make_shared<const std::string>(std::move(*body));
  cd->request.insert.clear();  // bytes() spliced it into the continued body already
  continue_on(ex, std::move(req), std::move(d), std::move(cd), std::move(out));
}

void Relay::continue_on(const std::shared_ptr<Exchange>& ex, ReqPtr req, DispatchPtr d, DispatchPtr cd,
                        std::shared_ptr<http::BodyStream> out) {
  const bool on_loop = loop_.in_loop_thread();
  auto on_pool = [&] { loop_.handlers().post([=, this] { continue_on(ex, req, d, cd, out); }); };
  if (on_loop && placer_->uses_store()) return on_pool();
  // A continuation is never queued (it holds its dispatch slot): it takes a busy worker too.
  auto placed = place(*ex, *cd, !on_loop, /*refuse_busy=*/false, nullptr);
  if (!placed && placed.error().exit_code == route::kPlaceWouldWait) return on_pool();
  if (!placed) {
    stats_.migrations_failed++;
    return cut(ex, out, "no worker to continue the stream on: " + placed.error().message);
  }
  ex->lease.placement.emplace(std::move(*placed));
  const size_t worker = take_worker(*ex);
  route::Placement* pl = &*ex->lease.placement;
  auto tap = std::make_shared<ContinuationTap>(ex->api, ex->tap, *ex->log, [pl] { pl->first_token(); });
  auto call = http::ProxyCall::start(fleet_.at(worker).pool, cd->request, tap, clock_, req->executor);
  track_call(*ex, call);
  call->start_async([this, ex, req, d, cd, out, call](bool ok) {
    const int st = ok ? call->status() : 0;
    if (ok && st >= 200 && st < 300 && call->is_event_stream()) {
      ex->lease.placement->commit();
      watch_for_cut(*call, ex, req, d);
      return call->continue_stream(out, [this, ex](const http::ProxyOutcome& o) { relayed(ex, o); });
    }
    Failure f{ok ? "http" : (call->timed_out() ? "timeout" : "connection"), st,
              ok ? "HTTP " + std::to_string(st) : call->error()};
    call->cancel();
    account_failure(*ex, "stream", f, /*mark_down=*/!ok);
    if (auto& p = ex->lease.placement) {
      p->fail(false);
      p.reset();
    }
    ex->avoid.push_back(static_cast<uint64_t>(ex->worker));
    if (may_migrate(*ex, *d)) {
      ex->migrations++;
      stats_.migrations++;
      return continue_on(ex, req, d, cd, out);
    }
    stats_.migrations_failed++;
    cut(ex, out, "the stream's continuation failed (" + f.type + "): " + f.message);
  });
}

void Relay::cut(const std::shared_ptr<Exchange>& ex, std::shared_ptr<http::BodyStream> out, const std::string& error) {
  http::ProxyCall::cut_stream(std::move(out), error);
  // The worker's in-flight count and error were accounted where it failed (account_failure): the
  // end is counted as a transport failure, which count_end leaves to that place.
  http::ProxyOutcome o;
  o.kind = http::ProxyOutcome::Kind::kTransport;
  o.status = 200;
  o.message = error;
  o.end_ms = clock_.now_ms();
  finish(ex, &o, 200, "stream_cut", error);
}

}  // namespace dyn::serve
