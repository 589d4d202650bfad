// Unit tests of the router queue (SPEC 3.4): each policy's order on hand-made queues, ties, the
// starvation bound, the DRR quantum, lanes, policy files and priority resolution.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/route/priority.h"
#include "dyn/route/queue.h"

using namespace dyn;
using namespace dyn::route;

namespace {

PolicyClass cls(const std::string& name, QueuePolicy p, uint64_t quantum = 4096, double deadline_ms = 0) {
  PolicyClass c;
  c.name = name;
  c.policy = p;
  c.quantum = quantum;
  c.deadline_ms = deadline_ms;
  return c;
}

QueueItem item(uint64_t id, double arrival_ms, int32_t priority = 0, uint32_t tier = 0, uint64_t cost = 100,
               size_t c = 0, std::string session = "") {
  QueueItem it;
  it.id = id;
  it.arrival_ms = arrival_ms;
  it.priority = priority;
  it.strict_priority = tier;
  it.cost = cost;
  it.class_index = c;
  it.session = std::move(session);
  return it;
}

auto any = [](std::optional<uint64_t>) { return true; };

/// Pops everything (every lane free): the ids in dispatch order.
std::vector<uint64_t> drain(PolicyQueue& q) {
  std::vector<uint64_t> out;
  while (auto it = q.pop(any)) out.push_back(it->id);
  return out;
}

}  // namespace

TEST_CASE("fcfs: arrival order; a priority moves a request that many seconds earlier; ties by arrival") {
  PolicyQueue q({cls("c", QueuePolicy::kFcfs)});
  q.push(item(1, 0));
  q.push(item(2, 1000));
  q.push(item(3, 2000, /*priority=*/5));   // jumps 5 s: before 1 and 2
  q.push(item(4, 3000, /*priority=*/-9));  // negative counts as 0: stays behind
  q.push(item(5, 1000));                   // same key as 2: the earlier enqueue first
  CHECK(drain(q) == std::vector<uint64_t>{3, 1, 2, 5, 4});
}

TEST_CASE("fcfs starvation bound: only requests arriving less than `priority` seconds later overtake") {
  PolicyQueue q({cls("c", QueuePolicy::kFcfs)});
  q.push(item(1, 0));        // low priority, first
  q.push(item(2, 2999, 3));  // arrives 2.999 s later with 3 s of jump: overtakes
  q.push(item(3, 3000, 3));  // exactly 3 s later: ties, the earlier enqueue wins
  q.push(item(4, 3001, 3));  // later than the bound: behind
  CHECK(drain(q) == std::vector<uint64_t>{2, 1, 3, 4});
}

TEST_CASE("strict tiers come before any score; edf ignores them") {
  PolicyQueue q({cls("c", QueuePolicy::kFcfs)});
  q.push(item(1, 0, /*priority=*/1000));
  q.push(item(2, 5000, 0, /*tier=*/1));
  q.push(item(3, 9000, 0, /*tier=*/2));
  CHECK(drain(q) == std::vector<uint64_t>{3, 2, 1});

  PolicyQueue e({cls("e", QueuePolicy::kEdf, 4096, /*deadline_ms=*/500)});
  e.push(item(1, 100, 0, /*tier=*/5));
  e.push(item(2, 0, 0, 0));
  e.push(item(3, 0, 0, 9));  // same deadline as 2: enqueue order
  CHECK(drain(e) == std::vector<uint64_t>{2, 3, 1});
}

TEST_CASE("wspt: (1 + priority) / cost, short and important first") {
  PolicyQueue q({cls("c", QueuePolicy::kWspt)});
  q.push(item(1, 0, 0, 0, /*cost=*/1000));  // 0.001
  q.push(item(2, 1, 0, 0, 100));            // 0.01
  q.push(item(3, 2, 9, 0, 1000));           // 0.01: ties with 2, later enqueue
  q.push(item(4, 3, 0, 0, 0));              // cost clamps to 1: 1.0
  CHECK(drain(q) == std::vector<uint64_t>{4, 2, 3, 1});
}

TEST_CASE("edf: earliest deadline = arrival + the class deadline (the queue limit when 0)") {
  PolicyQueue q({cls("c", QueuePolicy::kEdf)}, /*default_deadline_ms=*/1000);
  q.push(item(1, 500, 100));
  q.push(item(2, 0));
  q.push(item(3, 499));
  CHECK(drain(q) == std::vector<uint64_t>{2, 3, 1});
}

