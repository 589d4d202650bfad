// Unit tests of the router's session-prefix index (kvpolicy::SessionPrefixIndex, issue 49).
#include <doctest/doctest.h>

#include <vector>

#include "dyn/kvpolicy/session_prefix.h"

using dyn::kvpolicy::SessionPrefixIndex;

TEST_CASE("a session's lineage per worker is its latest turn's chain, kept until the session ends") {
  SessionPrefixIndex ix;
  const std::vector<uint64_t> t1{11, 12}, t2{11, 12, 13, 14}, other{21};
  ix.record("s", 0, t1);
  ix.record("s", 0, t2);  // the next turn grows the context
  ix.record("s", 1, other);
  ix.record("s", 2, {});  // no full block: nothing recorded
  REQUIRE(ix.lineage("s", 0));
  CHECK(*ix.lineage("s", 0) == t2);
  CHECK(*ix.lineage("s", 1) == other);
  CHECK_FALSE(ix.lineage("s", 2));
  CHECK_FALSE(ix.lineage("t", 0));
  ix.record("", 0, t1);  // no session: ignored
  CHECK(ix.sessions() == 1);
  auto j = ix.snapshot_json();
  CHECK(j["lineages"][0]["session_id"] == "s");
  CHECK(j["lineages"][0]["workers"][0]["blocks"] == 4);
  CHECK(j["lineages"][0]["workers"][0]["root"] == "11");
  CHECK(j["lineages"][0]["workers"][0]["last"] == "14");
  CHECK(j["lineages"][0]["workers"][1]["worker"] == 1);
  ix.forget("s");
  CHECK_FALSE(ix.lineage("s", 0));
  CHECK(ix.sessions() == 0);
}

TEST_CASE("bounded: past max_sessions the session recorded longest ago goes") {
  SessionPrefixIndex ix(2);
  const std::vector<uint64_t> h{1};
  ix.record("a", 0, h);
  ix.record("b", 0, h);
  ix.record("a", 0, h);  // a is the most recent again
  ix.record("c", 0, h);  // b goes, not a
  CHECK(ix.lineage("a", 0));
  CHECK_FALSE(ix.lineage("b", 0));
  CHECK(ix.lineage("c", 0));
  CHECK(ix.sessions() == 2);
  CHECK(ix.dropped() == 1);
}
