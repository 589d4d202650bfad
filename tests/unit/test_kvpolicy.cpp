// Unit tests for lib/dyn/kvpolicy: the router's KV retention policies (SPEC 6.4), the hints each
// sends in KvHint v0.1 wire form, their counts and the moving average of tool waits.
#include <doctest/doctest.h>

#include "dyn/kvpolicy/kv_policy.h"

using namespace dyn;
using namespace dyn::kvpolicy;

namespace {
KvPolicyConfig all() {
  KvPolicyConfig c;
  c.tool_ttl = c.evict_on_final = c.parent_retain = true;
  return c;
}
}  // namespace

TEST_CASE("no policy sends nothing") {
  KvPolicies p(KvPolicyConfig{});
  CHECK_FALSE(p.request_hint("s", true, true, 0));
  CHECK_FALSE(p.tool_wait_hint("s"));
  CHECK_FALSE(p.spawn_hint("parent"));
  CHECK(p.counts().tool_retains + p.counts().final_evicts + p.counts().parent_retains == 0);
}

TEST_CASE("a request's hint: tool-ttl's retain of 4x the expected wait, evict-on-final past the shared prefix") {
  KvPolicies p(all());
  auto h = p.request_hint("s", /*last_turn=*/false, /*ends_in_tool=*/true, 0);
  REQUIRE(h);
  CHECK((*h)["protocol_version"] == "0.1");
  CHECK((*h)["message_id"] == "kv-policy-1");
  REQUIRE((*h)["actions"].size() == 1);
  const Json& a = (*h)["actions"][0];
  CHECK(a["action_id"] == "p1");
  CHECK(a["action_type"] == "kv.retain");
  CHECK(a["action_version"] == "1.0");
  CHECK(a["payload"]["ttl_seconds"].get<double>() == doctest::Approx(120));  // 4 x the 30 s default
  CHECK(a["payload"]["include_current_request"] == true);
  auto last = p.request_hint("s", /*last_turn=*/true, /*ends_in_tool=*/false, 3);
  REQUIRE(last);
  CHECK((*last)["message_id"] == "kv-policy-2");
  const Json& e = (*last)["actions"][0];
  CHECK(e["action_type"] == "kv.evict");
  CHECK(e["payload"]["current_request_block_start"] == 3);
  CHECK(p.counts().tool_retains == 1);
  CHECK(p.counts().final_evicts == 1);
  CHECK_FALSE(p.request_hint("", true, true, 0));  // no session: nothing to keep or drop
}

TEST_CASE("tool waits: the moving average, the cap, and the serve form naming the session") {
  KvPolicyConfig c;
  c.tool_ttl = true;
  c.tool_max_wait_s = 50;
  KvPolicies p(c);
  p.observe_tool_wait("s", 10);
  CHECK(p.expected_tool_wait_s("s") == doctest::Approx(10));
  p.observe_tool_wait("s", 30);
  CHECK(p.expected_tool_wait_s("s") == doctest::Approx(20));
  auto h = p.tool_wait_hint("s");
  REQUIRE(h);
  CHECK((*h)["actions"][0]["payload"]["ttl_seconds"].get<double>() == doctest::Approx(80));
  CHECK((*h)["actions"][0]["payload"]["session_id"] == "s");
  CHECK_FALSE((*h)["actions"][0]["payload"].contains("include_current_request"));
  p.observe_tool_wait("s", 180);  // average 100 s: over the 50 s cap, not pinned
  CHECK_FALSE(p.tool_wait_hint("s"));
  CHECK(p.counts().tool_too_long == 1);
  p.end_session("s");
  CHECK(p.expected_tool_wait_s("s") == doctest::Approx(30));
}

TEST_CASE("parent-retain: the parent's blocks for parent_ttl_s") {
  KvPolicyConfig c;
  c.parent_retain = true;
  c.parent_ttl_s = 7;
  KvPolicies p(c);
  CHECK_FALSE(p.spawn_hint(""));
  auto h = p.spawn_hint("p");
  REQUIRE(h);
  CHECK((*h)["actions"][0]["payload"]["session_id"] == "p");
  CHECK((*h)["actions"][0]["payload"]["ttl_seconds"].get<double>() == doctest::Approx(7));
  CHECK(p.counts().parent_retains == 1);
}

