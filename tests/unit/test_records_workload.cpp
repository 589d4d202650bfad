// Unit tests for lib/dyn/records: workload loading and validation (cases 06, 08, 26), record
// accessors, the workload row parsers (one object walk, the fast line scanner).
#include <doctest/doctest.h>

#include <simdjson.h>

#include <fstream>

#include "dyn/records/aiperf_dataset.h"
#include "dyn/records/record.h"
#include "dyn/records/workload.h"

using namespace dyn::records;

namespace {
std::string repo(const std::string& rel) { return std::string(DYN_SOURCE_DIR) + "/" + rel; }
}  // namespace

TEST_CASE("case 06: hash ids vs input_length at block size 512 and 16") {
  WorkloadOptions o;
  o.block_size = 512;
  auto w = load_workload({repo("tests/fixtures/cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  CHECK(w.errors.size() == 2);
  CHECK(w.errors[0].find(":2: input_length 20 needs 1 hash_ids") != std::string::npos);
  CHECK(w.errors[0].find("row has 2") != std::string::npos);
  CHECK(w.errors[1].find(":3: input_length 1500 needs 3 hash_ids") != std::string::npos);
  CHECK(w.rows.size() == 2);
  o.strict_hash_ids = false;
  auto lenient = load_workload({repo("tests/fixtures/cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  CHECK(lenient.ok());
  CHECK(lenient.rows.size() == 4);
  CHECK(lenient.rows[2].input_length == 1500);
  o.strict_hash_ids = true;
  o.block_size = 16;
  auto w16 = load_workload({repo("tests/fixtures/cases/06-mooncake-hashids-vs-length/trace.jsonl")}, o);
  REQUIRE(w16.errors.size() == 2);
  CHECK(w16.errors[0].find(":3:") != std::string::npos);
  CHECK(w16.errors[1].find(":4:") != std::string::npos);
}

TEST_CASE("case 08: missing timestamp named by line; non-monotonic sorted stably") {
  WorkloadOptions o;
  o.require_timestamps = true;
  auto w = load_workload({repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace.jsonl")}, o);
  REQUIRE(w.errors.size() == 1);
  CHECK(w.errors[0].find(":2: missing field 'timestamp'") != std::string::npos);
  o.require_timestamps = false;
  CHECK(load_workload({repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace.jsonl")}, o).rows.size() == 3);
  auto nm = load_workload({repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace-nonmonotonic.jsonl")}, o);
  CHECK(nm.reordered);
  REQUIRE(nm.rows.size() == 3);
  CHECK(nm.rows[1].hash_ids[1] == 3);
  CHECK(nm.rows[2].hash_ids[1] == 2);
}

TEST_CASE("case 26: u64 hashes map to 4 distinct compact ids") {
  auto w = load_workload({repo("tests/fixtures/cases/26-u64-hash-precision/trace.jsonl")}, {});
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
  auto s = load_workload({repo("data/aiperf/test_trace_session_ids.jsonl")}, {});
  REQUIRE(s.ok());
  CHECK(s.rows.size() == 3);
  CHECK(s.rows[2].text_input.value() == "This is session 2 input");
  CHECK(s.rows[2].input_length == 6);
  auto d = load_workload({repo("data/aiperf/test_trace_delay.jsonl")}, {});
  REQUIRE(d.ok());
  CHECK(d.rows[0].delay_ms == 500.0);
}

TEST_CASE("find_path and accessors") {
  auto r = dyn::Json::parse(
      R"({"agent_context":{"session_id":"s","parent_session_id":"p"},"request":{"worker":{"decode_worker_id":3}}})");
  CHECK(session_of(r) == "s");
  CHECK(parent_of(r) == "p");
  CHECK(worker_of(r) == "3");
  CHECK(find_path(r, "request.worker.nope") == nullptr);
}

TEST_CASE("parse_workload_object: one pass, last duplicate wins, fields read before an error are kept") {
  simdjson::dom::parser p;
  simdjson::dom::object o;
  dyn::records::WorkloadRow r;
  std::string err;
  REQUIRE(p.parse(std::string(R"({"timestamp":7,"input_length":1024.0,"hash_ids":[5,6],"session_id":3,)"
                              R"("request_id":"a","request_id":"b","wait_for":"x","priority":2})"))
              .get(o) == simdjson::SUCCESS);
  r.where = "f:3";
  REQUIRE(parse_workload_object(o, 512, r, &err));
  CHECK(r.where == "f:3");
  CHECK(r.timestamp_ms == 7.0);
  CHECK(r.input_length == 1024);  // integral float accepted, as for Json rows
  CHECK(r.hash_ids == std::vector<uint64_t>{5, 6});
  CHECK(r.hash_ids_consistent);
  CHECK(r.session_id == "3");
  CHECK(r.request_id == "b");
  CHECK(r.wait_for == std::vector<std::string>{"x"});
  CHECK(r.priority == 2);
  REQUIRE(p.parse(std::string(R"({"timestamp":9,"input_length":-4,"hash_ids":[1]})")).get(o) == simdjson::SUCCESS);
  CHECK_FALSE(parse_workload_object(o, 512, r, &err));
  CHECK(err == "input_length must be a non-negative integer, got -4");
  CHECK(r.timestamp_ms == 9.0);  // read before the bad field
  CHECK(r.hash_ids.empty());     // reset, not left from the previous row
  REQUIRE(p.parse(std::string(R"({"timestamp":"soon","input_length":4})")).get(o) == simdjson::SUCCESS);
  CHECK_FALSE(parse_workload_object(o, 512, r, &err));
  CHECK(err == "timestamp is not a number");
}

// The fast line parser must give exactly what simdjson + parse_workload_object give, or decline.
// Each line: parsed by both; when the fast path accepts, every field must match the slow path's
// and the slow path must accept too; some lines must be accepted (the common shapes).
TEST_CASE("parse_workload_line_fast: same row as simdjson + parse_workload_object, or declines") {
  struct Case {
    const char* line;
    bool fast;  // expected to take the fast path
  };
  const Case cases[] = {
      {R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3]})", true},
      {R"({"timestamp":3000,"session_id":"s20","parent_session_id":"s2","input_length":26353,"output_length":370,"hash_ids":[0,560]})",
       true},
      {R"(  {"timestamp": 12.5, "delay": 1e3, "tool_wait_ms": 0.25, "input_length": 512.0, "hash_ids": []}  )", true},
      {R"({"input_length": 1024, "hash_ids": [18446744073709551615], "request_id": 42, "priority": 7})",
       false},  // 20 digits
      {R"({"input_length": 1024, "hash_ids": [9999999999999999999, 1], "request_id": 42, "priority": 9223372036854775808})",
       true},
      {R"({"text_input": "hello world", "session_id": null, "extra": true, "other": "x", "n": 3.5})", true},
      {R"({"input_length": 10, "hash_ids": null, "output_length": null, "timestamp": null})", true},
      {R"({})", false},                                        // no input_length: slow path errors
      {R"({"input_length": 10, "input_length": 20})", false},  // duplicate: last wins (slow path)
      {R"({"input_length": 01})", false},                      // leading zero: malformed
      {R"({"input_length": -1})", false},                      // negative: error
      {R"({"input_length": 10, "hash_ids": [1.5]})", false},   // fractional id: error
      {R"({"input_length": 10, "hash_ids": [-1]})", false},
      {R"({"input_length": 10, "delay": -5})", false},
      {R"({"input_length": 10, "session_id": "a\"b"})", false},  // escapes
      {R"({"input_length": 10, "session_id": "é"})", false},     // non-ASCII
      {R"({"input_length": 10, "x": {"y": 1}})", false},         // nested unknown value
      {R"({"input_length": 10, "x": [1]})", false},
      {R"({"input_length": 10} x)", false},  // trailing garbage
      {R"({"input_length": 10,})", false},
      {R"({"input_length": 1e400})", false},                 // out of range
      {R"({"input_length": 10, "timestamp": "5"})", false},  // wrong type: error
      {R"({"event_type": "request_end", "input_length": 10})", false},
      {R"({"timestamp": 1, "event": {"input_length": 10}})", false},  // envelope
      {R"({"input_length": 10, "wait_for": ["a"]})", false},
      {R"({"input_length": 10, "session_id": 12.5})", false},
      {R"({"input_length": 10, "session_id": 12, "parent_session_id": true, "priority": null})", true},
      {R"({"input_length": 10, "timestamp": 0.1e1, "output_length": 2E2})", true},
      {R"({"input_length": 10, "timestamp": 1.})", false},
      {R"({"input_length": 10, "timestamp": tru})", false},
      {R"({"input_length": 10, "text_input": 5})", false},
      // Long id lists and strings, which the 8-byte scans (short_id, integer, plain_string) take:
      // every digit count up to 19 and the ids after it, each separator spacing, and the first bad
      // byte anywhere in an 8-byte word.
      {R"({"timestamp": 0, "input_length": 60000, "hash_ids": [0, 1, 22, 333, 4444, 55555, 666666, 7777777, 88888888, 999999999, 1234567890123, 9999999999999999999, 12, 3], "output_length": 5})",
       true},
      {R"({"input_length":10,"hash_ids":[7,8,9,10,11,12,13,14,15,16,17,18],"session_id":"abc","output_length":5})",
       true},
      {R"({"input_length": 10, "hash_ids": [1,  2, 3 , 4,5, 6	, 7, 8], "output_length": 5, "timestamp": 1})", true},
      {R"({"input_length": 10, "hash_ids": [1, 02, 3, 4, 5, 6, 7, 8], "output_length": 5, "timestamp": 1})", false},
      {R"({"input_length": 10, "hash_ids": [1, 2.5, 3, 4, 5, 6, 7, 8], "output_length": 5, "timestamp": 1})", false},
      {R"({"input_length": 10, "hash_ids": [1, 2e3, 3, 4, 5, 6, 7, 8], "output_length": 5, "timestamp": 1})", false},
      {R"({"input_length": 10, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, -9, 10], "output_length": 5, "timestamp": 1})",
       false},
      {R"({"input_length": 10, "hash_ids": [12345678901234567890, 1, 2, 3, 4, 5, 6], "output_length": 5})", false},
      // An integer past 64 bits anywhere is simdjson's error (the whole line is malformed), even
      // under a key no workload reads; with a fraction or an exponent it is a double.
      {R"({"timmp":4184467440737095516155,"input_length":300,"output_length":200,"hash_ids":[1009]})", false},
      {R"({"x": 4184467440737095516155.0, "input_length": 300, "output_length": 200})", true},
      {R"({"x": 4184467440737095516155e0, "input_length": 300, "output_length": 200})", true},
      {R"({"input_length": 10, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8x, 9], "output_length": 5, "timestamp": 1})", false},
      {R"({"input_length": 10, "session_id": "a_long_session_name_without_any_escape", "output_length": 5})", true},
      {R"({"input_length": 10, "session_id": "a_long_session_name\"with_quote", "output_length": 5})", false},
      {R"({"input_length": 10, "session_id": "a_long_session_name_\u00e9_x", "output_length": 5})", false},
      {"{\"input_length\": 10, \"session_id\": \"a_long_session_name\xc3\xa9_x\", \"output_length\": 5}", false},
      {"{\"input_length\": 10, \"session_id\": \"a_long_session_with_tab\t_x\", \"output_length\": 5}", false},
      {"{\"input_length\": 10, \"session_id\": \"a_long_session\x7f_del_is_plain\", \"output_length\": 5}", true},
  };
  simdjson::dom::parser parser;
  for (const Case& c : cases) {
    CAPTURE(c.line);
    dyn::records::WorkloadRow fast, slow;
    fast.where = slow.where = "f:1";
    const bool took = dyn::records::parse_workload_line_fast(c.line, 512, fast);
    CHECK(took == c.fast);
    if (!took) continue;
    simdjson::dom::object o;
    REQUIRE(parser.parse(std::string(c.line)).get_object().get(o) == simdjson::SUCCESS);
    std::string err;
    REQUIRE(dyn::records::parse_workload_object(o, 512, slow, &err));
    CHECK(fast.where == slow.where);
    CHECK(fast.timestamp_ms == slow.timestamp_ms);
    CHECK(fast.delay_ms == slow.delay_ms);
    CHECK(fast.tool_wait_ms == slow.tool_wait_ms);
    CHECK(fast.input_length == slow.input_length);
    CHECK(fast.output_length == slow.output_length);
    CHECK(fast.hash_ids == slow.hash_ids);
    CHECK(fast.session_id == slow.session_id);
    CHECK(fast.parent_session_id == slow.parent_session_id);
    CHECK(fast.request_id == slow.request_id);
    CHECK(fast.text_input == slow.text_input);
    CHECK(fast.wait_for == slow.wait_for);
    CHECK(fast.priority == slow.priority);
    CHECK(fast.hash_ids_consistent == slow.hash_ids_consistent);
  }
}

TEST_CASE("AIPerf single_turn, multi_turn and random_pool lines become text rows") {
  std::vector<WorkloadRow> rows;
  std::string err;
  // single_turn: text, timing and output length keep their meaning.
  REQUIRE(aiperf_rows(dyn::Json::parse(R"({"text": "Who are you?", "delay": 20, "output_length": 4})"),
                      DatasetType::kSingleTurn, "f:1", rows, &err));
  REQUIRE(rows.size() == 1);
  CHECK(*rows[0].text_input == "Who are you?");
  CHECK(rows[0].input_length == 3);  // 12 bytes, SPEC 4.2
  CHECK(*rows[0].delay_ms == 20);
  CHECK(*rows[0].output_length == 4);
  CHECK(rows[0].where == "f:1");
  // multi_turn: one row per turn under the conversation's session; texts joined by newlines.
  rows.clear();
  REQUIRE(aiperf_rows(dyn::Json::parse(R"({"turns": [{"texts": ["a", {"name": "q", "contents": ["b", "c"]}]},
                                                     {"text": "d", "delay": 5}]})"),
                      DatasetType::kMultiTurn, "f:7", rows, &err));
  REQUIRE(rows.size() == 2);
  CHECK(*rows[0].text_input == "a\nb\nc");
  CHECK(rows[0].session_id == "multi_turn-7");
  CHECK(rows[1].session_id == "multi_turn-7");
  CHECK(*rows[1].delay_ms == 5);
  // What cannot be sent is refused, naming the type and the field.
  rows.clear();
  CHECK_FALSE(aiperf_rows(dyn::Json::parse(R"({"text": "x", "image": "cat.png"})"), DatasetType::kSingleTurn, "f:2",
                          rows, &err));
  CHECK(err.find("single_turn: 'image'") != std::string::npos);
  CHECK_FALSE(aiperf_rows(dyn::Json::parse(R"({"turns": [{"role": "system", "text": "be brief"}]})"),
                          DatasetType::kMultiTurn, "f:3", rows, &err));
  CHECK(err.find("turn 0: multi_turn: role \"system\"") != std::string::npos);
  CHECK_FALSE(aiperf_rows(dyn::Json::parse(R"({"text": "x", "timestamp": 1, "delay": 2})"), DatasetType::kSingleTurn,
                          "f:4", rows, &err));
  CHECK_FALSE(
      aiperf_rows(dyn::Json::parse(R"({"text": "x", "delay": 2})"), DatasetType::kRandomPool, "f:5", rows, &err));
  CHECK(err.find("random_pool: 'delay'") != std::string::npos);
  // Shapes: turns, text without Mooncake fields, else Mooncake.
  CHECK(row_shape(dyn::Json::parse(R"({"turns": []})")) == DatasetType::kMultiTurn);
  CHECK(row_shape(dyn::Json::parse(R"({"text": "x"})")) == DatasetType::kSingleTurn);
  CHECK(row_shape(dyn::Json::parse(R"({"text_input": "x"})")) == DatasetType::kMooncakeTrace);
}

TEST_CASE("random_pool: seeded draws with replacement; load_workload recognises and samples") {
  std::vector<WorkloadRow> pool(3);
  for (size_t i = 0; i < 3; ++i) pool[i].text_input = std::string(1 + i, 'x');
  auto a = sample_pool(pool, 50, 7), b = sample_pool(pool, 50, 7), c = sample_pool(pool, 50, 8);
  REQUIRE(a.size() == 50);
  size_t same = 0, differ = 0;
  std::vector<int> seen(3, 0);
  for (size_t i = 0; i < 50; ++i) {
    same += *a[i].text_input == *b[i].text_input;
    differ += *a[i].text_input != *c[i].text_input;
    seen[a[i].text_input->size() - 1] = 1;
    CHECK(a[i].index == i);
  }
  CHECK(same == 50);
  CHECK(differ > 0);
  CHECK(seen == std::vector<int>{1, 1, 1});
  const std::string path = "aiperf-pool-test.jsonl";
  std::ofstream(path) << "{\"text\": \"alpha\"}\n{\"text\": \"beta\"}\n";
  WorkloadOptions o;
  o.dataset_type = DatasetType::kRandomPool;
  o.pool_samples = 5;
  o.quiet = true;
  auto w = load_workload({path}, o);
  CHECK(w.ok());
  CHECK(w.rows.size() == 5);
  CHECK(w.dataset_type == DatasetType::kRandomPool);
  // Unnamed, the same file is single_turn: each line once.
  o.dataset_type = DatasetType::kAuto;
  auto s = load_workload({path}, o);
  CHECK(s.rows.size() == 2);
  CHECK(s.dataset_type == DatasetType::kSingleTurn);
  std::remove(path.c_str());
}
