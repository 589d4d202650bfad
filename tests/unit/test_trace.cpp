// Unit tests for lib/dyn/trace: workload loading and validation (cases 06, 08, 26), records.
#include <doctest/doctest.h>

#include "dyn/trace/record.h"
#include "dyn/trace/workload.h"

using namespace dyn::trace;

namespace {
std::string shared(const std::string& rel) { return std::string(DYN_SHARED_DIR) + "/" + rel; }
}  // namespace

TEST_CASE("case 06: hash ids vs input_length at block size 512 and 16") {
  WorkloadOptions o;
  o.block_size = 512;
  auto w = load_workload({shared("cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  CHECK(w.errors.size() == 2);
  CHECK(w.errors[0].find(":2: input_length 20 needs 1 hash_ids") != std::string::npos);
  CHECK(w.errors[0].find("row has 2") != std::string::npos);
  CHECK(w.errors[1].find(":3: input_length 1500 needs 3 hash_ids") != std::string::npos);
  CHECK(w.rows.size() == 2);
  o.strict_hash_ids = false;
  auto lenient = load_workload({shared("cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  CHECK(lenient.ok());
  CHECK(lenient.rows.size() == 4);
  CHECK(lenient.rows[2].input_length == 1500);
  o.strict_hash_ids = true;
  o.block_size = 16;
  auto w16 = load_workload({shared("cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  REQUIRE(w16.errors.size() == 2);
  CHECK(w16.errors[0].find(":3:") != std::string::npos);
  CHECK(w16.errors[1].find(":4:") != std::string::npos);
}

TEST_CASE("case 08: missing timestamp named by line; non-monotonic sorted stably") {
  WorkloadOptions o;
  o.require_timestamps = true;
  auto w = load_workload({shared("cases/08-mooncake-missing-timestamp/trace.jsonl")}, o);
  REQUIRE(w.errors.size() == 1);
  CHECK(w.errors[0].find(":2: missing field 'timestamp'") != std::string::npos);
  o.require_timestamps = false;
  CHECK(load_workload({shared("cases/08-mooncake-missing-timestamp/trace.jsonl")}, o).rows.size() == 3);
  auto nm = load_workload({shared("cases/08-mooncake-missing-timestamp/trace-nonmonotonic.jsonl")}, o);
  CHECK(nm.reordered);
  REQUIRE(nm.rows.size() == 3);
  CHECK(nm.rows[1].hash_ids[1] == 3);
  CHECK(nm.rows[2].hash_ids[1] == 2);
}

TEST_CASE("case 26: u64 hashes map to 4 distinct compact ids") {
  auto w = load_workload({shared("cases/26-u64-hash-precision/trace.jsonl")}, {});
  REQUIRE(w.ok());
  REQUIRE(w.rows.size() == 1);
  CHECK(w.from_dynamo);
  CHECK(w.block_size == 64);
  CHECK(w.rows[0].hash_ids == std::vector<uint64_t>{0, 1, 2, 3});
  CHECK(w.rows[0].input_length == 256);
  CHECK(w.rows[0].output_length == 16u);
  CHECK(w.rows[0].timestamp_ms == 0.0);
}

TEST_CASE("negative, fractional and too-large hash ids are per-row errors") {
  std::string err;
  for (const char* bad : {R"({"input_length":10,"hash_ids":[-1]})", R"({"input_length":10,"hash_ids":[1.5]})",
                          R"({"input_length":10,"hash_ids":[18446744073709551616]})"}) {
    CHECK_FALSE(parse_workload_row(dyn::Json::parse(bad), 512, "f:1", &err));
    CHECK(err.find("not an unsigned 64-bit integer") != std::string::npos);
  }
}

TEST_CASE("AIPerf fixtures: sessions, text_input and delay load") {
  auto s = load_workload({shared("data/aiperf/test_trace_session_ids.jsonl")}, {});
  REQUIRE(s.ok());
  CHECK(s.rows.size() == 3);
  CHECK(s.rows[2].text_input.value() == "This is session 2 input");
  CHECK(s.rows[2].input_length == 6);
  auto d = load_workload({shared("data/aiperf/test_trace_delay.jsonl")}, {});
  REQUIRE(d.ok());
  CHECK(d.rows[0].delay_ms == 500.0);
}

TEST_CASE("find_path and accessors") {
  auto r = dyn::Json::parse(R"({"agent_context":{"session_id":"s","parent_session_id":"p"},"request":{"worker":{"decode_worker_id":3}}})");
  CHECK(session_of(r) == "s");
  CHECK(parent_of(r) == "p");
  CHECK(worker_of(r) == "3");
  CHECK(find_path(r, "request.worker.nope") == nullptr);
}