TEST_CASE("session_las: least attained service first, snapshot at enqueue, within a tier") {
  PolicyQueue q({cls("c", QueuePolicy::kSessionLas)});
  q.record_service("long", 5000);
  q.record_service("mid", 100);
  q.push(item(1, 0, 0, 0, 100, 0, "long"));
  q.push(item(2, 1, 0, 0, 100, 0, "mid"));
  q.push(item(3, 2, 0, 0, 100, 0, "fresh"));
  q.push(item(4, 3, 0, /*tier=*/1, 100, 0, "long"));  // a higher tier still goes first
  q.record_service("fresh", 1'000'000);               // after enqueue: item 3 keeps its score
  CHECK(drain(q) == std::vector<uint64_t>{4, 3, 2, 1});
  CHECK(q.attained_service("fresh") == 1'000'000);
  q.forget_session("fresh");
  CHECK(q.attained_service("fresh") == 0);
}

TEST_CASE("DRR: backlogged classes share uncached tokens in proportion to their quanta") {
  // a: quantum 3000, b: quantum 1000, every request costs 500 tokens.
  PolicyQueue q({cls("a", QueuePolicy::kFcfs, 3000), cls("b", QueuePolicy::kFcfs, 1000)});
  for (uint64_t i = 0; i < 40; ++i) {
    q.push(item(100 + i, static_cast<double>(i), 0, 0, 500, 0));
    q.push(item(200 + i, static_cast<double>(i), 0, 0, 500, 1));
  }
  std::map<int, uint64_t> tokens;
  for (int k = 0; k < 32; ++k) {
    auto it = q.pop(any);
    REQUIRE(it);
    tokens[static_cast<int>(it->class_index)] += it->cost;
  }
  CHECK(tokens[0] == 3 * tokens[1]);  // 24 vs 8 requests
  CHECK(q.stats(0).dispatched == 24);
  CHECK(q.stats(1).dispatched == 8);
}

TEST_CASE("DRR: a request costing many quanta progresses without a loop per round; an idle class keeps no credit") {
  PolicyQueue q({cls("big", QueuePolicy::kFcfs, 10), cls("small", QueuePolicy::kFcfs, 10)});
  q.push(item(1, 0, 0, 0, 1'000'000, 0));  // 100,000 rounds of credit
  q.push(item(2, 0, 0, 0, 5, 1));
  q.push(item(3, 1, 0, 0, 5, 1));
  // The small class sends its 5-token heads first; the big one is granted its rounds at once.
  std::vector<uint64_t> order = drain(q);
  CHECK(order == std::vector<uint64_t>{2, 3, 1});
  CHECK(q.stats(1).deficit == 0);
  q.push(item(4, 2, 0, 0, 5, 1));
  CHECK(q.stats(1).deficit == 0);
}

TEST_CASE("DRR starvation bound: a backlogged class is served within one round of the others' quanta") {
  PolicyQueue q({cls("heavy", QueuePolicy::kFcfs, 8000), cls("light", QueuePolicy::kFcfs, 1000)});
  for (uint64_t i = 0; i < 100; ++i) q.push(item(i, static_cast<double>(i), 0, 0, 1000, 0));
  q.push(item(500, 0, 0, 0, 1000, 1));
  // Heavy sends at most its quantum (8 requests) before light's head goes.
  size_t before = 0;
  for (;;) {
    auto it = q.pop(any);
    REQUIRE(it);
    if (it->id == 500) break;
    ++before;
  }
  CHECK(before <= 8);
}

TEST_CASE("lanes: a busy worker's lane waits, the others and the shared lane go; requeue keeps the place") {
  PolicyQueue q({cls("c", QueuePolicy::kFcfs)});
  QueueItem pinned = item(1, 0);
  pinned.worker = 7;
  q.push(pinned);
  q.push(item(2, 1));
  QueueItem other = item(3, 2);
  other.worker = 8;
  q.push(other);
  auto busy7 = [](std::optional<uint64_t> w) { return !w || *w != 7; };
  auto a = q.pop(busy7);
  REQUIRE(a);
  CHECK(a->id == 2);
  auto b = q.pop(busy7);
  REQUIRE(b);
  CHECK(b->id == 3);
  CHECK(!q.pop(busy7));  // only the pinned one left, its worker busy
  CHECK(!q.pop([](std::optional<uint64_t>) { return false; }));
  // A shared item whose binding turned out to be on a busy worker goes back to that lane, first.
  q.push(item(4, 3));
  q.requeue(*b, 8);
  auto c = q.pop(busy7);
  REQUIRE(c);
  CHECK(c->id == 3);
  CHECK(q.remove(1));
  CHECK(!q.remove(1));
  CHECK(drain(q) == std::vector<uint64_t>{4});
  CHECK(q.empty());
}

