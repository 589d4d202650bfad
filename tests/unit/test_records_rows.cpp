// Goldens of the one writer per record type (lib/dyn/records/rows.h): request_end and
// route_decision bytes, and that they are what Json::dump() writes for the same row.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/records/rows.h"

using dyn::Json;
using namespace dyn::records;

namespace {
std::string row(const RequestEnd& r) {
  std::string s;
  append_request_end(s, r);
  return s;
}
std::string row(const RouteDecision& d) {
  std::string s;
  append_route_decision(s, d);
  return s;
}
// The bytes are Json::dump()'s: parsing (ordered, numbers kept as written) and dumping again
// gives the same text, so a reader and a re-writer agree with the producer.
void check_is_dump(const std::string& s) { CHECK(Json::parse(s).dump() == s); }
}  // namespace

TEST_CASE("request_end: every field, in the fixed key order of docs/records.md") {
  const std::vector<uint64_t> seq{7, 18446744073709551615ull};
  const std::vector<RequestEnd::ToolCall> calls{{0, 0, "call_1", "grep"}, {0, 1, "", ""}};
  const std::vector<double> gaps{1.5, 2.0};
  const std::vector<uint64_t> chunk{3, 4, 5};
  const std::vector<uint64_t> ids{11, 12};
  const Json compaction = {{"request_kind", "compaction"}};
  RequestEnd r;
  r.event_time_unix_ms = 1700000000123;
  r.event_source = "client";
  r.agent_context = {"s\"1", "p", true, &compaction, std::nullopt, std::nullopt};
  r.request_id = "s1:0";
  r.x_request_id = "x\n";
  r.model = "m";
  r.input_tokens = 100;
  r.output_tokens = 3;
  r.cached_tokens = 64;
  r.request_received_ms = 1700000000000;
  r.ttft_ms = 12.25;
  r.total_time_ms = 123.0;
  r.avg_itl_ms = 0.1;
  r.kv_hit_rate = 0.64;
  r.worker = 2;
  r.replay = RequestEnd::Replay{64, 100, seq};
  r.finish_reason = "tool_calls";
  r.tool_calls = calls;
  r.status = "ok";
  r.warning = "w";
  r.ttst_ms = 1.5;
  r.inter_chunk_ms = gaps;
  r.chunk_tokens = chunk;
  r.request_latency_ms = 120.5;
  r.schedule_lag_ms = 0.0;
  r.scheduled_ms = 10.0;
  r.hash_ids = ids;
  r.block_size = 64;
  r.turn = 0;
  r.binding = "new";
  r.pause_ms = 0.0;
  r.queue_ms = 2.5;
  r.warmup = true;
  r.input_tokens_estimated = true;
  r.output_tokens_estimated = true;
  r.prompt_sizing = RequestEnd::PromptSizing{100, 101};
  const std::string s = row(r);
  CHECK(
      s ==
      R"({"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1700000000123,)"
      R"("event_source":"client","agent_context":{"session_id":"s\"1","parent_session_id":"p","session_final":true,)"
      R"("compaction":{"request_kind":"compaction"}},"request":{"request_id":"s1:0","x_request_id":"x\n","model":"m",)"
      R"("input_tokens":100,"output_tokens":3,"cached_tokens":64,"request_received_ms":1700000000000,"ttft_ms":12.25,)"
      R"("total_time_ms":123.0,"avg_itl_ms":0.1,"kv_hit_rate":0.64,"worker":{"decode_worker_id":2},)"
      R"("replay":{"trace_block_size":64,"input_length":100,"input_sequence_hashes":[7,18446744073709551615]},)"
      R"("finish_reason_metadata":{"finish_reason":"tool_calls","tool_calls":[{"choice_index":0,"tool_call_index":0,)"
      R"("id":"call_1","name":"grep"},{"choice_index":0,"tool_call_index":1}]}},"dyn":{"status":"ok","warning":"w",)"
      R"("ttst_ms":1.5,"inter_chunk_ms":[1.5,2.0],"chunk_tokens":[3,4,5],"request_latency_ms":120.5,)"
      R"("schedule_lag_ms":0.0,"scheduled_ms":10.0,"hash_ids":[11,12],"block_size":64,"turn":0,"binding":"new",)"
      R"("pause_ms":0.0,"queue_ms":2.5,"warmup":true,"input_tokens_estimated":true,"output_tokens_estimated":true,)"
      R"("prompt_sizing":{"input_length":100,"tokenizer_tokens":101}}})");
  check_is_dump(s);
}

