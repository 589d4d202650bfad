// Unit tests for lib/dyn/route: cost model, modes, busy thresholds, affinity lifecycle (hard/soft,
// waiters, parent groups, TTL, limit), cases 11 and 12.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "dyn/route/router.h"
#include "dyn/session/normalize.h"
#include "dyn/tokens/hash.h"

using namespace dyn;
using namespace dyn::route;

namespace {
std::string repo(const std::string& rel) { return std::string(DYN_SOURCE_DIR) + "/" + rel; }

// Sequence hashes of k distinct blocks starting with `base` (a prefix family).
std::vector<uint64_t> seq_of(uint64_t base, size_t k) {
  std::vector<uint64_t> s;
  uint64_t prev = 0;
  for (size_t i = 0; i < k; ++i) {
    prev = i == 0 ? tokens::chain_hash(0, base) : tokens::chain_hash(prev, base + i);
    s.push_back(prev);
  }
  return s;
}

Placement place_ok(Router& r, const RouteRequest& q) {
  auto p = r.place(q);
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(*p);
}

RouteRequest req(const std::string& session, std::span<const uint64_t> seq, uint64_t tokens) {
  RouteRequest q;
  q.session_id = session;
  q.sequence_hashes = seq;
  q.tokens = tokens;
  return q;
}
}  // namespace

// Router is not movable; construct in place.
#define ROUTER(name, cfg, clk, n) \
  Router name(cfg, clk);          \
  for (int i_ = 0; i_ < (n); ++i_) REQUIRE(!name.add_worker(WorkerSpec{static_cast<uint64_t>(i_), 0, 0}))

TEST_CASE("config validation and names") {
  RouterConfig c;
  CHECK(!c.validate());
  c.affinity_ttl_secs = 31'536'001;
  REQUIRE(c.validate());
  CHECK(c.validate()->exit_code == kExitUsage);
  c.affinity_ttl_secs = 31'536'000;
  CHECK(!c.validate());
  for (auto m : {"round-robin", "random", "power-of-two", "least-loaded", "kv", "direct"})
    CHECK(mode_name(*parse_mode(m)) == std::string(m));
  CHECK(!parse_mode("kv-aware"));
  CHECK(!parse_affinity_mode("HARD"));
  FakeClock clk;
  c.block_size = 0;
  CHECK_THROWS_AS(Router(c, clk), Fatal);
}

TEST_CASE("kv cost model: overlap against load, explain values") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  ROUTER(r, c, clk, 3);
  auto s = seq_of(100, 10);
  // Worker 1 holds the first 5 blocks, worker 2 the first 8.
  for (auto [w, k] : {std::pair<uint64_t, size_t>{1, 5}, {2, 8}}) {
    RouteRequest q;
    q.worker = w;
    q.sequence_hashes = std::span(s).first(k);
    q.tokens = k * 16;
    auto p = place_ok(r, q);
    CHECK(p.binding() == BindingOutcome::kNone);
    p.commit();
  }
  // Load: worker 2 runs a 9-block request (stays active).
  RouteRequest load;
  load.worker = 2;
  load.tokens = 9 * 16;
  auto busy = place_ok(r, load);
  busy.commit();
  RouteRequest q = req("", s, 160);
  q.explain = true;
  auto p = place_ok(r, q);
  // costs: w0 10 + 10 = 20; w1 5 + 10 = 15; w2 2 + (9 + 10) = 21
  REQUIRE(p.explain().size() == 3);
  CHECK(p.explain()[0].cost == doctest::Approx(20));
  CHECK(p.explain()[1].overlap_blocks == 5);
  CHECK(p.explain()[1].prefill_blocks == doctest::Approx(5));
  CHECK(p.explain()[1].decode_blocks == doctest::Approx(10));
  CHECK(p.explain()[2].overlap_blocks == 8);
  CHECK(p.explain()[2].decode_blocks == doctest::Approx(19));
  CHECK(p.worker() == 1);
  CHECK(p.overlap_blocks() == 5);
  CHECK(p.cached_tokens() == 80);
  CHECK(p.request_blocks() == 10);
  // Worker 2 held 3 more blocks but its load cost more: a load-forced non-max-overlap pick.
  CHECK(p.quality().cause == NonMaxCause::kLoad);
  CHECK(p.quality().predicted_cached_tokens == 80);
  CHECK(p.quality().best_cached_tokens == 128);
  CHECK(p.quality().avoidable_prefill_tokens == 48);
  CHECK(p.quality().margin == doctest::Approx(5));  // runner-up w0 at 20 against 15
  CHECK(p.quality().ties == 0);
  const RouterStats st = r.stats();
  CHECK(st.quality.decisions == 4);
  // Of the pinned set-up requests, the one pinned to w2 while w1 held 5 of its 8 blocks was a
  // non-max pick (80 tokens) forced by the client; the other two had nothing better.
  CHECK(st.quality.kv_optimal == 2);
  CHECK(st.quality.avoidable_prefill_tokens == 48 + 80);
  CHECK(st.quality.non_max[0] == 1);  // kNonMaxCauses[0] is "load"
  CHECK(st.quality.non_max[4] == 1);  // kNonMaxCauses[4] is "pinned"
  // Weight 0: load only, so the idle worker with the fewest cached blocks wins (w0).
  RouterConfig c0 = c;
  c0.overlap_score_weight = 0;
  ROUTER(r0, c0, clk, 3);
  CHECK(place_ok(r0, req("", s, 160)).worker() == 0);
}

TEST_CASE("busy thresholds make a worker ineligible unless all are busy") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  c.active_prefill_tokens_threshold = 100;
  ROUTER(r, c, clk, 2);
  auto s = seq_of(1, 4);
  RouteRequest warm;
  warm.worker = 0;
  warm.sequence_hashes = s;
  warm.tokens = 64;
  place_ok(r, warm).commit();  // w0 caches the prefix; request ended
  RouteRequest big;
  big.worker = 0;
  big.tokens = 500;
  auto hold = place_ok(r, big);  // w0: 500 prefill tokens in flight > 100
  auto p = place_ok(r, req("", s, 64));
  CHECK(p.worker() == 1);  // the cache is on w0 but w0 is busy
  CHECK(r.loads()[0].prefill_tokens == 500);
  hold.first_token();  // prefill done: w0 no longer busy
  CHECK(r.loads()[0].prefill_tokens == 0);
  hold.finish();
  p.finish();
  auto p2 = place_ok(r, req("", s, 64));
  CHECK(p2.worker() == 0);
}

