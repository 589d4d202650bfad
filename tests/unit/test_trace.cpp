// Unit tests for lib/dyn/trace, the dyn-trace subcommands: filter's --where and --fields,
// sessionize, convert (Azure timestamps, the agentic form).
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dyn/base/json.h"
#include "dyn/io/output.h"
#include "dyn/records/workload.h"
#include "dyn/trace/convert.h"
#include "dyn/trace/filter.h"
#include "dyn/trace/sessionize.h"

using namespace dyn::records;
using namespace dyn::trace;

namespace {
Where W(const char* e) {
  auto w = parse_where(e);
  REQUIRE(w.ok());
  return *w;
}

std::string tmpdir() {
  char tmpl[] = "/tmp/dyn-trace-test-XXXXXX";
  return mkdtemp(tmpl);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("parse_where: operators, spaces, quoting, numbers") {
  auto w = W("request.cached_tokens > 0");
  CHECK(w.path == std::vector<std::string>{"request", "cached_tokens"});
  CHECK(w.op == Where::Op::kGt);
  CHECK(w.num == Where::Num::kUint);
  CHECK(W("a!=x").op == Where::Op::kNe);
  CHECK(W("a<=1").op == Where::Op::kLe);
  CHECK(W("a>=1").op == Where::Op::kGe);
  CHECK(W("a==1").op == Where::Op::kEq);
  CHECK(W("a~x").op == Where::Op::kContains);
  CHECK(W("a=-5").num == Where::Num::kInt);
  CHECK(W("a=1.5").num == Where::Num::kDouble);
  CHECK(W("a=18446744073709551615").u == UINT64_MAX);
  auto q = W("a=\"42\"");
  CHECK(q.quoted);
  CHECK(q.text == "42");
  CHECK_FALSE(parse_where("no operator").ok());
  CHECK_FALSE(parse_where("=3").ok());
  CHECK_FALSE(parse_where("a b=3").ok());
  CHECK_FALSE(parse_where("a!3").ok());
}

TEST_CASE("compare_where: u64 exact, strings, substring, missing, mismatched types") {
  // 2^64-1 and 2^64-2 are the same double: an exact comparison must tell them apart (case 26).
  CHECK(compare_where(W("x=18446744073709551614"), std::string_view("18446744073709551614")));
  CHECK_FALSE(compare_where(W("x=18446744073709551614"), std::string_view("18446744073709551615")));
  CHECK(compare_where(W("x>18446744073709551614"), std::string_view("18446744073709551615")));
  CHECK(compare_where(W("x<0"), std::string_view("-1")));
  CHECK(compare_where(W("x>-2"), std::string_view("-1")));
  CHECK(compare_where(W("x<1.5"), std::string_view("1")));
  CHECK(compare_where(W("x>=2.5"), std::string_view("2.5")));
  CHECK(compare_where(W("x=abc"), std::string_view("\"abc\"")));
  CHECK(compare_where(W("x<abd"), std::string_view("\"abc\"")));
  CHECK(compare_where(W("x~research"), std::string_view("\"research-run-42:planner\"")));
  CHECK_FALSE(compare_where(W("x~zzz"), std::string_view("\"research-run-42\"")));
  CHECK(compare_where(W("x=42"), std::string_view("\"42\"")));        // string field: text compare
  CHECK_FALSE(compare_where(W("x=\"42\""), std::string_view("42")));  // quoted: string only
  CHECK_FALSE(compare_where(W("x<5"), std::nullopt));
  CHECK(compare_where(W("x!=5"), std::nullopt));
  CHECK_FALSE(compare_where(W("x>5"), std::string_view("\"10\"")));  // string field: byte order
  CHECK_FALSE(compare_where(W("x>5"), std::string_view("null")));
  CHECK(compare_where(W("x=true"), std::string_view("true")));
  CHECK(compare_where(W("x=null"), std::string_view("null")));
  CHECK(compare_where(W("x~web_search"), std::string_view("[{\"name\":\"web_search\"}]")));
}

TEST_CASE("parse_fields: paths and renames") {
  auto f = parse_fields("request.cached_tokens,session=agent_context.session_id");
  REQUIRE(f.ok());
  REQUIRE(f->size() == 2);
  CHECK((*f)[0].name == "request.cached_tokens");
  CHECK((*f)[1].name == "session");
  CHECK((*f)[1].path == std::vector<std::string>{"agent_context", "session_id"});
  CHECK_FALSE(parse_fields("a,,b").ok());
  CHECK_FALSE(parse_fields("=a").ok());
}

TEST_CASE("sessionize: hand-made trace with known sessions, forks and delays") {
  WorkloadOptions o;
  o.block_size = 4;
  auto w = load_workload({std::string(DYN_SOURCE_DIR) + "/tests/fixtures/sessionize-known.jsonl"}, o);
  REQUIRE(w.ok());
  SessionizeOptions so;
  so.block_size = 4;
  auto st = sessionize(w.rows, so);
  std::vector<std::string> got;
  for (auto& r : w.rows) got.push_back(r.session_id);
  // A: rows 0,4,9; B: 1,6; C: 2; X (only the shared prompt): 3; D: 5; Y: 7; fork of A: 8; Z: 10.
  CHECK(got == std::vector<std::string>{"s0", "s1", "s2", "s3", "s0", "s4", "s1", "s5", "s6", "s0", "s7"});
  CHECK(w.rows[8].parent_session_id == "s0");
  CHECK(st.sessions == 8);
  CHECK(st.multi_turn_sessions == 2);
  CHECK(st.multi_turn_rows == 5);
  CHECK(st.continued == 3);
  CHECK(st.forks == 1);
  CHECK(st.longest == 3);
  // A2 starts at 1000; A1 (12 tokens, nothing cached, 10 out) ends at 0 + 74.08 ms.
  CHECK(w.rows[4].delay_ms == 926.0);
  CHECK_FALSE(w.rows[0].delay_ms.has_value());
  CHECK_FALSE(w.rows[8].delay_ms.has_value());
  // The output reloads as a valid session workload (delay on every later turn).
  for (auto& r : w.rows) {
    std::string err;
    CHECK(parse_workload_row(workload_row_to_json(r), 4, "x", &err));
  }
}

TEST_CASE("sessionize: rows sharing only a popular prefix stay apart; fan-out threshold matters") {
  std::vector<WorkloadRow> rows;
  auto add = [&](double ts, uint64_t in, std::vector<uint64_t> ids) {
    WorkloadRow r;
    r.timestamp_ms = ts;
    r.input_length = in;
    r.output_length = 1;
    r.hash_ids = std::move(ids);
    rows.push_back(r);
  };
  add(0, 8, {0, 1});      // full blocks [0, 1]
  add(1, 12, {0, 1, 2});  // continues row 0
  add(2, 12, {0, 3, 4});
  add(3, 12, {0, 5, 6});
  SessionizeOptions so;
  so.block_size = 4;
  so.shared_fanout = 3;  // [0] has 3 continuations (1, 3, 5): shared
  auto copy = rows;
  sessionize(copy, so);
  CHECK(copy[1].session_id == copy[0].session_id);
  CHECK(copy[2].session_id != copy[0].session_id);
  CHECK(estimate_service_ms(100, 100, 0) == 0.0);
  CHECK(estimate_service_ms(1000, 0, 2) == doctest::Approx(4.209989e-07 * 1e6 + 15.18344 + 16.50142 + 11.48));
}

TEST_CASE("azure timestamps: 7 fractional digits to 100 ns ticks") {
  auto t = parse_azure_timestamp("2023-11-16 18:17:03.9799600");
  REQUIRE(t.ok());
  CHECK(*t == 17001586239799600LL);
  CHECK(*parse_azure_timestamp("1970-01-01 00:00:00") == 0);
  CHECK(*parse_azure_timestamp("1970-01-01 00:00:00.5") == 5000000);
  CHECK_FALSE(parse_azure_timestamp("2023-11-16").ok());
  CHECK_FALSE(parse_azure_timestamp("2023-13-16 18:17:03").ok());
  CHECK_FALSE(parse_azure_timestamp("2023-11-16 18:17:03.").ok());
}

TEST_CASE("agentic form: request ids, wait_for chains, tool_wait_ms from delay") {
  Workload w;
  auto add = [&](std::string sid, std::optional<double> ts, std::optional<double> delay) {
    WorkloadRow r;
    r.session_id = std::move(sid);
    r.timestamp_ms = ts;
    r.delay_ms = delay;
    r.input_length = 10;
    r.output_length = 2;
    r.hash_ids = {1};
    w.rows.push_back(r);
  };
  add("a", 0, std::nullopt);
  add("", 5, std::nullopt);
  add("a", std::nullopt, 250.0);
  add("a", std::nullopt, std::nullopt);
  auto rows = to_agentic_rows(w);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0]["request_id"] == "a:0");
  CHECK(rows[0]["timestamp"] == 0);
  CHECK_FALSE(rows[0].contains("wait_for"));
  CHECK(rows[1]["request_id"] == "row-1");
  CHECK(rows[2]["request_id"] == "a:1");
  CHECK(rows[2]["wait_for"] == dyn::Json::array({"a:0"}));
  CHECK(rows[2]["tool_wait_ms"] == 250);
  CHECK_FALSE(rows[2].contains("timestamp"));
  CHECK(rows[3]["wait_for"] == dyn::Json::array({"a:1"}));
  CHECK_FALSE(rows[3].contains("tool_wait_ms"));
}

