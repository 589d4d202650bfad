// Unit tests of the ThunderAgent admission controller (SPEC 9) on explicit virtual time.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/route/admission.h"

using namespace dyn;
using namespace dyn::route;

namespace {

AdmissionConfig ta() {
  AdmissionConfig c;
  c.mode = AdmissionMode::kThunderAgent;
  return c;
}

// Two workers of 10,000 tokens: resume bound 0.85 -> 8,500, pause threshold 9,500, target 8,000.
std::vector<AdmissionWorker> two() { return {{0, 10000}, {1, 10000}}; }

const ProgramView* find(const std::vector<ProgramView>& v, const std::string& id) {
  for (auto& p : v)
    if (p.program_id == id) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("admission config: SPEC 9 defaults and Dynamo's constraints") {
  AdmissionConfig c;
  CHECK(c.mode == AdmissionMode::kNone);
  CHECK(c.pause_threshold == 0.95);
  CHECK(c.pause_target == 0.80);
  CHECK(c.soft_demote_threshold == 0.80);
  CHECK(c.resume_hysteresis == 0.10);
  CHECK(c.resume_timeout_s == 1800.0);
  CHECK(c.scheduler_interval_s == 5.0);
  CHECK(c.acting_token_weight == 1.0);
  CHECK(c.acting_decay_tau_s == 1.0);
  CHECK(c.buffer_tokens_per_program == 100);
  CHECK(c.validate().empty());
  c.pause_target = 0.96;
  CHECK(c.validate() == "--pause-target must be in [0, --pause-threshold], got 0.96");
  c = AdmissionConfig{};
  c.pause_threshold = 1.5;
  CHECK(c.validate() == "--pause-threshold must be in [0, 1], got 1.5");
  c = AdmissionConfig{};
  c.scheduler_interval_s = 0;
  CHECK(!c.validate().empty());
  c.mode = AdmissionMode::kThunderAgent;
  CHECK_THROWS_AS(AdmissionController(c, two()), Fatal);
  CHECK(parse_admission_mode("thunderagent") == AdmissionMode::kThunderAgent);
  CHECK(parse_admission_mode("none") == AdmissionMode::kNone);
  CHECK(!parse_admission_mode("ThunderAgent").has_value());
}

TEST_CASE("admission none admits everything and leaves placement to the router") {
  AdmissionController a(AdmissionConfig{}, two());
  auto d = a.admit("s", "", 1'000'000, 0);
  CHECK(d.admitted);
  CHECK(d.worker == -1);
  CHECK(a.tick(5000).released.empty());
  CHECK(a.programs(0).empty());
}

TEST_CASE("new programs go to the least-used worker with room; active ones stay put") {
  AdmissionController a(ta(), two());
  auto d1 = a.admit("a", "", 3000, 0);
  REQUIRE(d1.admitted);
  CHECK(d1.worker == 0);  // tie -> lowest id
  CHECK(d1.reason == "new");
  auto d2 = a.admit("b", "", 1000, 0);
  CHECK(d2.worker == 1);  // worker 0 is more used
  a.on_response("a", 3000, 200, 100);
  auto d3 = a.admit("a", "", 3500, 1000);
  CHECK(d3.admitted);
  CHECK(d3.worker == 0);
  CHECK(d3.reason == "active");
  auto v = a.programs(1000);
  CHECK(find(v, "a")->step_count == 2);
  CHECK(find(v, "a")->token_total == 3500);  // max(3200 from usage, 3500 estimate)
  CHECK(find(v, "a")->status == ProgramStatus::kReasoning);
}

TEST_CASE("a new program without room waits and is released by a tick once room appears") {
  AdmissionController a(ta(), {{0, 10000}});
  REQUIRE(a.admit("big", "", 8000, 0).admitted);  // 8,100 <= 8,500
  auto w = a.admit("late", "", 1000, 10);         // 9,200 > 8,500: no room
  CHECK(!w.admitted);
  CHECK(w.reason == "no_room");
  CHECK(w.ticket != 0);
  // A third newcomer that would fit must not overtake the waiting one.
  auto w2 = a.admit("tiny", "", 10, 20);
  CHECK(!w2.admitted);
  CHECK(w2.reason == "behind_paused");
  // Resume goes smallest first within a class: "tiny" (110) fits the 400 tokens left now.
  auto r0 = a.tick(5000);
  REQUIRE(r0.released.size() == 1);
  CHECK(r0.released[0].program_id == "tiny");
  CHECK(r0.released[0].ticket == w2.ticket);
  // "big" finishes its turn; 10 s later its ACTING tokens have decayed to ~0 on the resume side.
  a.on_response("big", 8000, 100, 6000);
  auto r = a.tick(16000);
  REQUIRE(r.released.size() == 1);
  CHECK(r.released[0].program_id == "late");
  CHECK(r.released[0].ticket == w.ticket);
  CHECK(r.released[0].worker == 0);
  CHECK(r.released[0].waited_ms == doctest::Approx(15990));
  CHECK(!r.released[0].forced);
  CHECK(r.released[0].priority_jump_s == 1.0);  // resume boost
  // Pause side now: big 8,100 (ACTING weight 1) + late 1,100 + tiny 110 = 9,310 < 9,500: no pause.
  CHECK(r.paused.empty());
  CHECK(a.stats().released == 2);
}

TEST_CASE("over the pause threshold the smallest ACTING programs pause down to the target") {
  AdmissionController a(ta(), {{0, 10000}});
  // Four programs admitted while small, then their contexts grow (usage reports).
  for (auto id : {"p1", "p2", "p3", "p4"}) REQUIRE(a.admit(id, "", 100, 0).admitted);
  a.on_response("p1", 1000, 0, 100);
  a.on_response("p2", 2000, 0, 100);
  a.on_response("p3", 3000, 0, 100);
  a.on_response("p4", 3500, 0, 100);
  // Used = 9,500 + 400 = 9,900 > 9,500. Pause smallest ACTING until <= 8,000:
  // p1 (-1,100 -> 8,800), p2 (-2,100 -> 6,700).
  auto r = a.tick(5000);
  CHECK(r.paused == std::vector<std::string>{"p1", "p2"});
  CHECK(r.marked.empty());
  CHECK(a.utilization(0, 5000) == doctest::Approx(0.67));
  auto v = a.programs(5000);
  CHECK(find(v, "p1")->lifecycle == ProgramLifecycle::kPaused);
  CHECK(find(v, "p1")->worker == 0);  // last worker shown while paused
  CHECK(find(v, "p3")->lifecycle == ProgramLifecycle::kActive);
  // The paused program's next request waits.
  auto d = a.admit("p2", "", 2100, 6000);
  CHECK(!d.admitted);
  CHECK(d.reason == "paused");
  // p3 and p4 ACTING since 100 ms: at 20 s they weigh ~0 on the resume side -> p2 resumes
  // (REASONING with more than one step: first class). p1 (ACTING, no request) would fit the
  // resume side too, but on the pause side 3,100 + 3,600 + 2,200 + 1,100 = 10,000 > 9,500: it
  // stays paused rather than being resumed and paused again in the same tick.
  auto r2 = a.tick(20000);
  CHECK(r2.resumed == std::vector<std::string>{"p2"});
  REQUIRE(r2.released.size() == 1);
  CHECK(r2.released[0].program_id == "p2");
  CHECK(r2.released[0].waited_ms == doctest::Approx(14000));
  CHECK(r2.paused.empty());  // 8,900 <= 9,500
  auto v2 = a.programs(20000);
  CHECK(find(v2, "p2")->paused_ms_total == doctest::Approx(15000));
  CHECK(find(v2, "p1")->lifecycle == ProgramLifecycle::kPaused);
  CHECK(find(v2, "p1")->pause_count == 1);
  // p4's session ends: p1 fits on both sides now and resumes without a request.
  a.release_program("p4", 21000);
  auto r3 = a.tick(25000);
  CHECK(r3.resumed == std::vector<std::string>{"p1"});
  CHECK(r3.released.empty());
}

TEST_CASE("with nothing ACTING, the smallest REASONING program is marked and pauses at its tool boundary") {
  AdmissionController a(ta(), {{0, 10000}});
  REQUIRE(a.admit("x", "", 100, 0).admitted);
  REQUIRE(a.admit("y", "", 100, 0).admitted);
  // Both still REASONING but their prompts turn out large (a later request of each reports it).
  a.on_response("x", 4000, 0, 10);
  a.on_response("y", 5600, 0, 10);
  REQUIRE(a.admit("x", "", 4000, 20).admitted);
  REQUIRE(a.admit("y", "", 5600, 20).admitted);
  auto r = a.tick(5000);  // 9,800 > 9,500, none ACTING
  CHECK(r.paused.empty());
  CHECK(r.marked == std::vector<std::string>{"x"});  // 9,800 - 4,100 = 5,700 <= 8,000: one is enough
  CHECK(find(a.programs(5000), "x")->marked_for_pause);
  CHECK(a.tick(10000).marked.empty());  // already marked: counted as leaving, not re-marked
  a.on_response("x", 4000, 50, 11000);  // tool boundary
  auto v = a.programs(11000);
  CHECK(find(v, "x")->lifecycle == ProgramLifecycle::kPaused);
  CHECK(!find(v, "x")->marked_for_pause);
  CHECK(find(v, "y")->lifecycle == ProgramLifecycle::kActive);
}

TEST_CASE("resume packs best-fit-decreasing and prefers the previous worker") {
  AdmissionConfig c = ta();
  AdmissionController a(c, {{0, 10000}, {1, 10000}});
  // Fill worker 0 with a REASONING program so its headroom is 8,500 - 5,100 = 3,400;
  // worker 1 empty: 8,500.
  REQUIRE(a.admit("r0", "", 5000, 0).admitted);
  // Three waiting newcomers, queued because an unplaceable 9,000-token program waits first.
  CHECK(!a.admit("huge", "", 9000, 0).admitted);
  CHECK(!a.admit("n1", "", 3000, 1).admitted);
  CHECK(!a.admit("n2", "", 2000, 2).admitted);
  CHECK(!a.admit("n3", "", 1000, 3).admitted);
  auto r = a.tick(5000);
  // "huge" (new, 9,100) comes first in class 1 order? No: smallest first within the class, so
  // n3, n2, n1 are selected (1,100 + 2,100 + 3,100 = 6,300 of 11,900) and then huge does not fit.
  // BFD: n1 (3,100) -> tightest fit is worker 0 (3,400); n2 (2,100) -> worker 1; n3 (1,100) ->
  // worker 0 now has 300, so worker 1.
  std::map<std::string, int> placed;
  for (auto& rel : r.released) placed[rel.program_id] = rel.worker;
  CHECK(placed == std::map<std::string, int>{{"n1", 0}, {"n2", 1}, {"n3", 1}});
  CHECK(find(a.programs(5000), "huge")->lifecycle == ProgramLifecycle::kPaused);
}

TEST_CASE("resume priority: waiting REASONING (step > 1) before new before paused ACTING") {
  AdmissionController a(ta(), {{0, 10000}});
  for (auto id : {"old", "idle"}) REQUIRE(a.admit(id, "", 100, 0).admitted);
  a.on_response("old", 4000, 0, 10);
  a.on_response("idle", 1000, 0, 10);
  // 3 s later both have decayed on the resume side (~600 + ~230), so a big newcomer fits.
  REQUIRE(a.admit("hog", "", 4500, 3000).admitted);
  a.on_response("hog", 4500, 0, 3100);
  REQUIRE(a.admit("hog", "", 8000, 3200).admitted);  // ACTIVE: admitted on its worker
  // Pause side: 4,100 + 1,100 + 8,100 = 13,300 > 9,500: pause idle, old (-> 8,100), still above
  // the 8,000 target, so the REASONING hog is marked too.
  auto r = a.tick(5000);
  CHECK(r.paused == std::vector<std::string>{"idle", "old"});
  CHECK(r.marked == std::vector<std::string>{"hog"});
  CHECK(!a.admit("old", "", 4000, 6000).admitted);   // REASONING, step 2
  CHECK(!a.admit("fresh", "", 100, 6000).admitted);  // new, behind paused
  a.on_response("hog", 8000, 0, 7000);               // tool boundary: the marked hog pauses
  CHECK(find(a.programs(7000), "hog")->lifecycle == ProgramLifecycle::kPaused);
  a.release_program("hog", 7000);  // session_final
  auto r2 = a.tick(10000);
  // Headroom 8,500: old (4,100) first, then fresh (200), then idle (1,100 ACTING).
  CHECK(r2.resumed == std::vector<std::string>{"fresh", "idle", "old"});
  REQUIRE(r2.released.size() == 2);
  CHECK(r2.released[0].program_id == "old");  // largest first in the packing pass
  CHECK(r2.released[1].program_id == "fresh");
  CHECK(find(a.programs(10000), "hog") == nullptr);
}

TEST_CASE("a request waits at most resume_timeout_s, then goes to the worker with most headroom") {
  AdmissionConfig c = ta();
  c.resume_timeout_s = 60;
  AdmissionController a(c, {{0, 10000}, {1, 20000}});
  REQUIRE(a.admit("w0", "", 8000, 0).admitted);   // worker 0 (tie, lowest id)
  REQUIRE(a.admit("w1", "", 16000, 0).admitted);  // only worker 1 has room
  auto d = a.admit("starved", "", 5000, 1000);
  CHECK(!d.admitted);
  CHECK(a.tick(30000).released.empty());
  auto r = a.tick(61000);
  REQUIRE(r.released.size() == 1);
  CHECK(r.released[0].forced);
  CHECK(r.released[0].worker == 1);  // 20,000 - 16,100 = 3,900 > 10,000 - 8,100 = 1,900
  CHECK(r.released[0].waited_ms == doctest::Approx(60000));
  CHECK(a.stats().forced == 1);
}

TEST_CASE("a stale worker assignment is re-placed, never failed") {
  AdmissionController a(ta(), two());
  REQUIRE(a.admit("s", "", 100, 0).admitted);
  REQUIRE(a.admit("t", "", 100, 0).admitted);  // worker 1
  a.on_response("t", 100, 10, 10);
  a.set_workers({{0, 10000}, {2, 10000}});  // worker 1 left
  auto d = a.admit("t", "", 200, 20);
  CHECK(d.admitted);
  CHECK(d.reassigned);
  CHECK(d.reason == "reassigned");
  CHECK(d.worker == 2);  // most headroom among live workers
  a.set_workers({});
  auto e = a.admit("u", "", 100, 30);
  CHECK(e.admitted);
  CHECK(e.worker == -1);
}

TEST_CASE("soft demotion between 0.80 and 0.95 lowers queue priority") {
  AdmissionController a(ta(), {{0, 10000}});
  REQUIRE(a.admit("d", "", 8000, 0).admitted);  // 8,100 / 10,000 = 0.81
  auto r = a.tick(5000);
  CHECK(r.demoted == std::vector<std::string>{"d"});
  a.on_response("d", 8000, 10, 5100);
  auto d = a.admit("d", "", 8010, 5200);
  CHECK(d.priority_jump_s == -2.0);
  a.on_response("d", 100, 10, 5300);
  CHECK(a.tick(10000).demoted.empty());
  CHECK(a.admit("d", "", 110, 10100).priority_jump_s == 0.0);
}

TEST_CASE("acting tokens decay on the resume side only") {
  AdmissionController a(ta(), {{0, 10000}});
  REQUIRE(a.admit("z", "", 100, 0).admitted);
  a.on_response("z", 6000, 0, 1000);
  auto j0 = a.snapshot_json(1000);
  CHECK(j0["workers"][0]["used_tokens"] == 6100);
  CHECK(j0["workers"][0]["resume_used_tokens"] == 6100);
  auto j1 = a.snapshot_json(2000);  // one tau later: half
  CHECK(j1["workers"][0]["used_tokens"] == 6100);
  CHECK(j1["workers"][0]["resume_used_tokens"] == 3100);
  // So a 5,000-token newcomer fits (3,100... at 3 s: 750+100 + 5,100 <= 8,500).
  CHECK(a.admit("n", "", 5000, 3000).admitted);
}

TEST_CASE("snapshot lists state, worker, tokens and time paused, sorted by program") {
  AdmissionController a(ta(), {{0, 1000}});
  REQUIRE(a.admit("b", "root", 500, 0).admitted);
  CHECK(!a.admit("a", "", 600, 100).admitted);
  auto j = a.snapshot_json(1100);
  CHECK(j["admission"] == "thunderagent");
  REQUIRE(j["programs"].size() == 2);
  auto& pa = j["programs"][0];
  CHECK(pa["program_id"] == "a");
  CHECK(pa["state"] == "paused");
  CHECK(pa["status"] == "reasoning");
  CHECK(pa["worker"].is_null());
  CHECK(pa["token_total"] == 600);
  CHECK(pa["waiting_requests"] == 1);
  CHECK(pa["paused_for_ms"] == 1000.0);
  auto& pb = j["programs"][1];
  CHECK(pb["parent_session_id"] == "root");
  CHECK(pb["state"] == "active");
  CHECK(pb["worker"] == 0);
  CHECK(j["stats"]["waited"] == 1);
}

TEST_CASE("the same calls give the same decisions (deterministic on virtual time)") {
  auto run = [] {
    AdmissionController a(ta(), {{0, 20000}, {1, 20000}, {2, 20000}});
    Json log = Json::array();
    for (int step = 0; step < 40; ++step) {
      double t = step * 1000.0;
      for (int s = 0; s < 12; ++s) {
        std::string id = "s" + std::to_string(s);
        if ((step + s) % 3 == 0) {
          auto d = a.admit(id, "", static_cast<uint64_t>(500 + 300 * step + 97 * s), t);
          log.push_back({id, d.admitted, d.worker, d.reason});
        } else if ((step + s) % 3 == 1) {
          a.on_response(id, static_cast<uint64_t>(500 + 300 * step + 97 * s), 50, t + 500);
        }
      }
      if (step % 5 == 0) {
        auto r = a.tick(t + 900);
        for (auto& rel : r.released) log.push_back({rel.program_id, rel.worker, rel.waited_ms});
        log.push_back(r.paused);
      }
    }
    log.push_back(a.snapshot_json(50000));
    return log.dump();
  };
  auto first = run();
  CHECK(first == run());
  CHECK(first.find("\"paused\"") != std::string::npos);  // the scenario does exercise pausing
}

TEST_CASE("admit_blocking waits on the tick thread without polling, and shutdown wakes waiters") {
  AdmissionConfig c = ta();
  c.scheduler_interval_s = 0.02;
  AdmissionController a(c, {{0, 1000}});
  FakeClock clock(0);
  double waited = -1;
  auto d0 = a.admit_blocking("first", "", 700, clock, &waited);
  REQUIRE(d0.admitted);
  CHECK(waited == 0);
  std::atomic<bool> done{false};
  AdmitDecision got;
  double got_wait = 0;
  std::thread waiter([&] {
    got = a.admit_blocking("second", "", 500, clock, &got_wait);
    done = true;
  });
  {
    AdmissionTicker ticker(a, clock);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(!done.load());  // no room: still blocked after several ticks
    clock.set(4000);
    a.on_response("first", 700, 0, 1000);  // ACTING since 1 s; 1/8 left by 4 s
    for (int i = 0; i < 200 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  waiter.join();
  CHECK(done.load());
  CHECK(got.admitted);
  CHECK(got.worker == 0);
  CHECK(got.reason == "resumed");
  CHECK(got_wait == doctest::Approx(4000));

  // shutdown releases a blocked waiter with admitted == false
  AdmissionController b(c, {{0, 1000}});
  REQUIRE(b.admit("x", "", 700, 0).admitted);
  std::atomic<bool> back{false};
  AdmitDecision out;
  std::thread t2([&] {
    out = b.admit_blocking("y", "", 900, clock, nullptr);
    back = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(!back.load());
  b.shutdown();
  t2.join();
  CHECK(!out.admitted);
}

TEST_CASE("a waiting request withdrawn before its release is never released; one released already is not withdrawn") {
  AdmissionController a(ta(), {{0, 10000}});
  REQUIRE(a.admit("big", "", 8000, 0).admitted);
  auto w = a.admit("late", "", 1000, 10);
  REQUIRE(!w.admitted);
  CHECK(find(a.programs(10), "late")->waiting_requests == 1);
  CHECK(a.withdraw("late", w.ticket, 50));
  CHECK_FALSE(a.withdraw("late", w.ticket, 60));  // once
  const ProgramView* late = find(a.programs(50), "late");
  REQUIRE(late);
  CHECK(late->waiting_requests == 0);
  CHECK(late->status == ProgramStatus::kActing);  // between turns: its client left
  a.on_response("big", 8000, 100, 100);
  for (const AdmissionRelease& r : a.tick(20000).released) CHECK(r.ticket != w.ticket);
  // Released by a tick first: withdraw says no (the request counts in flight; its end is reported).
  REQUIRE(a.admit("big", "", 8000, 20000).admitted);
  auto w2 = a.admit("newcomer", "", 1000, 20000);
  REQUIRE(!w2.admitted);
  a.on_response("big", 10, 10, 20100);
  auto r = a.tick(40000);
  REQUIRE(r.released.size() == 1);
  CHECK(r.released[0].ticket == w2.ticket);
  CHECK_FALSE(a.withdraw("newcomer", w2.ticket, 40000));
  CHECK_FALSE(a.withdraw("nobody", 12345, 40000));
}

TEST_CASE("harness tool events: ACTING from tool_start to tool_end, and a marked program pauses at tool_start") {
  AdmissionController a(ta(), two());
  REQUIRE(a.admit("s", "", 1000, 0).admitted);
  CHECK(!a.on_tool_event("unknown", true, 5));
  a.on_response("s", 1000, 50, 10);  // inferred boundary: ACTING
  CHECK(find(a.programs(10), "s")->status == ProgramStatus::kActing);
  CHECK(a.on_tool_event("s", true, 12));
  CHECK(a.on_tool_event("s", true, 13));  // a second tool in parallel
  auto v = a.programs(14);
  CHECK(find(v, "s")->status == ProgramStatus::kActing);
  CHECK(find(v, "s")->tools_running == 2);
  CHECK(a.on_tool_event("s", false, 20));
  CHECK(find(a.programs(20), "s")->status == ProgramStatus::kActing);  // one still runs
  CHECK(a.on_tool_event("s", false, 30));
  // Its tools returned: the next request is due, so it is no longer a pause candidate.
  CHECK(find(a.programs(30), "s")->status == ProgramStatus::kReasoning);
  CHECK(find(a.programs(30), "s")->tools_running == 0);
  // A lost tool_end: the next request clears the count.
  CHECK(a.on_tool_event("s", true, 40));
  REQUIRE(a.admit("s", "", 1100, 50).admitted);
  CHECK(find(a.programs(50), "s")->tools_running == 0);
  CHECK(find(a.programs(50), "s")->status == ProgramStatus::kReasoning);

  // Tools that returned leave REASONING programs; under pressure the smallest is marked, and
  // pauses at the next tool_start: a tool boundary the response's end no longer shows.
  AdmissionController b(ta(), {{0, 10000}});
  REQUIRE(b.admit("x", "", 100, 0).admitted);  // small prompts; their usage turns out large
  REQUIRE(b.admit("y", "", 100, 0).admitted);
  b.on_response("x", 4000, 0, 10);
  b.on_response("y", 5600, 0, 10);
  for (const char* p : {"x", "y"}) {
    CHECK(b.on_tool_event(p, true, 12));
    CHECK(b.on_tool_event(p, false, 15));
  }
  REQUIRE(b.tick(5000).marked == std::vector<std::string>{"x"});  // 9,800 > 9,500, none ACTING
  CHECK(find(b.programs(5000), "x")->lifecycle == ProgramLifecycle::kActive);
  CHECK(b.on_tool_event("x", true, 6000));
  CHECK(find(b.programs(6000), "x")->lifecycle == ProgramLifecycle::kPaused);
  CHECK(find(b.programs(6000), "y")->lifecycle == ProgramLifecycle::kActive);
}

TEST_CASE("harness tool events are ignored without admission") {
  AdmissionController a(AdmissionConfig{}, two());
  CHECK(!a.on_tool_event("s", true, 0));
}
