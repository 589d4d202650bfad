// Unit tests of the synthetic agent-session workload generator (dyn-trace generate).
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "dyn/base/error.h"
#include "dyn/trace/generate.h"
#include "dyn/records/workload.h"

using namespace dyn;
using namespace dyn::trace;
using namespace dyn::records;

namespace {
AgentWorkloadOptions small() {
  AgentWorkloadOptions o;
  o.seed = 7;
  o.block_size = 64;
  o.sessions = 20;
  o.session_rate_per_s = 2;
  o.turns_min = 3;
  o.turns_max = 8;
  o.system_prompt_tokens = 200;  // 3 full shared blocks + a partial one
  o.task_tokens = 300;
  o.tool_output_tokens = 400;
  o.output_tokens = 100;
  o.tool_gap_ms = 2000;
  o.subagent_probability = 0.3;
  return o;
}
}  // namespace

TEST_CASE("generate: same seed same rows; another seed differs") {
  auto a = generate_agent_workload(small());
  auto b = generate_agent_workload(small());
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(workload_row_to_json(a[i]) == workload_row_to_json(b[i]));
  auto o = small();
  o.seed = 8;
  auto c = generate_agent_workload(o);
  CHECK(workload_row_to_json(c[0]) != workload_row_to_json(a[0]));
}

TEST_CASE("generate: contexts grow turn by turn and hash ids extend the previous turn's full blocks") {
  AgentWorkloadSummary s;
  auto rows = generate_agent_workload(small(), &s);
  CHECK(s.rows == rows.size());
  CHECK(s.sessions == 20);
  CHECK(s.subagents > 0);
  std::map<std::string, const WorkloadRow*> last;
  std::set<uint64_t> seen_first_block;
  uint64_t working_set = 0;
  for (auto& r : rows) {
    // SPEC 4.3 validity: (n - 1) x B < input_length <= n x B
    CHECK((r.hash_ids.size() - 1) * 64 < r.input_length);
    CHECK(r.input_length <= r.hash_ids.size() * 64);
    // Every session starts with the shared system prompt's 3 full blocks: ids 0, 1, 2.
    REQUIRE(r.hash_ids.size() >= 4);
    CHECK(r.hash_ids[0] == 0);
    CHECK(r.hash_ids[1] == 1);
    CHECK(r.hash_ids[2] == 2);
    auto it = last.find(r.session_id);
    if (it == last.end()) {
      CHECK(r.timestamp_ms.has_value());
      CHECK(!r.delay_ms.has_value());
      CHECK(r.request_id == r.session_id + ":0");
      // The partial system block and the task are private to the session.
      CHECK(seen_first_block.insert(r.hash_ids[3]).second);
    } else {
      const WorkloadRow& p = *it->second;
      CHECK(!r.timestamp_ms.has_value());
      REQUIRE(r.delay_ms.has_value());
      CHECK(*r.delay_ms >= 0);
      CHECK(r.input_length > p.input_length + *p.output_length);  // + output + tool result
      size_t full = p.input_length / 64;
      for (size_t i = 0; i < full; ++i) CHECK(r.hash_ids[i] == p.hash_ids[i]);
      if (p.input_length % 64 != 0) CHECK(r.hash_ids[full] != p.hash_ids[full]);
      working_set -= p.input_length + *p.output_length;
    }
    working_set += r.input_length + *r.output_length;
    last[r.session_id] = &r;
  }
  CHECK(working_set == s.working_set_tokens);
}

TEST_CASE("generate: subagents carry their parent and start after it; rows are in timestamp order") {
  auto o = small();
  o.wait_for = true;
  auto rows = generate_agent_workload(o);
  std::map<std::string, double> start;
  std::map<std::string, std::string> request_session;
  std::map<std::string, std::string> latest;  // session -> its latest row so far
  double prev_ts = -1;
  int subs = 0, waits = 0;
  for (auto& r : rows) {
    // Every row comes after what it waits for (a replay refuses a wait_for naming a later row),
    // and a subagent's first turn right after its spawning turn: that is its parent's latest
    // preceding turn, the dependency a replay outside the fixed schedule gives it (SPEC 6.1).
    for (auto& w : r.wait_for) {
      CHECK(request_session.count(w) == 1);
      ++waits;
    }
    if (r.timestamp_ms && !r.parent_session_id.empty()) CHECK(r.wait_for.at(0) == latest[r.parent_session_id]);
    request_session[r.request_id] = r.session_id;
    latest[r.session_id] = r.request_id;
    if (r.timestamp_ms) {
      CHECK(*r.timestamp_ms >= prev_ts);
      prev_ts = *r.timestamp_ms;
      start[r.session_id] = *r.timestamp_ms;
    }
    if (!r.parent_session_id.empty()) {
      REQUIRE(start.count(r.parent_session_id));
      if (r.timestamp_ms) {
        ++subs;
        CHECK(*r.timestamp_ms > start[r.parent_session_id]);
        REQUIRE(r.wait_for.size() == 1);  // the parent turn that spawned it
        CHECK(request_session[r.wait_for[0]] == r.parent_session_id);
      }
    }
  }
  CHECK(subs > 0);
  CHECK(waits == 2 * subs);  // the subagent's first turn and the parent's next turn
}

TEST_CASE("generate: max context ends a session; bad options are usage errors") {
  auto o = small();
  o.max_context_tokens = 1500;
  o.subagent_probability = 0;
  int later = 0;
  for (auto& r : generate_agent_workload(o)) {
    if (!r.delay_ms) continue;
    CHECK(r.input_length <= 1500);
    ++later;
  }
  CHECK(later > 0);
  o.turns_min = 9;
  CHECK_THROWS_AS(generate_agent_workload(o), Fatal);
  o = small();
  o.block_size = 0;
  CHECK_THROWS_AS(generate_agent_workload(o), Fatal);
  o = small();
  o.subagent_probability = 1.5;
  CHECK_THROWS_AS(generate_agent_workload(o), Fatal);
}