TEST_CASE("filter: projected names written as Json::dump writes them; envelopes unwrapped; bad rows skipped") {
  const std::string d = tmpdir();
  std::ofstream(d + "/in.jsonl", std::ios::binary)
      << "{\"timestamp\":1,\"event\":{\"event_type\":\"request_end\",\"request\":{\"request_id\":\"a\"}},\"x\":0}\n"
      << "{bad\n"
      << "{\"event_type\":\"request_end\",\"request\":{\"request_id\":\"b\\u0008\"}}\n";
  FilterOptions o;
  o.inputs = {d + "/in.jsonl"};
  auto fields = parse_fields(std::string("id\b\f\x01=request.request_id"));
  REQUIRE(fields.ok());
  o.fields = *fields;
  {
    dyn::io::Output out(d + "/out.jsonl");
    CHECK(filter_traces(o, out) == 0);
    out.close();
  }
  // The key through the one string writer (\b and \f short, like the value simdjson wrote).
  dyn::Json key = dyn::Json::object({{"id\b\f\x01", "a"}});
  CHECK(slurp(d + "/out.jsonl") == key.dump() + "\n" + R"({"id\b\f\u0001":"b\b"})" + "\n");
  o.fields.clear();
  o.strict = true;
  dyn::io::Output out(d + "/whole.jsonl");
  CHECK(filter_traces(o, out) == dyn::kExitBadData);  // strict: the malformed row fails the run
  out.close();
  CHECK(slurp(d + "/whole.jsonl") ==
        "{\"event_type\":\"request_end\",\"request\":{\"request_id\":\"a\"}}\n"
        "{\"event_type\":\"request_end\",\"request\":{\"request_id\":\"b\\u0008\"}}\n");
}
