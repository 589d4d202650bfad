// Unit tests for lib/dyn/replay live replay: session headers per client style, the dispatch
// plan (AIPerf fixtures, offsets, sessions, rates), and whole runs against an in-process server
// (cases 06 and 08, errors, closed-loop sessions, delta history, records).
#include <doctest/doctest.h>
#include <algorithm>
#include <cmath>
#include <atomic>
#include <memory>
#include <thread>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "dyn/replay/live.h"
#include "dyn/replay/schedule.h"
#include "dyn/replay/session.h"
#include "dyn/session/normalize.h"
#include "dyn/records/workload.h"
#include "http_test_server.h"

using namespace dyn::replay;
using dyn::Json;
using dyn::testing::TestServer;
namespace records = dyn::records;

namespace {

std::string repo(const std::string& rel) { return std::string(DYN_SOURCE_DIR) + "/" + rel; }

std::string header(const dyn::http::HeaderList& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (k == name) return v;
  return "<absent>";
}

/// A workload from inline JSONL text (written to a temporary file).
records::Workload workload_of(const std::string& jsonl, records::WorkloadOptions o = {}) {
  static int n = 0;
  std::string path = "/tmp/dyn-test-replay-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".jsonl";
  std::ofstream(path) << jsonl;
  auto w = records::load_workload({path}, o);
  std::remove(path.c_str());
  return w;
}

/// Received requests, in arrival order.
struct Seen {
  std::mutex mu;
  std::vector<Json> bodies;
  std::vector<std::map<std::string, std::string>> headers;
  std::vector<double> at_ms;
};

/// A scripted OpenAI endpoint: streams `reply` word by word with usage; "fail-503" in the prompt
/// gets a 503; every response names worker 1.
void serve_chat(TestServer& srv, Seen& seen, int delay_ms = 0) {
  srv.server.Post("/v1/chat/completions", [&seen, delay_ms](const httplib::Request& req, httplib::Response& res) {
    Json body = Json::parse(req.body);
    {
      std::lock_guard<std::mutex> lk(seen.mu);
      seen.bodies.push_back(body);
      std::map<std::string, std::string> h;
      for (const auto& [k, v] : req.headers) h[k] = v;
      seen.headers.push_back(h);
      seen.at_ms.push_back(dyn::RealClock::instance().now_ms());
    }
    std::string prompt = body["messages"].back()["content"].get<std::string>();
    if (prompt.find("fail-503") != std::string::npos) {
      res.status = 503;
      res.set_content(R"({"error":{"message":"overloaded","type":"unavailable"}})", "application/json");
      return;
    }
    res.set_header("x-dyn-worker", "1");
    size_t isl = (prompt.size() + 3) / 4;
    res.set_chunked_content_provider("text/event-stream", [isl, delay_ms](size_t, httplib::DataSink& sink) {
      auto send = [&](const std::string& s) { sink.write(s.data(), s.size()); };
      for (const char* word : {"one ", "two ", "six "}) {
        if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        send(dyn::testing::chunk(word));
      }
      send(dyn::testing::chunk("", "stop"));
      send("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(isl) +
           ",\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n");
      send("data: [DONE]\n\n");
      sink.done();
      return true;
    });
  });
}

std::vector<Json> run_rows(const records::Workload& w, LiveOptions o, LiveStats* stats = nullptr) {
  std::string path = "/tmp/dyn-test-replay-out-" + std::to_string(getpid()) + ".jsonl";
  LiveStats st;
  {
    dyn::io::Output out(path);
    st = run_live(w, o, out);
    out.close();
  }
  if (stats) *stats = st;
  std::ifstream f(path);
  std::vector<Json> rows;
  for (std::string line; std::getline(f, line);) rows.push_back(Json::parse(line));
  std::remove(path.c_str());
  return rows;
}

LiveOptions opts_for(const TestServer& srv) {
  LiveOptions o;
  o.client.endpoint = *dyn::http::Endpoint::parse(srv.url());
  o.client.read_timeout_s = 5;
  o.model = "m";
  return o;
}

const Json* by_id(const std::vector<Json>& rows, const std::string& id) {
  for (const auto& r : rows)
    if (r["request"]["request_id"] == id) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("sessions: turns, roots through parent chains, request ids") {
  auto w = workload_of(
      "{\"session_id\":\"a\",\"timestamp\":0,\"input_length\":4,\"hash_ids\":[1]}\n"
      "{\"session_id\":\"b\",\"parent_session_id\":\"a\",\"timestamp\":5,\"input_length\":4,\"hash_ids\":[2]}\n"
      "{\"session_id\":\"c\",\"parent_session_id\":\"b\",\"timestamp\":6,\"input_length\":4,\"hash_ids\":[3]}\n"
      "{\"session_id\":\"a\",\"timestamp\":9,\"input_length\":4,\"hash_ids\":[1]}\n"
      "{\"timestamp\":9,\"input_length\":4,\"hash_ids\":[1]}\n");
  REQUIRE(w.ok());
  auto p = plan_sessions(w.rows);
  CHECK(p.turn == std::vector<uint32_t>{0, 0, 0, 1, 0});
  CHECK(p.root[2] == "a");
  CHECK(p.prev_turn[3] == 0);
  CHECK_FALSE(p.last_turn[0]);
  CHECK(p.last_turn[3]);
  CHECK(p.parent_row[1] == 0);
  CHECK(p.parent_row[2] == 1);
  CHECK(request_id_for(w.rows[3], 1, 3) == "a:1");
  CHECK(request_id_for(w.rows[4], 0, 4) == "row-4");
}

TEST_CASE("sessions: a subagent's later turns keep its parent when their rows omit it (every header style agrees)") {
  auto w = workload_of(
      "{\"session_id\":\"root\",\"timestamp\":0,\"input_length\":4,\"hash_ids\":[1]}\n"
      "{\"session_id\":\"child\",\"parent_session_id\":\"root\",\"timestamp\":1,\"input_length\":4,\"hash_ids\":[2]}\n"
      "{\"session_id\":\"grand\",\"parent_session_id\":\"child\",\"timestamp\":2,\"input_length\":4,\"hash_ids\":[3]}\n"
      "{\"session_id\":\"grand\",\"timestamp\":3,\"input_length\":4,\"hash_ids\":[3]}\n");
  REQUIRE(w.ok());
  auto p = plan_sessions(w.rows);
  CHECK(p.parent == std::vector<std::string>{"", "root", "child", "child"});
  // Turn 2 of "grand" as each style sends it, normalized back: the same session and parent.
  const Identity turn2{"grand", p.parent[3], p.root[3], true};
  for (const auto& style : dyn::session::client_styles()) {
    if (style.produces == dyn::session::Source::kNone) continue;
    CAPTURE(style.name);
    auto id = dyn::session::normalize(dyn::session::write_headers(style, turn2));
    REQUIRE(id.ok());
    REQUIRE(id->context);
    CHECK(id->context->session_id == "grand");
    CHECK(id->context->parent_session_id == "child");
  }
}

TEST_CASE("expected_end_ms: the schedule's length, then its rest with the replies known so far") {
  // Two independent arrivals at 0 and 3000 ms, and a session turn 500 ms after the first ends.
  std::vector<PlanItem> items(3);
  items[0].at_ms = 0;
  items[1].at_ms = 3000;
  items[2].deps = {0};
  items[2].delay_ms = 500;
  const double nan = NAN;
  std::vector<double> sent(3, nan), ended(3, nan);
  // Before anything is sent: the last arrival, service time unknown (0).
  CHECK(expected_end_ms(items, sent, ended, 0, 0) == 3000);
  // With a mean latency of 100 ms: the last request ends 100 ms after its arrival.
  CHECK(expected_end_ms(items, sent, ended, 0, 100) == 3100);
  // The first request took 4000 ms: its session turn follows it (4500 + 100), past the schedule.
  sent[0] = 0;
  ended[0] = 4000;
  CHECK(expected_end_ms(items, sent, ended, 4000, 100) == 4600);
  // At 5000 ms the session turn, due at 4500 but not sent, starts no earlier than now (ends 5100);
  // the request in flight since 3000 ends no earlier than now.
  sent[1] = 3000;
  CHECK(expected_end_ms(items, sent, ended, 5000, 100) == 5100);
  CHECK(expected_end_ms(items, sent, ended, 5000, 1000) == 6000);
}

TEST_CASE("plan: AIPerf fixtures load as AIPerf loads them") {
  records::WorkloadOptions lo;
  lo.require_timestamps_if_first_has = true;
  for (auto f : {"example_trace.jsonl", "precise_schedule.jsonl", "production_queries.jsonl", "custom_trace.jsonl",
                 "test_trace_session_ids.jsonl", "test_trace_delay.jsonl", "test_trace_offset_filtering.jsonl"}) {
    INFO(f);
    auto w = records::load_workload({repo(std::string("data/aiperf/") + f)}, lo);
    CHECK(w.ok());
  }
  // Offsets are inclusive: 1500..2500 keeps 2000 and 2500, and time 0 is the start offset.
  auto w = records::load_workload({repo("data/aiperf/test_trace_offset_filtering.jsonl")}, lo);
  ScheduleOptions so;
  so.start_offset_ms = 1500;
  so.end_offset_ms = 2500;
  auto plan = build_plan(w, so);
  REQUIRE(plan.items.size() == 2);
  CHECK(*plan.items[0].at_ms == 500);
  CHECK(*plan.items[1].at_ms == 1000);
  CHECK(plan.outside_offsets == 2);
  // precise_schedule with 2000/4000: rows at 2000, 2500, 3000, 4000.
  auto ps = records::load_workload({repo("data/aiperf/precise_schedule.jsonl")}, lo);
  so.start_offset_ms = 2000;
  so.end_offset_ms = 4000;
  CHECK(build_plan(ps, so).items.size() == 4);
  // Auto offset and speedup on example_trace: 0, 10535, 27482 -> 0, 5267.5, 13741.
  auto ex = records::load_workload({repo("data/aiperf/example_trace.jsonl")}, lo);
  ScheduleOptions sp;
  sp.speedup = 2;
  sp.auto_offset = true;
  auto pe = build_plan(ex, sp);
  REQUIRE(pe.items.size() == 3);
  CHECK(*pe.items[1].at_ms == doctest::Approx(5267.5));
  CHECK(*pe.items[2].at_ms == doctest::Approx(13741));
  // Session ids group turns: session-1's second turn waits for the first (+ recorded gap 1000).
  auto si = records::load_workload({repo("data/aiperf/test_trace_session_ids.jsonl")}, lo);
  auto pi = build_plan(si, ScheduleOptions{});
  REQUIRE(pi.items.size() == 3);
  CHECK(pi.items[1].deps == std::vector<size_t>{0});
  CHECK(pi.items[1].delay_ms == 1000);
  CHECK_FALSE(pi.items[1].at_ms.has_value());
  CHECK(pi.items[1].request_id == "session-1:1");
  CHECK(*pi.items[2].at_ms == 3000);
}

TEST_CASE("plan: request rate processes, request count, wait_for") {
  std::string rows;
  for (int i = 0; i < 200; ++i) rows += "{\"input_length\":8,\"hash_ids\":[" + std::to_string(i) + "]}\n";
  auto w = workload_of(rows);
  ScheduleOptions o;
  o.mode = LoadMode::kRequestRate;
  o.request_rate = 100;
  auto c = build_plan(w, o);
  CHECK(*c.items[0].at_ms == 0);
  CHECK(*c.items[10].at_ms == doctest::Approx(100));
  o.rate_mode = RateMode::kPoisson;
  o.seed = 7;
  auto p1 = build_plan(w, o), p2 = build_plan(w, o);
  CHECK(*p1.items[199].at_ms == *p2.items[199].at_ms);  // seeded
  CHECK(*p1.items[199].at_ms == doctest::Approx(1990).epsilon(0.25));
  o.rate_mode = RateMode::kGamma;
  o.gamma_shape = 50;  // nearly constant
  auto g = build_plan(w, o);
  CHECK(*g.items[100].at_ms == doctest::Approx(1000).epsilon(0.05));
  o.request_count = 5;
  CHECK(build_plan(w, o).items.size() == 5);

  auto wf = workload_of(
      "{\"request_id\":\"r1\",\"input_length\":4,\"hash_ids\":[1]}\n"
      "{\"request_id\":\"r2\",\"input_length\":4,\"hash_ids\":[1],\"wait_for\":[\"r1\"],\"tool_wait_ms\":30}\n"
      "{\"request_id\":\"r3\",\"input_length\":4,\"hash_ids\":[1],\"wait_for\":[\"nope\"]}\n");
  ScheduleOptions cc;
  cc.mode = LoadMode::kConcurrency;
  auto pw = build_plan(wf, cc);
  CHECK(pw.items[1].deps == std::vector<size_t>{0});
  CHECK(pw.items[1].delay_ms == 30);
  REQUIRE(pw.errors.size() == 1);
  CHECK(pw.errors[0].find("'nope'") != std::string::npos);
}

TEST_CASE("case 06: strict rejects before sending; lenient sends exactly input_length tokens") {
  TestServer srv;
  Seen seen;
  serve_chat(srv, seen);
  srv.start();
  records::WorkloadOptions strict;
  strict.require_timestamps_if_first_has = true;
  auto bad = records::load_workload({repo("tests/fixtures/cases/06-mooncake-hashids-vs-length/trace.jsonl")}, strict);
  REQUIRE(bad.errors.size() == 2);
  CHECK(bad.errors[0].find(":2: input_length 20 needs 1 hash_ids at block size 512, row has 2") != std::string::npos);
  CHECK(bad.errors[1].find(":3: input_length 1500 needs 3 hash_ids at block size 512, row has 2") != std::string::npos);
  records::WorkloadOptions lenient = strict;
  lenient.strict_hash_ids = false;
  auto w = records::load_workload({repo("tests/fixtures/cases/06-mooncake-hashids-vs-length/trace.jsonl")}, lenient);
  REQUIRE(w.ok());
  auto o = opts_for(srv);
  o.schedule.speedup = 100;
  auto rows = run_rows(w, o);
  REQUIRE(rows.size() == 4);
  REQUIRE(seen.bodies.size() == 4);
  std::vector<size_t> lens;
  for (auto& b : seen.bodies) lens.push_back(b["messages"][0]["content"].get<std::string>().size());
  std::sort(lens.begin(), lens.end());
  CHECK(lens == std::vector<size_t>{40, 80, 4096, 6000});  // 4 bytes per token, never padded or cut
  for (auto& r : rows) {
    uint64_t il = r["request"]["replay"]["input_length"];
    CHECK(r["request"]["replay"]["input_sequence_hashes"].size() == (il + 511) / 512);
  }
}

TEST_CASE("case 08: a missing timestamp stops the run before any request; concurrency mode sends 3") {
  records::WorkloadOptions auto_mode;
  auto_mode.require_timestamps_if_first_has = true;
  auto w = records::load_workload({repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace.jsonl")}, auto_mode);
  REQUIRE(w.errors.size() == 1);
  CHECK(w.errors[0].find("trace.jsonl:2: missing field 'timestamp'") != std::string::npos);

  TestServer srv;
  Seen seen;
  serve_chat(srv, seen);
  srv.start();
  auto loose = records::load_workload({repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace.jsonl")},
                                      records::WorkloadOptions{});
  REQUIRE(loose.ok());
  auto o = opts_for(srv);
  o.schedule.mode = LoadMode::kConcurrency;
  o.concurrency = 1;
  auto rows = run_rows(loose, o);
  CHECK(rows.size() == 3);
  CHECK(seen.bodies.size() == 3);

  // Non-monotonic timestamps: sorted stably, sent in order rows 1, 3, 2 (by hash id 1, 3, 2).
  auto nm = records::load_workload(
      {repo("tests/fixtures/cases/08-mooncake-missing-timestamp/trace-nonmonotonic.jsonl")}, auto_mode);
  REQUIRE(nm.ok());
  CHECK(nm.reordered);
  Seen seen2;
  TestServer srv2;
  serve_chat(srv2, seen2);
  srv2.start();
  auto o2 = opts_for(srv2);
  o2.schedule.speedup = 20;  // 0, 50, 100 ms
  const double start_ms = dyn::RealClock::instance().now_ms();
  auto rows2 = run_rows(nm, o2);
  REQUIRE(seen2.bodies.size() == 3);
  // Rows come out in completion order, which load can shuffle; the schedule is the contract.
  std::sort(rows2.begin(), rows2.end(), [](const Json& a, const Json& b) {
    return a["dyn"]["scheduled_ms"].get<double>() < b["dyn"]["scheduled_ms"].get<double>();
  });
  std::vector<std::string> order;
  std::vector<double> scheduled;
  for (auto& r : rows2) {
    order.push_back(r["request"]["request_id"]);
    scheduled.push_back(r["dyn"]["scheduled_ms"]);
  }
  CHECK(order == std::vector<std::string>{"row-0", "row-2", "row-1"});
  CHECK(scheduled == std::vector<double>{0, 50, 100});
  // A row is never sent before its scheduled offset from the run's start. Measured from the start,
  // not from row 0's arrival: under load row 0 itself can arrive late, which says nothing about
  // the spacing of the schedule.
  CHECK(seen2.at_ms[1] - start_ms >= 50);
  CHECK(seen2.at_ms[2] - start_ms >= 100);
}

TEST_CASE("live: records, errors, closed-loop sessions with delay, session headers") {
  TestServer srv;
  Seen seen;
  serve_chat(srv, seen, 5);
  srv.start();
  auto w = workload_of(
      "{\"session_id\":\"s1\",\"timestamp\":0,\"input_length\":1024,\"output_length\":3,\"hash_ids\":[7,8]}\n"
      "{\"session_id\":\"s1\",\"delay\":40,\"input_length\":1100,\"output_length\":3,\"hash_ids\":[7,8,9]}\n"
      "{\"session_id\":\"k1\",\"parent_session_id\":\"s1\",\"timestamp\":1,\"input_length\":10,\"output_length\":3,\"hash_ids\":[5]}\n"
      "{\"timestamp\":2,\"text_input\":\"fail-503 please\",\"output_length\":3}\n");
  REQUIRE(w.ok());
  auto o = opts_for(srv);
  o.header_style = dyn::session::find_client_style("codex");
  LiveStats st;
  auto rows = run_rows(w, o, &st);
  REQUIRE(rows.size() == 4);
  CHECK(st.ok == 3);
  CHECK(st.errors == 1);
  const Json* t0 = by_id(rows, "s1:0");
  const Json* t1 = by_id(rows, "s1:1");
  const Json* err = by_id(rows, "row-3");
  REQUIRE(t0);
  REQUIRE(t1);
  REQUIRE(err);
  // Record shape and metrics.
  std::vector<std::string> keys;
  for (auto it = t0->begin(); it != t0->end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"schema", "event_type", "event_time_unix_ms", "event_source", "agent_context",
                                         "request", "dyn"});
  CHECK((*t0)["event_source"] == "client");
  const Json& rq = (*t0)["request"];
  CHECK(rq["input_tokens"] == 1024);  // usage.prompt_tokens (the server counts ceil(bytes / 4))
  CHECK(rq["output_tokens"] == 3);
  CHECK(rq["cached_tokens"] == 4);
  CHECK(rq["worker"]["decode_worker_id"] == 1);
  CHECK(rq["finish_reason_metadata"]["finish_reason"] == "stop");
  CHECK(rq["ttft_ms"].get<double>() >= 5);
  double ttft = rq["ttft_ms"], lat = (*t0)["dyn"]["request_latency_ms"];
  CHECK(rq["avg_itl_ms"].get<double>() == doctest::Approx((lat - ttft) / 2).epsilon(0.01));
  CHECK((*t0)["dyn"]["inter_chunk_ms"].size() == 2);
  CHECK((*t0)["dyn"]["hash_ids"] == Json::array({7, 8}));
  CHECK((*t0)["dyn"]["status"] == "ok");
  CHECK((*t0)["request"]["replay"]["input_sequence_hashes"].size() == 2);
  // Prefix sharing: the second turn's first two sequence hashes equal the first turn's.
  CHECK((*t1)["request"]["replay"]["input_sequence_hashes"][1] ==
        (*t0)["request"]["replay"]["input_sequence_hashes"][1]);
  // Closed loop: turn 1 starts >= 40 ms after turn 0 ends.
  double end0 = (*t0)["event_time_unix_ms"].get<double>();
  double start1 = (*t1)["request"]["request_received_ms"].get<double>();
  CHECK(start1 - end0 >= 38);
  CHECK((*t1)["dyn"]["turn"] == 1);
  // The error row.
  CHECK((*err)["dyn"]["status"] == "error");
  CHECK((*err)["dyn"]["error"]["code"] == 503);
  CHECK((*err)["dyn"]["error"]["type"] == "http");
  CHECK((*err)["dyn"]["error"]["message"] == "overloaded");
  CHECK_FALSE((*err)["request"].contains("ttft_ms"));
  CHECK_FALSE(err->contains("agent_context"));
  // Headers: codex style for the child, X-Request-ID and X-Correlation-ID everywhere.
  bool child_seen = false;
  for (auto& h : seen.headers) {
    CHECK(h.count("X-Request-ID"));
    if (h.count("thread-id") && h["thread-id"] == "k1") {
      child_seen = true;
      CHECK(h["session-id"] == "s1");
      CHECK(h["x-codex-parent-thread-id"] == "s1");
      CHECK(h["X-Correlation-ID"] == "k1");
    }
  }
  CHECK(child_seen);
}

TEST_CASE("live: delta history threads earlier prompts and live replies") {
  TestServer srv;
  Seen seen;
  serve_chat(srv, seen);
  srv.start();
  auto w = workload_of(
      "{\"session_id\":\"s\",\"input_length\":4,\"output_length\":3,\"text_input\":\"aaaa\"}\n"
      "{\"session_id\":\"s\",\"delay\":0,\"input_length\":4,\"output_length\":3,\"text_input\":\"bbbb\"}\n");
  auto o = opts_for(srv);
  o.history = History::kDelta;
  o.schedule.mode = LoadMode::kConcurrency;
  o.concurrency = 4;
  auto rows = run_rows(w, o);
  REQUIRE(seen.bodies.size() == 2);
  const Json& m = seen.bodies[1]["messages"];
  REQUIRE(m.size() == 3);
  CHECK(m[0]["content"] == "aaaa");
  CHECK(m[1]["role"] == "assistant");
  CHECK(m[1]["content"] == "one two six ");
  CHECK(m[2]["content"] == "bbbb");
  CHECK(seen.bodies[1]["max_tokens"] == 3);
  CHECK(seen.bodies[1]["stream_options"]["include_usage"] == true);
}

TEST_CASE("live: warmup rows are flagged; duration stops new sends; unreachable endpoint") {
  TestServer srv;
  Seen seen;
  serve_chat(srv, seen);
  srv.start();
  std::string jsonl;
  // Rows 0-4 are due within 40 ms, rows 5-19 from 1 s on: a 0.45 s duration sends exactly the first
  // five even when a loaded machine delays the scheduler by a few hundred ms (rows due past the
  // duration are never sent; AIPerf's benchmark duration).
  for (int i = 0; i < 20; ++i)
    jsonl +=
        "{\"timestamp\":" + std::to_string(i < 5 ? i * 10 : 1000 + i * 100) + ",\"input_length\":4,\"hash_ids\":[1]}\n";
  auto w = workload_of(jsonl);
  auto o = opts_for(srv);
  o.warmup_count = 2;
  o.duration_s = 0.45;
  LiveStats st;
  auto rows = run_rows(w, o, &st);
  int warm = 0;
  for (auto& r : rows) warm += r["dyn"].value("warmup", false) ? 1 : 0;
  CHECK(warm == 2);
  CHECK(st.warmup == 2);
  CHECK(st.sent == 5);  // 0, 10, 20, 30, 40 ms
  CHECK(st.not_sent == 15);
  CHECK(rows.size() == 7);

  LiveOptions dead = o;
  dead.client.endpoint = *dyn::http::Endpoint::parse("http://127.0.0.1:1");
  dead.warmup_count = 0;
  dead.duration_s = 0;
  dead.schedule.request_count = 3;
  dead.schedule.speedup = 1000;
  auto drows = run_rows(w, dead, &st);
  CHECK(drows.size() == 3);
  CHECK(st.all_transport_errors);
  CHECK(drows[0]["dyn"]["error"]["type"] == "connection");
}

namespace {

/// What the stand-in transports saw, shared by all of a run's connection threads.
struct HandOver {
  std::mutex mu;
  std::vector<std::string> order;  ///< X-Request-ID of each request, in the order handed over
  std::vector<double> start_ms;    ///< the send stamp of each, same order
  std::atomic<int> in_flight{0}, peak{0};
};

/// A Transport standing in for an http::Connection (LiveOptions::transport): like the real one
/// it stamps the send time, then calls on_start, then "waits for the response" (`serve_ms`,
/// outside any lock of the replayer, so requests overlap as on a real network) and answers a
/// complete non-streamed chat reply. The id is recorded in the same step as the stamp, before
/// on_start, so `order` is exactly the order in which requests were handed over.
class RecordingTransport : public dyn::http::Transport {
 public:
  RecordingTransport(HandOver& h, int serve_ms) : h_(h), serve_ms_(serve_ms) {}
  dyn::http::HttpResult post(const dyn::http::HttpRequest& req) override {
    dyn::http::HttpResult r;
    {
      std::lock_guard<std::mutex> lk(h_.mu);
      r.start_ms = dyn::RealClock::instance().now_ms();
      h_.order.push_back(header(req.headers, "X-Request-ID"));
      h_.start_ms.push_back(r.start_ms);
    }
    if (req.on_start) req.on_start();
    int now = ++h_.in_flight;
    for (int p = h_.peak.load(); now > p && !h_.peak.compare_exchange_weak(p, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(serve_ms_));
    --h_.in_flight;
    r.status = 200;
    r.headers.emplace_back("content-type", "application/json");
    r.summary.content = "ok";
    r.summary.finish_reason = "stop";
    r.summary.prompt_tokens = 8;
    r.summary.completion_tokens = 1;
    r.end_ms = dyn::RealClock::instance().now_ms();
    return r;
  }
  void cancel() override {}

 private:
  HandOver& h_;
  int serve_ms_;
};

LiveOptions recording_opts(HandOver& h, size_t connections, int serve_ms = 2) {
  LiveOptions o;
  o.model = "m";
  o.streaming = false;
  o.max_connections = connections;
  o.transport = [&h, serve_ms] { return std::make_unique<RecordingTransport>(h, serve_ms); };
  return o;
}

/// A Mooncake row; every `long_every`-th row has a long prompt (24 KB of synthetic text to build
/// and hash), the others 8 tokens, so their threads are ready to send at very different times.
std::string mooncake_row(long long ts, size_t i, size_t long_every) {
  const bool big = long_every && i % long_every == 0;
  std::string ids = "1";
  if (big)
    for (int b = 2; b <= 12; ++b) ids += "," + std::to_string(b);
  return "{\"timestamp\":" + std::to_string(ts) + ",\"input_length\":" + (big ? "6000" : "8") +
         ",\"output_length\":1,\"hash_ids\":[" + ids + "]}\n";
}

}  // namespace

TEST_CASE("issue 21.6: 200 requests at the same instant are handed over in file order") {
  std::string jsonl;
  for (size_t i = 0; i < 200; ++i) jsonl += mooncake_row(0, i, 3);
  auto w = workload_of(jsonl);
  REQUIRE(w.ok());
  HandOver h;
  LiveStats st;
  auto rows = run_rows(w, recording_opts(h, 8), &st);
  CHECK(st.ok == 200);
  CHECK(rows.size() == 200);
  std::vector<std::string> want;
  for (size_t i = 0; i < 200; ++i) want.push_back("row-" + std::to_string(i));
  REQUIRE(h.order.size() == 200);
  CHECK(h.order == want);
  CHECK(std::is_sorted(h.start_ms.begin(), h.start_ms.end()));
  // The gate lets the next request go before the network call: requests were in flight together.
  CHECK(h.peak.load() > 1);
  // Each row's send offset (scheduled + lag) is its stamp: non-decreasing in file order too.
  std::map<std::string, double> sent_at;
  for (const auto& r : rows)
    sent_at[r["request"]["request_id"]] =
        r["dyn"]["scheduled_ms"].get<double>() + r["dyn"]["schedule_lag_ms"].get<double>();
  size_t out_of_order = 0;
  for (size_t i = 1; i < 200; ++i)
    if (sent_at["row-" + std::to_string(i - 1)] > sent_at["row-" + std::to_string(i)]) ++out_of_order;
  CHECK(out_of_order == 0);
}

TEST_CASE("issue 21.6: groups of equal timestamps (after --speedup) go in time order, ties in file order") {
  // File timestamps 0, 3000, 2000, 1000, 0, ... (not sorted): the loader sorts stably by time;
  // with --speedup 100 the four groups are due at 0, 10, 20, 30 ms, 40 rows each.
  std::string jsonl;
  std::vector<std::pair<long long, size_t>> by_time;
  for (size_t i = 0; i < 160; ++i) {
    long long ts = static_cast<long long>((4 - i % 4) % 4) * 1000;
    jsonl += mooncake_row(ts, i, 5);
    by_time.emplace_back(ts, i);
  }
  std::sort(by_time.begin(), by_time.end());
  std::vector<std::string> want;
  for (const auto& [ts, i] : by_time) want.push_back("row-" + std::to_string(i));
  auto w = workload_of(jsonl);
  REQUIRE(w.ok());
  CHECK(w.reordered);
  for (size_t connections : {size_t{4}, size_t{64}}) {
    CAPTURE(connections);
    HandOver h;
    auto o = recording_opts(h, connections);
    o.schedule.speedup = 100;
    const double t0 = dyn::RealClock::instance().now_ms();
    LiveStats st;
    auto rows = run_rows(w, o, &st);
    CHECK(st.ok == 160);
    REQUIRE(h.order.size() == 160);
    CHECK(h.order == want);
    CHECK(std::is_sorted(h.start_ms.begin(), h.start_ms.end()));
    // Never before its time: the first of each group is sent at or after 0, 10, 20, 30 ms.
    for (size_t g = 1; g < 4; ++g) CHECK(h.start_ms[g * 40] - t0 >= 10.0 * static_cast<double>(g));
    std::map<double, size_t> per_offset;
    for (const auto& r : rows) ++per_offset[r["dyn"]["scheduled_ms"].get<double>()];
    CHECK(per_offset == std::map<double, size_t>{{0, 40}, {10, 40}, {20, 40}, {30, 40}});
  }
}

TEST_CASE("issue 21.6: concurrency mode hands requests over in file order as slots free") {
  std::string jsonl;
  for (size_t i = 0; i < 100; ++i) jsonl += mooncake_row(0, i, 2);
  auto w = workload_of(jsonl);
  HandOver h;
  auto o = recording_opts(h, 64, 1);
  o.schedule.mode = LoadMode::kConcurrency;
  o.concurrency = 6;
  LiveStats st;
  run_rows(w, o, &st);
  CHECK(st.ok == 100);
  std::vector<std::string> want;
  for (size_t i = 0; i < 100; ++i) want.push_back("row-" + std::to_string(i));
  CHECK(h.order == want);
  CHECK(h.peak.load() <= 6);
}
