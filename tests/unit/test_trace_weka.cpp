// Unit tests of the WEKA agent-trace conversion (dyn-trace convert --from weka).
#include <doctest/doctest.h>

#include "dyn/base/json.h"
#include "dyn/trace/weka.h"

using namespace dyn;
using namespace dyn::trace;

namespace {

/// A request of the WEKA format: t (s), in/out tokens, `blocks` hash ids starting at `first`.
Json weka_req(double t, uint64_t in, uint64_t out, uint64_t first, uint64_t blocks, const char* stop,
              double api_time = -1) {
  Json ids = Json::array();
  for (uint64_t i = 0; i < blocks; ++i) ids.push_back(first + i);
  Json r = {{"t", t}, {"type", "n"}, {"in", in}, {"out", out}, {"hash_ids", ids}, {"stop", stop}};
  if (api_time >= 0) r["api_time"] = api_time;
  return r;
}

/// A conversation: turn 0 stops for a tool (the Task tool), a subagent runs 12 s..20 s with two
/// requests, the parent's turn 1 comes at 25 s and stops with end_turn, turn 2 at 60 s.
Json conversation() {
  Json sub = {{"type", "subagent"},      {"t", 20.0},
              {"agent_id", "agent_001"}, {"duration_ms", 8000},
              {"status", "completed"},   {"requests", Json::array()}};
  sub["requests"].push_back(weka_req(0, 200, 10, 100, 3, "tool_use", 2.0));
  sub["requests"].push_back(weka_req(5, 300, 10, 100, 4, "end_turn", 1.5));
  Json reqs = Json::array();
  reqs.push_back(weka_req(0, 130, 20, 1, 2, "tool_use", 10.0));  // ends at 10 s; 130 = 2 blocks + 2 tokens
  reqs.push_back(sub);
  reqs.push_back(weka_req(25, 256, 20, 1, 4, "end_turn", 4.0));  // ends at 29 s
  reqs.push_back(weka_req(60, 320, 20, 1, 5, "tool_use", 3.0));
  return {{"id", "trace_9"}, {"block_size", 64}, {"hash_id_scope", "local"}, {"requests", reqs}};
}

}  // namespace

TEST_CASE("weka: sessions, subagent parent, tool gaps and joins") {
  std::vector<records::WorkloadRow> rows;
  uint64_t next = 0;
  auto n = weka_to_workload(conversation(), next, nullptr, rows);
  REQUIRE(n);
  REQUIRE(*n == 5);
  // Start order: parent 0 (0 s), sub 0 (12 s), sub 1 (17 s), parent 1 (25 s), parent 2 (60 s).
  CHECK(rows[0].session_id == "trace_9");
  CHECK(rows[0].request_id == "trace_9:0");
  CHECK(rows[0].timestamp_ms == 0.0);
  CHECK(rows[0].parent_session_id.empty());

  CHECK(rows[1].session_id == "trace_9/agent_001");
  CHECK(rows[1].parent_session_id == "trace_9");
  CHECK(rows[1].timestamp_ms == 12000.0);            // its recorded start, for a fixed schedule
  CHECK(rows[1].delay_ms == doctest::Approx(2000));  // starts 12 s, the parent's turn ended at 10 s

  CHECK(!rows[2].timestamp_ms);  // later turns: gaps only
  CHECK(rows[2].session_id == "trace_9/agent_001");
  CHECK(rows[2].tool_wait_ms == doctest::Approx(3000));  // 17 s − (12 + 2) s after a tool_use stop
  CHECK(!rows[2].delay_ms);

  // The parent's next turn joins the subagent (it ended at 20 s) and waits from its last reply's
  // end (18.5 s) as the tool's time, its previous turn having stopped for the Task tool.
  CHECK(rows[3].session_id == "trace_9");
  CHECK(rows[3].wait_for == std::vector<std::string>{"trace_9/agent_001:1"});
  CHECK(rows[3].tool_wait_ms == doctest::Approx(25000 - 18500));
  // After end_turn the gap is the user's think time: a delay, not a tool wait.
  CHECK(rows[4].delay_ms == doctest::Approx(60000 - 29000));
  CHECK(!rows[4].tool_wait_ms);
  CHECK(rows[4].wait_for.empty());
}

TEST_CASE("weka: local hash ids become global ones and partial blocks get their own") {
  std::vector<records::WorkloadRow> rows;
  uint64_t next = 0;
  REQUIRE(weka_to_workload(conversation(), next, nullptr, rows));
  // Parent turn 0: local ids 1, 2 and a partial tail (130 = 2 * 64 + 2).
  CHECK(rows[0].hash_ids == std::vector<uint64_t>{0, 1, 2});
  CHECK(rows[0].input_length == 130);
  // Parent turn 1 shares the two full blocks, not the tail.
  CHECK(rows[3].hash_ids[0] == 0);
  CHECK(rows[3].hash_ids[1] == 1);
  CHECK(rows[3].hash_ids[2] != 2);
  // A second conversation with the same local ids shares nothing (hash_id_scope "local").
  Json other = conversation();
  other["id"] = "trace_10";
  size_t before = rows.size();
  REQUIRE(weka_to_workload(other, next, nullptr, rows));
  CHECK(rows[before].hash_ids[0] > rows[3].hash_ids.back());
  for (const auto& r : rows) CHECK(r.hash_ids_consistent);
}

TEST_CASE("weka: malformed traces are errors naming the request") {
  std::vector<records::WorkloadRow> rows;
  uint64_t next = 0;
  Json t = conversation();
  t["requests"][1]["requests"][0].erase("in");
  auto r = weka_to_workload(t, next, nullptr, rows);
  REQUIRE(!r);
  CHECK(r.error().message == "requests[1].requests[0]: no 'in'");
  CHECK(rows.empty());
  Json b = conversation();
  b["block_size"] = 512;
  CHECK(!weka_to_workload(b, next, nullptr, rows));
  CHECK(!weka_to_workload(Json::array(), next, nullptr, rows));
}

TEST_CASE("weka: starts come with the rows, for merging conversations on one timeline") {
  std::vector<records::WorkloadRow> rows;
  std::vector<double> starts;
  uint64_t next = 0;
  REQUIRE(weka_to_workload(conversation(), next, nullptr, rows, &starts));
  CHECK(starts == std::vector<double>{0, 12000, 17000, 25000, 60000});
}