TEST_CASE("per tool name where names are known, per session otherwise") {
  KvPolicyConfig c;
  c.tool_ttl = true;
  KvPolicies p(c);
  p.observe_tool_wait("s1", 2, "Read");
  p.observe_tool_wait("s1", 60, "Bash");
  CHECK(p.expected_tool_wait_s("s2", "Read") == doctest::Approx(2));  // another session, the tool's average
  CHECK(p.expected_tool_wait_s("s1", "Bash") == doctest::Approx(60));
  CHECK(p.expected_tool_wait_s("s1") == doctest::Approx(31));          // no name: the session's (2, then 60)
  CHECK(p.expected_tool_wait_s("s1", "Edit") == doctest::Approx(31));  // a tool not seen yet: the session's
  CHECK(p.expected_tool_wait_s("s3", "Edit") == doctest::Approx(30));  // nothing known: the default
  auto h = p.tool_wait_hint("s2", "Read");
  REQUIRE(h);
  CHECK((*h)["actions"][0]["payload"]["ttl_seconds"].get<double>() == doctest::Approx(8));
}

TEST_CASE("demote-prefetch: a tool-ending turn demotes its own blocks, the return is prefetched by session") {
  KvPolicyConfig c;
  c.demote_prefetch = true;
  CHECK(c.any());
  KvPolicies p(c);
  auto h = p.request_hint("s", /*last_turn=*/false, /*ends_in_tool=*/true, 2);
  REQUIRE(h);
  REQUIRE((*h)["actions"].size() == 1);
  const Json& d = (*h)["actions"][0];
  CHECK(d["action_type"] == "kv.demote");
  CHECK(d["payload"]["include_current_request"] == true);
  CHECK(d["payload"]["current_request_block_start"] == 2);             // the shared prefix stays on G1
  CHECK_FALSE(p.request_hint("s", false, /*ends_in_tool=*/false, 2));  // no tool wait: nothing to demote
  CHECK_FALSE(p.request_hint("s", /*last_turn=*/true, true, 2));
  auto f = p.prefetch_hint("s");
  REQUIRE(f);
  CHECK((*f)["actions"][0]["action_type"] == "kv.prefetch");
  CHECK((*f)["actions"][0]["payload"]["session_id"] == "s");
  CHECK_FALSE(p.prefetch_hint(""));
  // A wait under 4 one-way copies (30 s default < 4 x 10 s) keeps the blocks on G1.
  CHECK_FALSE(p.request_hint("s", false, true, 2, /*copy_s=*/10));
  CHECK(p.request_hint("s", false, true, 2, /*copy_s=*/7));
  CHECK(p.counts().tool_demotes == 2);
  CHECK(p.counts().tool_not_demoted == 1);
  CHECK(p.counts().prefetches == 1);
  CHECK(p.counts().tool_retains == 0);
  KvPolicies off(all());
  CHECK_FALSE(off.prefetch_hint("s"));
}

TEST_CASE("demote-prefetch in serve: the demote at a tool call's end, its copy time and the prefetch's time") {
  KvPolicyConfig c;
  c.demote_prefetch = true;
  c.kv_bytes_per_token = 131072;  // 8 MiB blocks of 64 tokens
  c.g2_to_g1_gbps = 10;
  c.speedup_ratio = 2;
  KvPolicies p(c);
  // 200 tokens fill 4 blocks of 64: 4 x 64 x 131072 bytes over 10 GB/s, twice as fast.
  CHECK(p.copy_ms(200, 64) == doctest::Approx(4 * 64 * 131072 / 10e6 / 2));
  CHECK(p.copy_ms(0, 64) == 0);
  // The prefetch goes two copies before the predicted return, at once when the wait is shorter.
  CHECK(KvPolicies::prefetch_delay_ms(30000, 500) == doctest::Approx(29000));
  CHECK(KvPolicies::prefetch_delay_ms(800, 500) == 0);
  auto h = p.demote_hint("s", "Bash", /*copy_s=*/7);  // 30 s default >= 4 x 7 s
  REQUIRE(h);
  CHECK((*h)["actions"][0]["action_type"] == "kv.demote");
  CHECK((*h)["actions"][0]["payload"].is_object());
  CHECK_FALSE(p.demote_hint("s", "Bash", /*copy_s=*/8));  // 30 s < 4 x 8 s: kept on G1
  p.observe_tool_wait("s", 100, "Bash");                  // the tool's own average now rules
  CHECK(p.demote_hint("s", "Bash", 8));
  CHECK_FALSE(p.demote_hint("", "Bash", 0));
  CHECK(p.counts().tool_demotes == 2);
  CHECK(p.counts().tool_not_demoted == 1);
  c.g2_to_g1_gbps = 0;  // an unbounded link copies in no time
  CHECK(KvPolicies(c).copy_ms(200, 64) == 0);
  KvPolicies off(KvPolicyConfig{});
  CHECK_FALSE(off.demote_hint("s", "", 0));
  CHECK(off.counts().tool_not_demoted == 0);
}