TEST_CASE("round-robin, random, power-of-two, least-loaded are deterministic under a seed") {
  FakeClock clk;
  for (Mode m : {Mode::kRoundRobin, Mode::kRandom, Mode::kPowerOfTwo, Mode::kLeastLoaded}) {
    CAPTURE(mode_name(m));
    RouterConfig c;
    c.mode = m;
    c.seed = 42;
    std::vector<uint64_t> a, b;
    for (auto* out : {&a, &b}) {
      ROUTER(r, c, clk, 4);
      std::vector<Placement> live;
      for (int i = 0; i < 40; ++i) {
        auto p = place_ok(r, req("", {}, 100));
        out->push_back(p.worker());
        p.commit();
        if (i % 3 == 0) live.push_back(std::move(p));
      }
    }
    CHECK(a == b);
    std::map<uint64_t, int> count;
    for (auto w : a) ++count[w];
    CHECK(count.size() == 4);  // every worker used
  }
  RouterConfig rr;
  ROUTER(r, rr, clk, 3);
  std::vector<uint64_t> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(place_ok(r, req("", {}, 1)).worker());
  CHECK(seq == std::vector<uint64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("kv cost model: prefill still ahead on a worker is load until its first token") {
  // SPEC 3.2 prefill_ahead (Dynamo's active prefill tokens in the selector's prefill term).
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  ROUTER(r, c, clk, 2);
  auto s = seq_of(300, 10);
  RouteRequest warm;
  warm.worker = 0;
  warm.sequence_hashes = std::span(s).first(8);
  warm.tokens = 8 * 16;
  auto w = place_ok(r, warm);
  w.commit();
  w.first_token();
  w.finish();
  // Worker 0 (8 of the 10 blocks cached) gets a 6-block prompt of another session, queued.
  RouteRequest other;
  other.worker = 0;
  other.tokens = 6 * 16;
  auto queued = place_ok(r, other);
  queued.commit();
  RouteRequest q = req("", s, 10 * 16);
  q.explain = true;
  {
    // w0: prefill 6 ahead + 2 = 8, decode 6 + 10 = 16 -> 24; w1: 10 + 10 = 20: the queue outweighs
    // the 8 cached blocks.
    auto p = place_ok(r, q);
    CHECK(p.explain()[0].prefill_blocks == doctest::Approx(8));
    CHECK(p.explain()[0].cost == doctest::Approx(24));
    CHECK(p.explain()[1].cost == doctest::Approx(20));
    CHECK(p.worker() == 1);
  }
  // Its first token: only decode load is left, w0 = 2 + 16 = 18 against 20.
  queued.first_token();
  auto p = place_ok(r, q);
  CHECK(p.explain()[0].prefill_blocks == doctest::Approx(2));
  CHECK(p.explain()[0].cost == doctest::Approx(18));
  CHECK(p.worker() == 0);
}

TEST_CASE("temperature > 0 draws by cost, seeded") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.temperature = 0.5;
  c.seed = 3;
  std::vector<uint64_t> a, b;
  for (auto* out : {&a, &b}) {
    ROUTER(r, c, clk, 4);
    std::vector<Placement> live;
    for (int i = 0; i < 50; ++i) {
      auto p = place_ok(r, req("", {}, 640));
      out->push_back(p.worker());
      live.push_back(std::move(p));
    }
  }
  CHECK(a == b);
}

TEST_CASE("hard affinity: new, hit, TTL from the last lease end, expired") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kRoundRobin;
  c.affinity_ttl_secs = 10;
  ROUTER(r, c, clk, 4);
  auto p1 = place_ok(r, req("s", {}, 10));
  CHECK(p1.binding() == BindingOutcome::kNew);
  uint64_t w = p1.worker();
  p1.commit();
  clk.set(5'000);
  auto p2 = place_ok(r, req("s", {}, 10));  // round-robin would move it; the binding holds
  CHECK(p2.binding() == BindingOutcome::kHit);
  CHECK(p2.worker() == w);
  p2.commit();
  p1.finish();
  clk.set(60'000);  // p2 still streaming: a leased binding never expires
  auto p3 = place_ok(r, req("s", {}, 10));
  CHECK(p3.binding() == BindingOutcome::kHit);
  CHECK(p3.worker() == w);
  p3.commit();
  p3.finish();
  p2.finish();  // last lease ends at 60 s: idle deadline 70 s
  auto b = r.bindings();
  REQUIRE(b.size() == 1);
  CHECK(b[0].key == "s");
  CHECK(b[0].active_leases == 0);
  CHECK(b[0].idle_deadline_ms == doctest::Approx(70'000));
  clk.set(69'999);
  auto p4 = place_ok(r, req("s", {}, 10));
  CHECK(p4.binding() == BindingOutcome::kHit);
  p4.commit();
  p4.finish();
  clk.set(79'999 + 1);
  auto p5 = place_ok(r, req("s", {}, 10));
  CHECK(p5.binding() == BindingOutcome::kExpired);
  auto st = r.stats();
  CHECK(st.binding_new == 1);
  CHECK(st.binding_hit == 3);
  CHECK(st.binding_expired == 1);
}

// The periodic sweep (every 30 s here) skips its scan while no binding can have expired; these
// outcomes are those of a scan at every sweep: a binding the sweep erased is met as "new", one it
// missed would be met as "expired".
TEST_CASE("periodic sweep erases bindings once their idle TTL has passed, clock set back included") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kRoundRobin;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 2);
  auto once = [&](const std::string& key, double at) {
    clk.set(at);
    auto p = place_ok(r, req(key, {}, 10));
    p.commit();
    p.finish();  // idle from `at`
    return p.binding();
  };
  CHECK(once("a", 0) == BindingOutcome::kNew);        // deadline 300 s
  CHECK(once("b", 100'000) == BindingOutcome::kNew);  // deadline 400 s
  CHECK(once("c", 301'000) == BindingOutcome::kNew);  // its sweep erases "a"
  CHECK(once("a", 302'000) == BindingOutcome::kNew);
  // A clock set back: "d" goes idle at 10 s (deadline 310 s), before the last scan (301 s).
  CHECK(once("d", 10'000) == BindingOutcome::kNew);
  CHECK(once("e", 340'000) == BindingOutcome::kNew);  // its sweep erases "d"
  CHECK(once("d", 341'000) == BindingOutcome::kNew);
  CHECK(once("b", 342'000) == BindingOutcome::kHit);  // never idle 300 s: kept by every sweep
}

TEST_CASE("parent groups: subagents of one parent share a binding; the parent keeps its own") {
  FakeClock clk;
  RouterConfig c;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 4);
  auto root = place_ok(r, req("root", {}, 10));
  root.commit();
  RouteRequest a = req("child-a", {}, 10);
  a.parent_session_id = "root";
  auto pa = place_ok(r, a);
  CHECK(pa.binding() == BindingOutcome::kNew);
  CHECK(pa.binding_key() == session::parent_group_key("root"));
  CHECK(pa.worker() != root.worker());  // round-robin placed the group on its own
  pa.commit();
  RouteRequest b = req("child-b", {}, 10);
  b.parent_session_id = "root";
  auto pb = place_ok(r, b);
  CHECK(pb.binding() == BindingOutcome::kHit);
  CHECK(pb.worker() == pa.worker());
  auto snap = r.bindings();
  REQUIRE(snap.size() == 2);
  CHECK(snap[0].key == "");
  CHECK(snap[0].parent_session_id == "root");
  CHECK(snap[0].active_leases == 2);
  CHECK(snap[1].key == "root");
}

TEST_CASE("initializing: waiters block until the first dispatch commits, or one takes over on failure") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kRoundRobin;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 4);
  auto first = place_ok(r, req("s", {}, 10));
  std::atomic<int> done{0};
  std::vector<uint64_t> workers(3);
  std::vector<BindingOutcome> outcomes(3);
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] {
      auto p = r.place(req("s", {}, 10));
      workers[i] = p->worker();
      outcomes[i] = p->binding();
      p->commit();
      ++done;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(done.load() == 0);  // all waiting
  first.commit();
  for (auto& t : ts) t.join();
  for (int i = 0; i < 3; ++i) {
    CHECK(workers[i] == first.worker());
    CHECK(outcomes[i] == BindingOutcome::kHit);
  }
  CHECK(r.stats().waits >= 3);

  // Failure: the entry is removed and exactly one waiter becomes the new first placement.
  auto f = place_ok(r, req("t", {}, 10));
  std::vector<BindingOutcome> out2(2);
  std::vector<std::thread> ts2;
  for (int i = 0; i < 2; ++i)
    ts2.emplace_back([&, i] {
      auto p = r.place(req("t", {}, 10));
      out2[i] = p->binding();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      p->commit();
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  f.fail();
  for (auto& t : ts2) t.join();
  int news = 0, hits = 0;
  for (auto o : out2) (o == BindingOutcome::kNew ? news : hits) += 1;
  CHECK(news == 1);
  CHECK(hits == 1);
}

TEST_CASE("initializing: a waiter whose request is cancelled wakes at once and changes nothing") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kRoundRobin;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 2);
  auto first = place_ok(r, req("s", {}, 10));
  std::atomic<bool> gone{false};
  std::promise<int> code;
  std::thread waiter([&] {
    RouteRequest q = req("s", {}, 10);
    q.cancelled = &gone;
    auto p = r.place(q);
    code.set_value(p ? 0 : p.error().exit_code);
  });
  auto fut = code.get_future();
  // It waits, and a wake-up with nothing cancelled leaves it waiting.
  CHECK(fut.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  r.wake_waiters();
  CHECK(fut.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);
  gone = true;
  r.wake_waiters();
  // Woken, not timed out: the binding's wait would last init_wait_ms (30 s).
  REQUIRE(fut.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(fut.get() == kPlaceCancelled);
  waiter.join();
  // Nothing was charged for it: the first dispatch commits and the binding is followed.
  uint64_t active = 0;
  for (const WorkerLoad& l : r.loads()) active += l.active_requests;
  CHECK(active == 1);
  first.commit();
  auto next = place_ok(r, req("s", {}, 10));
  CHECK(next.worker() == first.worker());
  CHECK(next.binding() == BindingOutcome::kHit);
  // A request cancelled before it would wait never blocks.
  RouteRequest q = req("s2", {}, 10);
  auto s2 = place_ok(r, q);
  q.cancelled = &gone;
  auto p = r.place(q);
  REQUIRE_FALSE(p);
  CHECK(p.error().exit_code == kPlaceCancelled);
}

TEST_CASE("simulator mode: a second request of an initializing key follows it without blocking") {
  FakeClock clk;
  RouterConfig c;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 4);
  RouteRequest q = req("s", {}, 10);
  q.wait_for_initializing = false;
  auto a = place_ok(r, q);
  auto b = place_ok(r, q);
  CHECK(b.worker() == a.worker());
  CHECK(b.binding() == BindingOutcome::kHit);
}

TEST_CASE("hard: invalid bound worker or failed dispatch rebinds once; explicit target wins") {
  FakeClock clk;
  RouterConfig c;
  c.affinity_ttl_secs = 300;
  ROUTER(r, c, clk, 3);
  auto p = place_ok(r, req("s", {}, 10));
  uint64_t w0 = p.worker();
  p.commit();
  p.finish();
  r.set_healthy(w0, false);
  auto q = place_ok(r, req("s", {}, 10));
  CHECK(q.binding() == BindingOutcome::kRebound);
  CHECK(q.rebind_reason() == RebindReason::kUnhealthy);
  CHECK(std::string(rebind_reason_name(q.rebind_reason())) == "unhealthy");
  CHECK(q.worker() != w0);
  q.commit();
  uint64_t w1 = q.worker();
  q.finish();
  r.set_healthy(w0, true);
  // Dispatch to the bound worker fails: invalidate, retry once elsewhere, the new worker binds.
  auto h = place_ok(r, req("s", {}, 10));
  CHECK(h.worker() == w1);
  auto adv = h.fail();
  CHECK(adv.retry);
  CHECK(adv.avoid_worker == w1);
  RouteRequest again = req("s", {}, 10);
  again.retry = adv;
  auto h2 = place_ok(r, again);
  CHECK(h2.binding() == BindingOutcome::kRebound);
  CHECK(h2.rebind_reason() == RebindReason::kDispatchFailed);
  CHECK(forced_move(h2.rebind_reason()));
  CHECK(h2.worker() != w1);
  h2.commit();
  auto h3 = place_ok(r, req("s", {}, 10));
  CHECK(h3.worker() == h2.worker());
  // A client cancellation does not invalidate.
  CHECK(!h3.fail(true).retry);
  CHECK(place_ok(r, req("s", {}, 10)).worker() == h2.worker());
  // Explicit worker target wins over the binding.
  RouteRequest ex = req("s", {}, 10);
  ex.worker = w1;
  auto e = place_ok(r, ex);
  CHECK(e.worker() == w1);
  CHECK(e.binding() == BindingOutcome::kNone);
  CHECK(e.rebind_reason() == RebindReason::kNone);
  // Removing the bound worker drops the binding; the session's next placement is a move with
  // its reason (issue 53), even when the worker is back by then, and then a hit again.
  CHECK(r.remove_worker(h2.worker()) == 1);
  CHECK(r.add_worker(WorkerSpec{h2.worker(), 0, 0}) == std::nullopt);
  auto m = place_ok(r, req("s", {}, 10));
  CHECK(m.binding() == BindingOutcome::kRebound);
  CHECK(m.rebind_reason() == RebindReason::kRemoved);
  m.commit();
  m.finish();
  auto later = place_ok(r, req("s", {}, 10));
  CHECK(later.binding() == BindingOutcome::kHit);
  CHECK(later.rebind_reason() == RebindReason::kNone);
}

TEST_CASE("soft: busy bound worker moves; an older concurrent rebind does not overwrite a newer one") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.affinity_ttl_secs = 300;
  c.affinity_mode = AffinityMode::kSoft;
  c.active_prefill_tokens_threshold = 1000;
  c.block_size = 16;
  ROUTER(r, c, clk, 3);
  auto p = place_ok(r, req("s", {}, 16));
  p.commit();
  p.first_token();
  uint64_t bound = p.worker();
  auto keep = place_ok(r, req("s", {}, 16));
  CHECK(keep.binding() == BindingOutcome::kHit);
  keep.commit();
  keep.first_token();
  RouteRequest flood;
  flood.worker = bound;
  flood.tokens = 5000;
  auto f = place_ok(r, flood);  // the bound worker is now busy (prefill)
  auto older = place_ok(r, req("s", {}, 16));
  auto newer = place_ok(r, req("s", {}, 16));
  CHECK(older.binding() == BindingOutcome::kRebound);
  CHECK(older.rebind_reason() == RebindReason::kBusy);
  CHECK_FALSE(forced_move(older.rebind_reason()));
  CHECK(newer.binding() == BindingOutcome::kRebound);
  CHECK(older.worker() != bound);
  CHECK(newer.worker() != bound);
  CHECK(older.worker() != newer.worker());  // load spread the two
  newer.commit();
  older.commit();  // stale version: must not overwrite
  auto snap = r.bindings();
  REQUIRE(snap.size() == 1);
  CHECK(snap[0].worker == newer.worker());
  CHECK(snap[0].version == 2);
}

TEST_CASE("binding limit: a new binding beyond it fails with 503; existing ones keep working") {
  FakeClock clk;
  RouterConfig c;
  c.affinity_ttl_secs = 300;
  c.max_bindings = 2;
  ROUTER(r, c, clk, 2);
  place_ok(r, req("a", {}, 1)).commit();
  place_ok(r, req("b", {}, 1)).commit();
  auto full = r.place(req("c", {}, 1));
  REQUIRE(!full.ok());
  CHECK(full.error().exit_code == 503);
  CHECK(full.error().message.find("2 live bindings") != std::string::npos);
  CHECK(place_ok(r, req("a", {}, 1)).binding() == BindingOutcome::kHit);
  CHECK(place_ok(r, req("", {}, 1)).binding() == BindingOutcome::kNone);
  clk.set(301'000);  // both idle past the TTL: swept, room again
  CHECK(place_ok(r, req("c", {}, 1)).binding() == BindingOutcome::kNew);
  CHECK(r.stats().table_full == 1);
}

TEST_CASE("errors: no workers, unknown explicit worker, direct mode without a target") {
  FakeClock clk;
  RouterConfig c;
  Router empty(c, clk);
  CHECK(empty.place(req("", {}, 1)).error().exit_code == 503);
  ROUTER(r, c, clk, 2);
  RouteRequest q = req("", {}, 1);
  q.worker = 9;
  CHECK(r.place(q).error().exit_code == 400);
  RouterConfig d;
  d.mode = Mode::kDirect;
  ROUTER(rd, d, clk, 2);
  CHECK(rd.place(req("", {}, 1)).error().exit_code == 400);
  q.worker = 1;
  CHECK(place_ok(rd, q).worker() == 1);
}

// Case 11: router and workers must agree on the block size. With 64/64, q3 and q4 follow the
// prefix of q1 and q2 with 4 blocks of overlap (100 % hit); with router 32 / workers 64 the
// router refuses the workers, naming both sizes.
TEST_CASE("case 11: router and worker block sizes") {
  auto load_cfg = [](const char* name) {
    std::ifstream f(repo(std::string("tests/fixtures/cases/11-router-worker-block-size/") + name));
    return Json::parse(f);
  };
  std::vector<Json> rows;
  {
    std::ifstream f(repo("tests/fixtures/cases/11-router-worker-block-size/requests.jsonl"));
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) rows.push_back(Json::parse(line));
  }
  REQUIRE(rows.size() == 4);
  // A prompt per prefix group: 256 tokens of text that differs between groups from byte 0.
  auto tokens_of = [](const std::string& group, uint64_t n) {
    std::string text;
    while (text.size() < n * 4) text += "group " + group + " shared prompt text. ";
    text.resize(n * 4);
    return tokens::text_to_tokens(text);
  };

  for (bool events : {false, true}) {
    CAPTURE(events);
    Json ok = load_cfg("config-ok.json");
    FakeClock clk;
    RouterConfig c;
    c.mode = Mode::kKv;
    c.block_size = ok["router"]["block_size"];
    c.kv_events = events;
    Router r(c, clk);
    for (size_t i = 0; i < ok["workers"].size(); ++i)
      REQUIRE(!r.add_worker(WorkerSpec{i, ok["workers"][i]["block_size"].get<uint32_t>(), 0}));
    std::map<std::string, Placement> live;
    std::map<std::string, uint64_t> worker_of;
    bool completed = false;
    for (auto& row : rows) {
      std::string id = row["request_id"];
      double t = row["timestamp"];
      if (t >= 2000 && !completed) {
        completed = true;
        clk.set(1000);  // q1, q2 completed; with events, each worker publishes what it stored
        for (auto& [rid, p] : live) {
          if (events) {
            std::string g = rid == "q1" ? "A" : "B";
            auto toks = tokens_of(g, 256);
            auto blocks = tokens::block_hashes(toks, 64);  // the worker hashes at its own size
            KvEvent e;
            e.block_hashes = tokens::sequence_hashes(blocks);
            r.apply_kv_event(p.worker(), e);
          }
          p.finish();
        }
        live.clear();
      }
      clk.set(t);
      auto toks = tokens_of(row["prefix_group"], row["input_length"]);
      auto seq = tokens::sequence_hashes(tokens::block_hashes(toks, c.block_size));
      RouteRequest q;
      q.sequence_hashes = seq;
      q.tokens = toks.size();
      q.explain = true;
      auto p = place_ok(r, q);
      p.commit();
      worker_of[id] = p.worker();
      if (id == "q3" || id == "q4") {
        CHECK(p.overlap_blocks() == 4);
        CHECK(p.cached_tokens() == 256);  // hit rate 256 / 256 = 100 %
        uint64_t other = 1 - p.worker();
        CHECK(p.explain()[other].overlap_blocks == 0);
      }
      live.emplace(id, std::move(p));
    }
    CHECK(worker_of["q1"] != worker_of["q2"]);
    CHECK(worker_of["q3"] == worker_of["q1"]);
    CHECK(worker_of["q4"] == worker_of["q2"]);
  }

  Json bad = load_cfg("config-mismatch.json");
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = bad["router"]["block_size"];
  Router r(c, clk);
  auto err = r.add_worker(WorkerSpec{0, bad["workers"][0]["block_size"].get<uint32_t>(), 0});
  REQUIRE(err);
  CHECK(err->exit_code == kExitUsage);
  CHECK(err->message.find("64") != std::string::npos);
  CHECK(err->message.find("32") != std::string::npos);
  CHECK(err->message.find("--kv-cache-block-size") != std::string::npos);
}

// Case 12: 12 prompts of 300 tokens (zero full 512-token blocks) must spread by load, 6 and 6,
// whatever the overlap weight.
TEST_CASE("case 12: zero-block prompts still count as load") {
  for (double weight : {1.0, 0.01}) {
    FakeClock clk;
    RouterConfig c;
    c.mode = Mode::kKv;
    c.block_size = 512;
    c.overlap_score_weight = weight;
    ROUTER(r, c, clk, 2);
    std::vector<Placement> live;
    std::map<uint64_t, int> count;
    std::ifstream f(repo("tests/fixtures/cases/12-short-prompts-zero-blocks/trace.jsonl"));
    std::string line;
    while (std::getline(f, line)) {
      Json row = Json::parse(line);
      clk.set(row["timestamp"].get<double>());
      auto p = place_ok(r, req("", {}, row["input_length"].get<uint64_t>()));
      CHECK(p.request_blocks() == 0);
      p.commit();
      ++count[p.worker()];
      live.push_back(std::move(p));  // 200 output tokens: all still decoding 55 ms later
    }
    CHECK(count[0] == 6);
    CHECK(count[1] == 6);
    auto loads = r.loads();
    CHECK(loads[0].active_requests == 6);
    CHECK(loads[0].prefill_tokens == 1800);
  }
}

TEST_CASE("KV events parse") {
  auto e =
      kv_event_from_json(Json::parse(R"({"type":"stored","block_hashes":[18446744073709551615,1],"parent_hash":5})"));
  REQUIRE(e.ok());
  CHECK(e->block_hashes[0] == 18446744073709551615ull);
  CHECK(e->parent_hash == 5u);
  CHECK(kv_event_from_json(Json::parse(R"({"type":"cleared"})"))->kind == KvEvent::Kind::kCleared);
  CHECK(!kv_event_from_json(Json::parse(R"({"type":"stored"})")).ok());
  CHECK(!kv_event_from_json(Json::parse(R"({"type":"stored","block_hashes":[-1]})")).ok());
}

TEST_CASE("assess_decision: the cause of a non-max-overlap pick, from its own evidence (issue 55)") {
  // w0: overlap 4, cost 10; w1: overlap 1, cost 8; w2: overlap 1, cost 10; w3 ineligible, overlap 9.
  std::vector<WorkerScore> sc{
      {0, 4, 0, 0, 10, true}, {1, 1, 0, 0, 8, true}, {2, 1, 0, 0, 10, true}, {3, 9, 0, 0, 1, false}};
  auto q = assess_decision(sc, 0, Steer::kPolicy, 16, 100);
  CHECK(q.kv_optimal());
  CHECK(q.predicted_cached_tokens == 64);
  CHECK(q.best_cached_tokens == 64);  // the ineligible worker's overlap does not count
  CHECK(q.margin == doctest::Approx(-2));
  CHECK(q.ties == 1);  // w2 costs the same
  q = assess_decision(sc, 1, Steer::kPolicy, 16, 100);
  CHECK(q.cause == NonMaxCause::kLoad);
  CHECK(q.avoidable_prefill_tokens == 48);
  CHECK(q.margin == doctest::Approx(2));
  CHECK(q.ties == 0);
  CHECK(assess_decision(sc, 2, Steer::kPolicy, 16, 100).cause == NonMaxCause::kTie);
  sc[2].cost = 12;
  CHECK(assess_decision(sc, 2, Steer::kPolicy, 16, 100).cause == NonMaxCause::kPolicy);
  CHECK(assess_decision(sc, 2, Steer::kAffinity, 16, 100).cause == NonMaxCause::kAffinity);
  CHECK(assess_decision(sc, 2, Steer::kAdmission, 16, 100).cause == NonMaxCause::kAdmission);
  CHECK(assess_decision(sc, 2, Steer::kPinned, 16, 100).cause == NonMaxCause::kPinned);
  // Overlap beyond the prompt saves nothing: 1 block and 4 blocks both cover a 10-token prompt.
  q = assess_decision(sc, 1, Steer::kPolicy, 16, 10);
  CHECK(q.kv_optimal());
  CHECK(q.avoidable_prefill_tokens == 0);
  CHECK(q.predicted_cached_tokens == 10);
  // Alone: no runner-up, no margin.
  q = assess_decision(std::span(sc).first(1), 0, Steer::kPolicy, 16, 100);
  CHECK(!q.margin);
  CHECK(std::string(non_max_cause_name(NonMaxCause::kTie)) == "tie");
  CHECK(std::string(non_max_cause_name(NonMaxCause::kNone)).empty());
}

TEST_CASE("DecisionAssessor: the scores streamed in any order give assess_decision's result (issue 54)") {
  // Overlaps rise and fall in both orders, so the cheapest worker holding the most overlap is
  // found as the most overlap grows; w4 is ineligible with the most overlap; w1 and w5 tie.
  std::vector<WorkerScore> sc{{0, 2, 0, 0, 9, true},  {1, 5, 0, 0, 7, true},  {2, 0, 0, 0, 3, true},
                              {3, 5, 0, 0, 6, true},  {4, 8, 0, 0, 1, false}, {5, 1, 0, 0, 7, true},
                              {6, 3, 0, 0, 7.5, true}};
  for (int ineligible_pick = 0; ineligible_pick < 2; ++ineligible_pick) {
    for (uint64_t chosen = 0; chosen < sc.size(); ++chosen) {
      for (Steer steer : {Steer::kPolicy, Steer::kAffinity}) {
        const DecisionQuality want = assess_decision(sc, chosen, steer, 16, 200);
        for (bool reversed : {false, true}) {
          DecisionAssessor a(sc[chosen], steer, 16, 200);
          for (size_t k = 0; k < sc.size(); ++k) {
            const size_t i = reversed ? sc.size() - 1 - k : k;
            if (i != chosen) a.add(sc[i]);
          }
          const DecisionQuality got = a.finish();
          CAPTURE(chosen);
          CAPTURE(reversed);
          CHECK(got.predicted_cached_tokens == want.predicted_cached_tokens);
          CHECK(got.best_cached_tokens == want.best_cached_tokens);
          CHECK(got.avoidable_prefill_tokens == want.avoidable_prefill_tokens);
          CHECK(got.margin == want.margin);
          CHECK(got.ties == want.ties);
          CHECK(got.cause == want.cause);
        }
      }
    }
    sc[3].eligible = false;  // the second round: a chosen worker that is itself ineligible
  }
  // Spot checks of the expected values themselves (w3 now ineligible): w1 (overlap 5, cost 7) is
  // the cheapest eligible worker of the most overlap, and w5 alone costs what it costs.
  CHECK(assess_decision(sc, 1, Steer::kPolicy, 16, 200).ties == 1);
  CHECK(assess_decision(sc, 2, Steer::kPolicy, 16, 200).cause == NonMaxCause::kLoad);
  CHECK(assess_decision(sc, 0, Steer::kPolicy, 16, 200).cause == NonMaxCause::kPolicy);
}

TEST_CASE("staleness totals count each sign apart") {
  StalenessTotals t;
  t.add(64, 16);
  t.add(16, 48);
  t.add(32, 32);
  CHECK(t.requests == 3);
  CHECK(t.over_requests == 1);
  CHECK(t.over_tokens == 48);
  CHECK(t.under_requests == 1);
  CHECK(t.under_tokens == 32);
  CHECK(t.predicted_tokens == 112);
  CHECK(t.delivered_tokens == 96);
}

namespace {
KvEvent tier_event(KvEvent::Kind k, std::vector<uint64_t> hashes, kv::Tier t) {
  KvEvent e;
  e.kind = k;
  e.block_hashes = std::move(hashes);
  e.tier = t;
  return e;
}
// kv routing on KV events at 16-token blocks: the tier tests' router.
RouterConfig events_config() {
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  c.kv_events = true;
  return c;
}
}  // namespace

TEST_CASE("a worker's batch of KV events in one call leaves the index as the events one by one") {
  FakeClock clk;
  const RouterConfig c = events_config();
  ROUTER(one, c, clk, 2);
  ROUTER(batch, c, clk, 2);
  auto s = seq_of(9, 8);
  using K = KvEvent::Kind;
  // Runs on one tier, tier changes inside the batch, a removal and a clear between stores.
  const std::vector<KvEvent> w0 = {tier_event(K::kStored, {s.begin(), s.begin() + 4}, kv::Tier::kDevice),
                                   tier_event(K::kStored, {s.begin() + 4, s.begin() + 6}, kv::Tier::kDevice),
                                   tier_event(K::kStored, {s.begin(), s.begin() + 7}, kv::Tier::kHost),
                                   tier_event(K::kRemoved, {s[5]}, kv::Tier::kDevice),
                                   tier_event(K::kCleared, {}, kv::Tier::kHost),
                                   tier_event(K::kStored, {s.begin(), s.begin() + 3}, kv::Tier::kHost),
                                   tier_event(K::kStored, {s[3]}, kv::Tier::kDisk)};
  const std::vector<KvEvent> w1 = {tier_event(K::kStored, s, kv::Tier::kDisk),
                                   tier_event(K::kRemoved, {s[2]}, kv::Tier::kDisk),
                                   tier_event(K::kStored, {s.begin(), s.begin() + 2}, kv::Tier::kDevice)};
  for (const KvEvent& e : w0) one.apply_kv_event(0, e);
  for (const KvEvent& e : w1) one.apply_kv_event(1, e);
  batch.apply_kv_events(0, w0);
  batch.apply_kv_events(1, w1);
  batch.apply_kv_events(7, w1);  // an unknown worker: ignored
  auto explain = [&](Router& r) {
    RouteRequest q = req("", s, 8 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    p.fail(true);
    return p.explain();
  };
  const auto a = explain(one), b = explain(batch);
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(a[0].overlap_blocks == 5);  // 0-4 on the GPU (5 removed)
  CHECK(a[0].host_blocks == 0);     // the host run (0-2) is under the GPU's
  CHECK(a[1].overlap_blocks == 2);
  CHECK(a[1].disk_blocks == 0);  // disk continues at block 2, which it lost
  for (size_t w = 0; w < 2; ++w) {
    CHECK(a[w].overlap_blocks == b[w].overlap_blocks);
    CHECK(a[w].host_blocks == b[w].host_blocks);
    CHECK(a[w].disk_blocks == b[w].disk_blocks);
  }
  CHECK(one.loads().at(0).cached_blocks == batch.loads().at(0).cached_blocks);
}

TEST_CASE("tiers: per-tier overlap from events, tier-exclusive; a block on two tiers; removal and clear per tier") {
  FakeClock clk;
  const RouterConfig c = events_config();
  ROUTER(r, c, clk, 2);
  auto s = seq_of(7, 8);
  using K = KvEvent::Kind;
  // Worker 0: blocks 0-1 on GPU, 0-5 on host (0-1 on both), 6 on disk. Worker 1: 0-7 on disk.
  r.apply_kv_event(0, tier_event(K::kStored, {s.begin(), s.begin() + 2}, kv::Tier::kDevice));
  r.apply_kv_event(0, tier_event(K::kStored, {s.begin(), s.begin() + 6}, kv::Tier::kHost));
  r.apply_kv_event(0, tier_event(K::kStored, {s[6]}, kv::Tier::kDisk));
  r.apply_kv_event(1, tier_event(K::kStored, s, kv::Tier::kDisk));
  auto explain = [&] {
    RouteRequest q = req("", s, 8 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    p.fail(true);
    return p.explain();
  };
  auto e = explain();
  REQUIRE(e.size() == 2);
  CHECK(e[0].overlap_blocks == 2);
  CHECK(e[0].host_blocks == 4);  // blocks 2-5: 0-1 are counted on the GPU only
  CHECK(e[0].disk_blocks == 1);  // block 6 continues the host run
  CHECK(e[1].overlap_blocks == 0);
  CHECK(e[1].host_blocks == 0);
  CHECK(e[1].disk_blocks == 8);
  // credit w0 = 2 + 0.75 x 4 + 0.25 x 1 = 5.25; w1 = 0.25 x 8 = 2
  CHECK(e[0].prefill_blocks == doctest::Approx(8 - 5.25));
  CHECK(e[1].prefill_blocks == doctest::Approx(6));
  // Removing block 0 from the GPU keeps its host copy: the host run now starts at block 0.
  r.apply_kv_event(0, tier_event(K::kRemoved, {s[0]}, kv::Tier::kDevice));
  e = explain();
  CHECK(e[0].overlap_blocks == 0);
  CHECK(e[0].host_blocks == 6);
  CHECK(e[0].disk_blocks == 1);
  // Clearing the host tier leaves the GPU and disk tiers: disk continues at the device stop (0)
  // and lacks block 0, so worker 0 has no run at all.
  r.apply_kv_event(0, tier_event(K::kCleared, {}, kv::Tier::kHost));
  e = explain();
  CHECK(e[0].overlap_blocks == 0);
  CHECK(e[0].host_blocks == 0);
  CHECK(e[0].disk_blocks == 0);
  CHECK(e[1].disk_blocks == 8);
  // Removing the worker drops every tier.
  r.remove_worker(1);
  REQUIRE(!r.add_worker(WorkerSpec{1, 0, 0}));
  e = explain();
  CHECK(e[1].disk_blocks == 0);
}

TEST_CASE("tiers: hit weights in the cost; a host hit worth 0.75 flips a choice; weights 0 are GPU-only credit") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  c.kv_events = true;
  auto s = seq_of(9, 10);
  using K = KvEvent::Kind;
  // Worker 0 holds `gpu` blocks on GPU; worker 1 holds all 10 on host and runs a 4-block request
  // past its prefill (decode load only).
  auto setup = [&](Router& r, long gpu) {
    r.apply_kv_event(0, tier_event(K::kStored, {s.begin(), s.begin() + gpu}, kv::Tier::kDevice));
    r.apply_kv_event(1, tier_event(K::kStored, s, kv::Tier::kHost));
    RouteRequest load;
    load.worker = 1;
    load.tokens = 4 * 16;
    auto p = place_ok(r, load);
    p.commit();
    p.first_token();
    return p;
  };
  // Tier credit: w0 = (10 - 4) + 10 = 16; w1 = (10 - 0.75 x 10) + (4 + 10) = 16.5: the GPU run wins.
  {
    ROUTER(r, c, clk, 2);
    auto held = setup(r, 4);
    RouteRequest q = req("", s, 10 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    CHECK(p.explain()[0].cost == doctest::Approx(16));
    CHECK(p.explain()[1].cost == doctest::Approx(2.5 + 14));
    CHECK(p.worker() == 0);
  }
  // Worker 0 with 2 GPU blocks: w0 = 8 + 10 = 18; w1 = 16.5: the host hits win.
  {
    ROUTER(r, c, clk, 2);
    auto held = setup(r, 2);
    CHECK(place_ok(r, req("", s, 10 * 16)).worker() == 1);
  }
  // Weights 0: the same state routes on GPU hits alone, with exactly the GPU-only costs (the
  // lower-tier overlaps are still explained).
  RouterConfig g = c;
  g.host_cache_hit_weight = 0;
  g.disk_cache_hit_weight = 0;
  {
    ROUTER(r, g, clk, 2);
    auto held = setup(r, 2);
    RouteRequest q = req("", s, 10 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    CHECK(p.worker() == 0);
    CHECK(p.explain()[1].host_blocks == 10);
    CHECK(p.explain()[0].cost == 18.0);
    CHECK(p.explain()[1].cost == 24.0);
  }
  // Weight out of range: usage error naming the flag.
  RouterConfig bad = c;
  bad.host_cache_hit_weight = 1.5;
  REQUIRE(bad.validate());
  CHECK(bad.validate()->message.find("--router-host-cache-hit-weight") != std::string::npos);
}

TEST_CASE("soft kv: a busy bound worker is kept while its cached blocks outweigh the load difference") {
  // SPEC 2.3: under kv routing the move off a busy bound worker uses the cost model.
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.affinity_ttl_secs = 300;
  c.affinity_mode = AffinityMode::kSoft;
  c.active_requests_threshold = 1;
  c.block_size = 16;
  c.kv_events = true;
  ROUTER(r, c, clk, 2);
  auto s = seq_of(500, 10);
  auto first = place_ok(r, req("s", s, 10 * 16));
  first.commit();
  first.first_token();
  first.finish();
  const uint64_t bound = first.worker(), other = 1 - bound;
  r.apply_kv_event(bound, tier_event(KvEvent::Kind::kStored, s, kv::Tier::kDevice));
  // Another session's decode on the bound worker makes it busy: `blocks` past their prefill.
  auto load = [&](uint64_t blocks) {
    RouteRequest q;
    q.worker = bound;
    q.tokens = blocks * 16;
    auto p = place_ok(r, q);
    p.commit();
    p.first_token();
    return p;
  };
  {
    // bound: prefill 0 + decode (4 + 10) = 14 against other: 10 + 10 = 20: kept.
    auto held = load(4);
    auto p = place_ok(r, req("s", s, 10 * 16));
    CHECK(p.worker() == bound);
    CHECK(p.binding() == BindingOutcome::kHit);
    p.finish();
    // The router queue's request waits for it, as for a pinned worker.
    RouteRequest q = req("s", s, 10 * 16);
    q.refuse_busy = true;
    uint64_t busy_worker = 99;
    q.busy_worker = &busy_worker;
    auto refused = r.place(q);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().exit_code == kPlacePinnedBusy);
    CHECK(busy_worker == bound);
  }
  {
    // bound: 0 + (12 + 10) = 22 against 20: the load outweighs the 10 cached blocks; it moves.
    auto held = load(12);
    auto p = place_ok(r, req("s", s, 10 * 16));
    CHECK(p.worker() == other);
    CHECK(p.binding() == BindingOutcome::kRebound);
    CHECK(p.rebind_reason() == RebindReason::kBusy);
  }
}

TEST_CASE("tiers without events: a routed block is predicted on the host tier for the host TTL") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  c.kv_ttl_secs = 10;
  c.host_ttl_secs = 100;
  ROUTER(r, c, clk, 2);
  auto s = seq_of(3, 6);
  RouteRequest first;
  first.worker = 1;
  first.sequence_hashes = s;
  first.tokens = 6 * 16;
  place_ok(r, first).commit();
  auto explain = [&] {
    RouteRequest q = req("", s, 6 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    p.fail(true);
    return p.explain()[1];
  };
  auto e = explain();
  CHECK(e.overlap_blocks == 6);  // on the GPU for 10 s: counted there only
  CHECK(e.host_blocks == 0);
  clk.advance(50'000);
  e = explain();
  CHECK(e.overlap_blocks == 0);  // past the GPU TTL, within the host TTL
  CHECK(e.host_blocks == 6);
  clk.advance(60'000);
  e = explain();
  CHECK(e.host_blocks == 0);
  // A host TTL not above the GPU TTL, or with KV events, is a usage error.
  RouterConfig bad = c;
  bad.host_ttl_secs = 10;
  CHECK(bad.validate());
  bad = c;
  bad.kv_events = true;
  CHECK(bad.validate());
}

TEST_CASE("shared pool: blocks past a worker's GPU run are credited at the multiplier; none = no credit") {
  FakeClock clk;
  RouterConfig c;
  c.mode = Mode::kKv;
  c.block_size = 16;
  c.kv_events = true;
  c.shared_cache_type = SharedCacheType::kEvents;
  auto s = seq_of(11, 4);
  using K = KvEvent::Kind;
  // A 4-block request, multiplier 0.5, the pool holding blocks 0-3 (stored by worker 1's engine).
  // W0 holds 2 on GPU and runs a 1-block request past its prefill; W1 holds none on GPU.
  auto setup = [&](Router& r) {
    r.apply_kv_event(0, tier_event(K::kStored, {s.begin(), s.begin() + 2}, kv::Tier::kDevice));
    r.apply_kv_event(1, tier_event(K::kStored, s, kv::Tier::kShared));
    RouteRequest load;
    load.worker = 0;
    load.tokens = 16;
    auto p = place_ok(r, load);
    p.commit();
    p.first_token();
    return p;
  };
  {
    ROUTER(r, c, clk, 2);
    auto held = setup(r);
    RouteRequest q = req("", s, 4 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    // W0: credit 2 + 0.5 x 2 (blocks 2-3) = 3, cost 1 + (1 + 4) = 6; W1: credit 0.5 x 4 = 2, cost 2 + 4 = 6.
    CHECK(p.explain()[0].shared_blocks == 2);
    CHECK(p.explain()[1].shared_blocks == 4);
    CHECK(p.explain()[0].cost == doctest::Approx(6));
    CHECK(p.explain()[1].cost == doctest::Approx(6));
    // A removal from the pool by any worker drops the block for everyone; a worker's clear does not.
    p.fail(true);
    r.apply_kv_event(0, tier_event(K::kRemoved, {s[3]}, kv::Tier::kShared));
    r.apply_kv_event(1, tier_event(K::kCleared, {}, kv::Tier::kShared));
    auto p2 = place_ok(r, q);
    CHECK(p2.explain()[1].shared_blocks == 3);
    CHECK(p2.explain()[0].shared_blocks == 1);
  }
  // The multiplier from the config; none ignores pool events.
  RouterConfig m = c;
  m.shared_cache_multiplier = 1.0;
  {
    ROUTER(r, m, clk, 2);
    auto held = setup(r);
    CHECK(place_ok(r, req("", s, 4 * 16)).worker() == 1);  // W0 0 + 5 = 5 > W1 0 + 4
  }
  RouterConfig none = c;
  none.shared_cache_type = SharedCacheType::kNone;
  {
    ROUTER(r, none, clk, 2);
    auto held = setup(r);
    RouteRequest q = req("", s, 4 * 16);
    q.explain = true;
    auto p = place_ok(r, q);
    CHECK(p.explain()[1].shared_blocks == 0);
    CHECK(p.worker() == 0);  // W0 2 + 5 = 7 < W1 4 + 4 = 8
  }
  // Half configurations are usage errors.
  none.shared_cache_multiplier = 0.5;
  CHECK(none.validate());
  RouterConfig no_events = c;
  no_events.kv_events = false;
  CHECK(no_events.validate());
  CHECK(c.shared_multiplier() == 0.5);
}
