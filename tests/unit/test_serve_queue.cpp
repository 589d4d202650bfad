// Unit tests of serve::RequestQueue (SPEC 3.4): the concurrency cap, 429 when full, 503 past the
// time limit, the reasons they name, and dispatch in policy order when a slot frees.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
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
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, false);
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
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, false);
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
  RequestQueue none(g.cfg, 1, g.router, g.clock, inline_post, false);
  REQUIRE(none.enter(request(out, "x")).go);
  CHECK(none.enter(request(out, "y")).rejected.status == 429);
}

TEST_CASE("past the time limit a waiting request gets 503 naming why it waited") {
  Fixture f(10, 50);
  RequestQueue q(f.cfg, 1, f.router, f.clock, inline_post, false);
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
  RequestQueue q(f.cfg, 0, f.router, f.clock, inline_post, false);
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
