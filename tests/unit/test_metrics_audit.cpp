// dyn-bench audit's arithmetic (lib/dyn/metrics/audit.h): each cause from its own evidence, the
// rest unexplained, and the infinite cache at the engine block size.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/metrics/audit.h"

using namespace dyn::metrics;

namespace {
AuditRequest req(std::string id, std::string session, std::string worker, double start, uint64_t input,
                 std::vector<uint64_t> ids) {
  AuditRequest r;
  r.request_id = std::move(id);
  r.session_id = std::move(session);
  r.worker = std::move(worker);
  r.start_ms = start;
  r.input_tokens = input;
  r.ids = std::move(ids);
  r.ids_block_size = 16;
  return r;
}
}  // namespace

TEST_CASE("audit: cold, routing, stale and unexplained, each from its own evidence") {
  // Block size 16. r1: 4 new blocks (64 tokens, all cold). r2: shares r1's 4 blocks plus 2 new
  // (96 tokens: 64 reusable, 32 cold); the router predicted 32 on its worker while another eligible
  // worker held 64 (routing 32), and the engine delivered 16 (stale 16). Miss = 96 - 16 = 80 =
  // cold 32 + routing 32 + stale 16: nothing unexplained.
  AuditRequest r1 = req("r1", "s", "0", 1, 64, {1, 2, 3, 4});
  r1.predicted = 0;
  r1.best = 0;
  r1.delivered = 0;
  AuditRequest r2 = req("r2", "s", "1", 2, 96, {1, 2, 3, 4, 5, 6});
  r2.predicted = 32;
  r2.best = 64;
  r2.delivered = 16;
  // r3 (another session, on worker 0): all 4 of r1's blocks reusable, the router saw only 2 of them
  // anywhere (best = predicted = 32) and the engine delivered 48: 16 underpredicted; miss 16, no cold,
  // routing or stale cause: reusable - best - under = 64 - 32 - 16 = 16 unexplained.
  AuditRequest r3 = req("r3", "t", "0", 3, 64, {1, 2, 3, 4});
  r3.predicted = 32;
  r3.best = 32;
  r3.delivered = 48;
  // Given out of order: the infinite cache follows start times.
  AuditRun run = audit_requests({r3, r2, r1}, 16);
  const AuditFigures& t = run.total;
  CHECK(t.requests == 3);
  CHECK(t.input == 224);
  CHECK(t.reusable == 0 + 64 + 64);
  CHECK(t.cold == 64 + 32 + 0);
  CHECK(t.predicted == 64);
  CHECK(t.delivered == 64);
  CHECK(t.miss == 64 + 80 + 16);
  CHECK(t.routing == 32);
  CHECK(t.stale == 16);
  CHECK(t.under == 16);
  CHECK(t.unexplained == 16);
  CHECK(t.over_attributed == 0);
  CHECK(t.attributed_requests == 3);
  REQUIRE(run.workers.size() == 2);
  CHECK(run.workers["0"].requests == 2);
  CHECK(run.workers["1"].routing == 32);
  CHECK(run.sessions["t"].unexplained == 16);
  CHECK(run.sessions["s"].unexplained == 0);
}

TEST_CASE("audit: missing evidence leaves a cause unmeasured, never guessed") {
  // A decide trace: predicted and best, no delivered; no block ids.
  AuditRequest r = req("d1", "", "2", 0, 100, {});
  r.predicted = 20;
  r.best = 50;
  AuditRun run = audit_requests({r}, 16);
  CHECK(run.total.routing == 30);
  CHECK(run.total.routing_requests == 1);
  CHECK(run.total.delivered_requests == 0);
  CHECK(run.total.reusable_requests == 0);
  CHECK(run.total.attributed_requests == 0);
  CHECK(run.total.unexplained == 0);
  CHECK(run.sessions.count("(none)") == 1);
  const std::string table = audit_table({run}, 16);
  CHECK(table.find("n/a") != std::string::npos);
}