TEST_CASE("policy files: classes, defaults, unknown keys and bad values are errors naming the file") {
  Json j = Json::parse(R"({"default_policy_class":"bg","policy_classes":[
      {"name":"interactive","queue_policy":"fcfs","quantum":8192,"subagent_class":"bg"},
      {"name":"bg","queue_policy":"session_las","quantum":1024}],
    "session_defaults":{"strict_priority":1,"subagent_tier_drop":1}})");
  auto q = QueueConfig::from_json(j, "p.json");
  REQUIRE(q);
  CHECK(q->classes.size() == 2);
  CHECK(q->default_class == 1);
  CHECK(q->classes[1].policy == QueuePolicy::kSessionLas);
  CHECK(q->root.strict_priority == 1);
  CHECK(q->to_json()["default_policy_class"] == "bg");
  auto bad = [](const char* text) {
    auto r = QueueConfig::from_json(Json::parse(text), "p.json");
    REQUIRE(!r);
    CHECK(r.error().exit_code == kExitBadData);
    CHECK(r.error().message.rfind("p.json: ", 0) == 0);
    return r.error().message;
  };
  CHECK(bad(R"({"policy_classes":[]})").find("non-empty") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a","quantum":0}]})").find("quantum") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a","queue_policy":"lifo"}]})").find("queue_policy") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a","colour":1}]})").find("colour") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a"},{"name":"a"}]})").find("twice") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a","subagent_class":"b"}]})").find("subagent_class") != std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a"}],"default_policy_class":"z"})").find("default_policy_class") !=
        std::string::npos);
  CHECK(bad(R"({"policy_classes":[{"name":"a"}],"session_defaults":{"tier":1}})").find("tier") != std::string::npos);
}

TEST_CASE("priority resolution: header, then body, then the session, then the root defaults") {
  QueueConfig cfg;
  cfg.classes = {cls("interactive", QueuePolicy::kFcfs), cls("background", QueuePolicy::kFcfs)};
  cfg.classes[0].subagent_class = "background";
  cfg.root.strict_priority = 1;
  PriorityResolver r(cfg);
  PriorityHints none, hdr, body;
  hdr.priority = 7;
  body.priority = 3;
  body.strict_priority = 4;

  auto a = r.resolve(hdr, body, "root", "");
  CHECK(a.priority == 7);         // header wins
  CHECK(a.strict_priority == 4);  // per field: the body's strict tier
  CHECK(a.source == PrioritySource::kHeader);
  auto b = r.resolve(none, none, "root", "");  // a later turn keeps what the session said
  CHECK(b.priority == 7);
  CHECK(b.strict_priority == 4);
  CHECK(b.source == PrioritySource::kSession);

  // A subagent: one tier below its parent, in the parent's class's subagent class.
  auto s = r.resolve(none, none, "child", "root");
  CHECK(s.strict_priority == 3);
  CHECK(s.priority == 7);
  CHECK(s.class_index == 1);
  CHECK(s.source == PrioritySource::kSession);
  // ... unless it says otherwise.
  PriorityHints up;
  up.strict_priority = 9;
  up.policy_class = "interactive";
  auto s2 = r.resolve(up, none, "child2", "root");
  CHECK(s2.strict_priority == 9);
  CHECK(s2.class_index == 0);

  // A root nobody knows: the config's root defaults; its unknown parent's subagent drops a tier.
  auto fresh = r.resolve(none, none, "new", "");
  CHECK(fresh.strict_priority == 1);
  CHECK(fresh.source == PrioritySource::kDefault);
  auto orphan = r.resolve(none, none, "kid", "unknown-parent");
  CHECK(orphan.strict_priority == 0);
  CHECK(orphan.class_index == 1);

  // No session: nothing remembered; out-of-range values clamp; an unknown class is ignored.
  PriorityHints huge;
  huge.priority = int64_t{1} << 40;
  huge.strict_priority = uint64_t{1} << 40;
  huge.policy_class = "nope";
  auto h = r.resolve(huge, none, "", "");
  CHECK(h.priority == INT32_MAX);
  CHECK(h.strict_priority == UINT32_MAX);
  CHECK(h.class_index == 0);

  // The session's last turn forgets it.
  r.resolve(none, none, "root", "", /*final_turn=*/true);
  CHECK(r.resolve(none, none, "root", "").source == PrioritySource::kDefault);
}