TEST_CASE("request_end: a minimal error row omits every unset field; empty arrays that are set stay") {
  RequestEnd r;
  r.event_time_unix_ms = 5;
  r.event_source = "simulator";
  r.request_id = "row-0";
  r.input_tokens = 0;
  r.request_received_ms = 4;
  r.status = "error";
  r.error = RequestEnd::Failure{400, "invalid_request", "too long"};
  r.hash_ids = std::span<const uint64_t>();
  r.inter_chunk_ms = std::span<const double>();
  const std::string s = row(r);
  CHECK(s == R"({"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5,)"
             R"("event_source":"simulator","request":{"request_id":"row-0","input_tokens":0,"request_received_ms":4},)"
             R"("dyn":{"status":"error","error":{"code":400,"type":"invalid_request","message":"too long"},)"
             R"("inter_chunk_ms":[],"hash_ids":[]}})");
  check_is_dump(s);
}

TEST_CASE("request_end: a worker header that is not a number; finish_reason_metadata with tool calls only") {
  const std::vector<RequestEnd::ToolCall> calls{{1, 0, "", "f"}};
  RequestEnd r;
  r.event_source = "client";
  r.request_id = "a";
  r.worker_text = "w-1";
  r.tool_calls = calls;
  const std::string s = row(r);
  CHECK(s.find(R"("worker":{"decode_worker_id":"w-1"},"finish_reason_metadata":{"tool_calls":[{"choice_index":1,)"
               R"("tool_call_index":0,"name":"f"}]}})") != std::string::npos);
  check_is_dump(s);
}