TEST_CASE("audit: the infinite cache counts full engine blocks; a larger engine block needs all its pieces") {
  // Ids at 16 tokens, engine blocks of 32: r2 shares r1's first 3 ids (48 tokens) = one full
  // engine block (32 tokens) reusable.
  AuditRequest r1 = req("a", "", "0", 0, 64, {1, 2, 3, 4});
  AuditRequest r2 = req("b", "", "0", 1, 64, {1, 2, 3, 9});
  AuditRun run = audit_requests({r1, r2}, 32);
  CHECK(run.total.reusable == 32);
  CHECK(run.total.cold == 64 + 32);
}

TEST_CASE("audit_trace: serve rows joined by request id, failures left out, a trace without rows refused") {
  const std::string path = "audit-test-trace.jsonl";
  {
    std::ofstream f(path);
    // A decision row then its request_end (serve with --router-decision-log), a retried request's
    // two decisions (the last one serves), and a failed request.
    f << R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":1,"event_source":"router","request":{"request_id":"q1","input_tokens":32,"cached_tokens":0,"kv_hit_rate":0.0,"worker":{"decode_worker_id":0}},"dyn":{"binding":"none","request_blocks":2,"block_size":16,"ties":0,"avoidable_prefill_tokens":0,"kv_optimal":true,"attempt":0}})"
      << "\n"
      << R"({"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5,"event_source":"router","request":{"request_id":"q1","input_tokens":32,"cached_tokens":0,"request_received_ms":1,"worker":{"decode_worker_id":0},"replay":{"trace_block_size":16,"input_length":32,"input_sequence_hashes":[7,8]}},"dyn":{"status":"ok"}})"
      << "\n"
      << R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":2,"event_source":"router","request":{"request_id":"q2","input_tokens":32,"cached_tokens":16,"kv_hit_rate":0.5,"worker":{"decode_worker_id":1}},"dyn":{"binding":"none","request_blocks":2,"block_size":16,"ties":0,"avoidable_prefill_tokens":16,"kv_optimal":false,"non_max_cause":"load","attempt":0}})"
      << "\n"
      << R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":2,"event_source":"router","request":{"request_id":"q2","input_tokens":32,"cached_tokens":32,"kv_hit_rate":1.0,"worker":{"decode_worker_id":0}},"dyn":{"binding":"none","request_blocks":2,"block_size":16,"ties":0,"avoidable_prefill_tokens":0,"kv_optimal":true,"attempt":1}})"
      << "\n"
      << R"({"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":9,"event_source":"router","request":{"request_id":"q2","input_tokens":32,"cached_tokens":16,"request_received_ms":2,"worker":{"decode_worker_id":0},"replay":{"trace_block_size":16,"input_length":32,"input_sequence_hashes":[7,8]}},"dyn":{"status":"ok"}})"
      << "\n"
      << R"({"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":9,"event_source":"router","request":{"request_id":"q3","input_tokens":32,"request_received_ms":3},"dyn":{"status":"error"}})"
      << "\n";
  }
  AuditRun run = audit_trace(path, 16);
  CHECK(run.request_end_rows == 3);
  CHECK(run.decision_rows == 3);
  CHECK(run.event_source == "router");
  CHECK(run.total.requests == 2);
  CHECK(run.total.reusable == 32);   // q2 repeats q1's two blocks
  CHECK(run.total.predicted == 32);  // q2's last placement: 32 on worker 0
  CHECK(run.total.routing == 0);
  CHECK(run.total.stale == 16);  // predicted 32, delivered 16
  CHECK(run.total.miss == 32 + 16);
  CHECK(run.total.unexplained == 0);
  CHECK(run.workers.size() == 1);
  {
    std::ofstream f(path);
    f << R"({"event_type":"kv_event"})"
      << "\n";
  }
  CHECK_THROWS_AS(audit_trace(path, 16), dyn::Fatal);
  std::remove(path.c_str());
}
