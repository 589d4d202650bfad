// Unit tests of serve::RequestQueue (SPEC 3.4): the concurrency cap, 429 when full, 503 past the
// time limit, the reasons they name, dispatch in policy order when a slot frees, and a client
// that hangs up while it waits (issue 51.4).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/route/admission.h"
#include "dyn/route/router.h"
#include "dyn/serve/queue.h"

using namespace dyn::serve;
namespace route = dyn::route;

namespace {

struct Fixture {
  dyn::FakeClock clock;
  route::Router router{route::RouterConfig{}, clock};
  route::QueueConfig cfg;
  Fixture(size_t queue_size, double timeout_ms) {
    REQUIRE(!router.add_worker(route::WorkerSpec{0, 0, 0}));
    cfg.max_requests = queue_size;
    cfg.timeout_ms = timeout_ms;
  }
};

/// A request whose placement always succeeds; its verdict goes to `out` (in the order given).
QueuedRequest request(std::vector<std::pair<std::string, QueueVerdict>>& out, std::string name, uint32_t tier = 0) {
  QueuedRequest q;
  q.item.strict_priority = tier;
  q.tokens = 100;
  q.place = [](int) { return PlaceOutcome{}; };
  q.resume = [&out, name](QueueVerdict v) { out.emplace_back(name, std::move(v)); };
  return q;
}

auto inline_post = [](std::function<void()> f) { f(); };

}  // namespace

TEST_CASE("concurrency cap: one goes, one waits, one more is 429; a freed slot sends the waiting one") {
  Fixture f(1, 60'000);
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, nullptr);
  CHECK(q.active());
  std::vector<std::pair<std::string, QueueVerdict>> out;
  Entered a = q.enter(request(out, "a"));
  CHECK(a.go);
  Entered b = q.enter(request(out, "b"));
  CHECK(b.queued);
  CHECK(b.depth == 1);
  Entered c = q.enter(request(out, "c"));
  CHECK_FALSE(c.go);
  CHECK_FALSE(c.queued);
  CHECK(c.rejected.status == 429);
  CHECK(c.rejected.type == "concurrency_limit");
  CHECK(out.empty());
  f.clock.advance(250);
  q.release_slot();  // a ends
  REQUIRE(out.size() == 1);
  CHECK(out[0].first == "b");
  CHECK(out[0].second.kind == QueueVerdict::Kind::kPlaced);
  CHECK(out[0].second.waited_ms == doctest::Approx(250));
  QueueStats st = q.stats();
  CHECK(st.dispatched == 1);
  CHECK(st.classes[0].queued_total == 1);
  CHECK(st.rejected.at({"queue_full", "concurrency_limit"}) == 1);
}

TEST_CASE("a higher tier waiting goes first when the slot frees; --queue-size 0 lets nobody wait") {
  Fixture f(10, 60'000);
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, nullptr);
  std::vector<std::pair<std::string, QueueVerdict>> out;
  REQUIRE(q.enter(request(out, "holder")).go);
  REQUIRE(q.enter(request(out, "low")).queued);
  REQUIRE(q.enter(request(out, "high", 1)).queued);
  q.release_slot();
  q.release_slot();
  REQUIRE(out.size() == 2);
  CHECK(out[0].first == "high");
  CHECK(out[1].first == "low");

  Fixture g(0, 60'000);
  RequestQueue none(g.cfg, 1, g.router, g.clock, inline_post, nullptr);
  REQUIRE(none.enter(request(out, "x")).go);
  CHECK(none.enter(request(out, "y")).rejected.status == 429);
}

TEST_CASE("past the time limit a waiting request gets 503 naming why it waited") {
  Fixture f(10, 50);
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, nullptr);
  std::promise<QueueVerdict> got;
  std::vector<std::pair<std::string, QueueVerdict>> out;
  REQUIRE(q.enter(request(out, "holder")).go);
  QueuedRequest r;
  r.place = [](int) { return PlaceOutcome{}; };
  r.resume = [&got](QueueVerdict v) { got.set_value(std::move(v)); };
  REQUIRE(q.enter(std::move(r)).queued);
  f.clock.advance(100);
  q.pump();  // nothing can go: the slot is still held
  auto fut = got.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(5)) == std::future_status::ready);  // the timer looks once a second
  QueueVerdict v = fut.get();
  CHECK(v.kind == QueueVerdict::Kind::kReject);
  CHECK(v.status == 503);
  CHECK(v.type == "concurrency_limit");
  CHECK(v.waited_ms == doctest::Approx(100));
  CHECK(q.stats().rejected.at({"timeout", "concurrency_limit"}) == 1);
}

