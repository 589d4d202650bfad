// Unit tests of demote-prefetch's planned prefetches (kvpolicy::PrefetchPlan, SPEC 6.4).
#include <doctest/doctest.h>

#include "dyn/kvpolicy/prefetch_plan.h"

using dyn::kvpolicy::PrefetchPlan;

TEST_CASE("a plan is taken when due, earliest first, and not before") {
  PrefetchPlan p;
  CHECK_FALSE(p.next_due_ms());
  p.plan("b", 1, 3, 2000);
  p.plan("a", 0, 1, 1500);
  p.plan("c", 2, 1, 2000);
  CHECK(p.size() == 3);
  CHECK(*p.next_due_ms() == 1500);
  CHECK(p.take_due(1499).empty());
  auto due = p.take_due(2000);
  REQUIRE(due.size() == 3);
  CHECK(due[0].session == "a");
  CHECK(due[0].worker == 0);
  CHECK(due[1].session == "b");  // a tie goes by session id
  CHECK(due[1].worker == 1);
  CHECK(due[1].turn == 3);
  CHECK(due[2].session == "c");
  CHECK(p.size() == 0);
  CHECK_FALSE(p.next_due_ms());
}

TEST_CASE("the session's return cancels its plan; a new tool wait replaces the old plan") {
  PrefetchPlan p;
  p.plan("s", 0, 1, 1000);
  CHECK(p.cancel("s"));  // back before the prefetch: nothing goes
  CHECK_FALSE(p.cancel("s"));
  CHECK(p.take_due(5000).empty());
  p.plan("s", 0, 2, 1000);
  p.plan("s", 1, 3, 3000);  // its next tool wait, on another worker
  CHECK(p.size() == 1);
  CHECK(p.take_due(2000).empty());
  auto due = p.take_due(3000);
  REQUIRE(due.size() == 1);
  CHECK(due[0].worker == 1);
  CHECK(due[0].turn == 3);
}