TEST_CASE("request_end: invalid UTF-8 in header-borne text becomes U+FFFD, as dump's replace handler writes") {
  RequestEnd r;
  r.event_source = "router";
  r.agent_context.session_id = "s\xff";
  r.request_id = "r";
  r.x_request_id = "a\xc3(b";
  r.status = "error";
  r.error = RequestEnd::Failure{0, "connection", "bad \xed\xa0\x80 bytes"};
  const std::string s = row(r);
  const std::string x = Json(std::string("a\xc3(b")).dump(-1, ' ', false, Json::error_handler_t::replace);
  CHECK(x == "\"a\xef\xbf\xbd(b\"");
  CHECK(s.find(R"("session_id":"s)"
               "\xef\xbf\xbd"
               R"(")") != std::string::npos);
  CHECK(s.find(R"("x_request_id":)" + x) != std::string::npos);
  CHECK(s.find(R"("message":"bad )") != std::string::npos);
  check_is_dump(s);  // what came out is valid UTF-8
}

TEST_CASE("route_decision: placed with --explain, and refused") {
  const std::vector<RouteDecision::Candidate> ws{{0, 2, 1.0, 0.0, 1.5, true}, {1, 0, 3.0, 2.0, 5.0, false}};
  RouteDecision d;
  d.event_time_unix_ms = 1000;
  d.agent_context.session_id = "s";
  d.request_id = "s:0";
  d.x_request_id = "x";
  d.input_tokens = 40;
  d.output_tokens = 8;
  d.cached_tokens = 0;
  d.kv_hit_rate = 0.0;
  d.worker = 0;
  d.binding = "new";
  d.request_blocks = 3;
  d.explain = true;
  d.candidates = ws;
  std::string s = row(d);
  CHECK(s ==
        R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":1000,)"
        R"("event_source":"router","agent_context":{"session_id":"s"},"request":{"request_id":"s:0",)"
        R"("x_request_id":"x","input_tokens":40,"output_tokens":8,"cached_tokens":0,"kv_hit_rate":0.0,)"
        R"("worker":{"decode_worker_id":0}},"dyn":{"binding":"new","request_blocks":3,"explain":{"request_blocks":3,)"
        R"("workers":[{"worker":0,"overlap_blocks":2,"prefill_blocks":1.0,"decode_blocks":0.0,"cost":1.5,)"
        R"("eligible":true},{"worker":1,"overlap_blocks":0,"prefill_blocks":3.0,"decode_blocks":2.0,"cost":5.0,)"
        R"("eligible":false}]}}})");
  check_is_dump(s);

  RouteDecision e;
  e.request_id = "row-1";
  e.input_tokens = 7;
  e.error = RouteDecision::Refusal{3, "line\nbreak"};
  s = row(e);
  CHECK(s == R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":0,)"
             R"("event_source":"router","request":{"request_id":"row-1","input_tokens":7},)"
             R"("dyn":{"binding":"none","error":{"code":3,"message":"line\nbreak"}}})");
  check_is_dump(s);
}

TEST_CASE("route_decision and request_end: the decision quality fields (issue 55)") {
  RouteDecision d;
  d.event_time_unix_ms = 5;
  d.request_id = "r1";
  d.input_tokens = 64;
  d.cached_tokens = 16;
  d.kv_hit_rate = 0.25;
  d.worker = 1;
  d.binding = "hit";
  d.request_blocks = 4;
  d.quality = RouteDecision::Quality{16, -2.5, 1, 32, "affinity", 12.5, std::nullopt, 1};
  std::string s = row(d);
  CHECK(s == R"({"schema":"dynamo.request.trace.v1","event_type":"route_decision","event_time_unix_ms":5,)"
             R"("event_source":"router","request":{"request_id":"r1","input_tokens":64,"cached_tokens":16,)"
             R"("kv_hit_rate":0.25,"worker":{"decode_worker_id":1}},"dyn":{"binding":"hit","request_blocks":4,)"
             R"("block_size":16,"margin":-2.5,"ties":1,"avoidable_prefill_tokens":32,"kv_optimal":false,)"
             R"("non_max_cause":"affinity","router_queue_ms":12.5,"attempt":1}})");
  check_is_dump(s);
  d.quality = RouteDecision::Quality{16, std::nullopt, 0, 0, "", std::nullopt, 3.0, 0};
  s = row(d);
  CHECK(s.find(R"("block_size":16,"ties":0,"avoidable_prefill_tokens":0,"kv_optimal":true,"pause_ms":3.0,)"
               R"("attempt":0}})") != std::string::npos);
  check_is_dump(s);

  RequestEnd r;
  r.request_id = "r1";
  r.input_tokens = 64;
  r.cached_tokens = 0;
  r.quality = RequestEnd::Quality{16, 32, "load"};
  s = row(r);
  CHECK(s.find(R"("predicted_cached_tokens":16,"stale_cached_tokens":16,"avoidable_prefill_tokens":32,)"
               R"("kv_optimal":false,"non_max_cause":"load"}})") != std::string::npos);
  check_is_dump(s);
  r.cached_tokens = 48;  // the engine held more than the router knew: a negative difference
  r.quality = RequestEnd::Quality{16, 0, ""};
  s = row(r);
  CHECK(s.find(R"("predicted_cached_tokens":16,"stale_cached_tokens":-32,"avoidable_prefill_tokens":0,)"
               R"("kv_optimal":true}})") != std::string::npos);
  check_is_dump(s);
}

TEST_CASE("tool events: Dynamo's normalized row, the router's join under dyn, optionals omitted") {
  ToolEvent e;
  e.event_type = "tool_end";
  e.event_time_unix_ms = 1777312801500;
  e.session_id = "run:researcher";
  e.parent_session_id = "run:planner";
  e.tool_call_id = "call-abc";
  e.tool_class = "web_search";
  e.status = "succeeded";
  e.started_at_unix_ms = 1777312801080;
  e.duration_ms = 420.5;
  e.error_type = "bad\xff";
  ToolEventJoin join{"req-1", true};
  std::string row;
  append_tool_event(row, e, &join);
  CHECK(row ==
        R"({"schema":"dynamo.request.trace.v1","event_type":"tool_end","event_time_unix_ms":1777312801500,)"
        R"("event_source":"harness","agent_context":{"session_id":"run:researcher","parent_session_id":"run:planner"},)"
        R"("tool":{"tool_call_id":"call-abc","tool_class":"web_search","status":"succeeded",)"
        R"("started_at_unix_ms":1777312801080,"duration_ms":420.5,"error_type":"bad)"
        "\xef\xbf\xbd"  // U+FFFD, as dump's replace handler writes it
        R"("},)"
        R"("dyn":{"request_id":"req-1","known_session":true}})");
  ToolEvent s;
  s.event_type = "tool_start";
  s.event_time_unix_ms = 5;
  s.session_id = "s";
  s.tool_call_id = "c";
  s.tool_class = "Bash";
  row.clear();
  append_tool_event(row, s);
  CHECK(
      row ==
      R"({"schema":"dynamo.request.trace.v1","event_type":"tool_start","event_time_unix_ms":5,)"
      R"("event_source":"harness","agent_context":{"session_id":"s"},"tool":{"tool_call_id":"c","tool_class":"Bash"}})");
}