TEST_CASE("nothing to hold (no cap, threshold or admission): the queue is inactive until a threshold is set") {
  Fixture f(10, 60'000);
  RequestQueue q(f.cfg, 0, f.router, f.clock, inline_post, nullptr);
  CHECK_FALSE(q.active());
  route::BusyThresholds t;
  t.active_requests = 1;
  REQUIRE(!f.router.set_busy_thresholds(t));
  q.thresholds_changed();
  CHECK(q.active());
  t.active_requests = 0;
  CHECK(f.router.set_busy_thresholds(t));  // out of range: refused, nothing changed
  CHECK(f.router.busy_thresholds().active_requests == 1u);
}

TEST_CASE("a client that hangs up while it waits leaves the queue at once; the next waiter keeps its turn") {
  Fixture f(10, 60'000);
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, nullptr);
  std::vector<std::pair<std::string, QueueVerdict>> out;
  REQUIRE(q.enter(request(out, "holder")).go);
  Entered gone = q.enter(request(out, "gone"));
  REQUIRE(gone.queued);
  REQUIRE(q.enter(request(out, "next")).queued);
  CHECK(q.stats().classes[0].waiting == 2);
  f.clock.advance(40);
  CHECK(q.cancel(gone.id));
  REQUIRE(out.size() == 1);
  CHECK(out[0].first == "gone");
  CHECK(out[0].second.kind == QueueVerdict::Kind::kCancelled);
  CHECK(out[0].second.status == 499);
  CHECK(out[0].second.waited_ms == doctest::Approx(40));
  CHECK(out[0].second.depth == 1);
  QueueStats st = q.stats();
  CHECK(st.classes[0].waiting == 1);
  CHECK(st.dispatched == 1);       // the holder's slot only: a waiting request holds none
  CHECK(st.rejected.empty());      // a client that left is no rejection of the router's
  CHECK_FALSE(q.cancel(gone.id));  // once: the item is gone
  q.release_slot();
  REQUIRE(out.size() == 2);
  CHECK(out[1].first == "next");
  CHECK(out[1].second.kind == QueueVerdict::Kind::kPlaced);
  CHECK(out[1].second.depth == 2);
  CHECK_FALSE(q.cancel(gone.id + 1));  // it went: nothing to cancel
  CHECK(q.stats().classes[0].waiting == 0);
}

TEST_CASE("a hang-up while admission holds the request withdraws its ticket, or drops a release already made") {
  Fixture f(10, 60'000);
  route::AdmissionConfig ac;
  ac.mode = route::AdmissionMode::kThunderAgent;
  route::AdmissionController adm(ac, {{0, 10000}});
  RequestQueue q(f.cfg, 0, f.router, f.clock, inline_post, &adm);
  REQUIRE(adm.admit("big", "", 8000, 0).admitted);
  route::AdmitDecision late = adm.admit("late", "", 1000, 0);  // no room: waits
  REQUIRE_FALSE(late.admitted);
  std::vector<std::pair<std::string, QueueVerdict>> out;
  QueuedRequest first = request(out, "late");
  first.item.session = "late";  // its program
  const uint64_t id = q.defer(late.ticket, std::move(first));
  CHECK(q.stats().deferred == 1);
  f.clock.advance(30);
  CHECK(q.cancel(id));
  REQUIRE(out.size() == 1);
  CHECK(out[0].second.kind == QueueVerdict::Kind::kCancelled);
  CHECK(out[0].second.admission_withdrawn);
  CHECK(out[0].second.paused_ms == doctest::Approx(30));
  CHECK(out[0].second.waited_ms == 0);
  CHECK(q.stats().deferred == 0);
  // No tick releases it now, even with room.
  adm.on_response("big", 10, 10, 100);
  CHECK(adm.tick(20'000).released.empty());

  // A tick released the next one before its client's hang-up reached the queue: the release is
  // dropped on arrival (not queued, not kept), and the controller counts it in flight.
  REQUIRE(adm.admit("big", "", 8000, 20'000).admitted);
  route::AdmitDecision again = adm.admit("other", "", 1000, 20'000);
  REQUIRE_FALSE(again.admitted);
  QueuedRequest second = request(out, "other");
  second.item.session = "other";
  const uint64_t id2 = q.defer(again.ticket, std::move(second));
  adm.on_response("big", 10, 10, 20'100);
  route::TickReport r = adm.tick(40'000);
  REQUIRE(r.released.size() == 1);
  CHECK(q.cancel(id2));
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[1].second.admission_withdrawn);
  q.admission_released(r.released);
  CHECK(out.size() == 2);
  QueueStats st = q.stats();
  CHECK(st.deferred == 0);
  CHECK(st.classes[0].waiting == 0);
  CHECK(st.classes[0].queued_total == 0);
}
