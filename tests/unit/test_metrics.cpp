// Unit tests for lib/dyn/metrics: NumPy-exact statistics, the real AIPerf run reproduced from its
// per-request file, SPEC 7 per-request definitions (case 04), goodput and breakdowns.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "dyn/base/json.h"
#include "dyn/metrics/report.h"
#include "dyn/metrics/stats.h"

using namespace dyn;
using namespace dyn::metrics;

namespace {

const std::string kAiperf = std::string(DYN_SOURCE_DIR) + "/data/aiperf";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string tag_now(const std::string& old) {
  if (old == "ttft") return "time_to_first_token";
  if (old == "ttst") return "time_to_second_token";
  return old;
}

// Drops the p10 column (AIPerf's 2025 fixture predates it) from a stats CSV.
std::string without_p10(const std::string& csv) {
  std::string out;
  std::istringstream in(csv);
  std::string line;
  bool stats = true;
  int p10 = -1;
  while (std::getline(in, line)) {
    if (line == "\r" || line.empty()) stats = false;
    if (stats) {
      std::vector<std::string> cells;
      std::string cell;
      std::istringstream ls(line);
      while (std::getline(ls, cell, ',')) cells.push_back(cell);
      if (p10 < 0)
        for (int i = 0; i < static_cast<int>(cells.size()); ++i)
          if (cells[i] == "p10") p10 = i;
      std::string joined;
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        if (i == p10) continue;
        joined += (joined.empty() ? "" : ",") + cells[i];
      }
      out += joined + "\n";
    } else {
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("percentiles interpolate linearly at (n-1)*p/100 and std is the population std") {
  std::vector<double> v{1, 2, 3, 4};
  Stats s = compute_stats(v);
  CHECK(s.avg == 2.5);
  CHECK(s.min == 1);
  CHECK(s.max == 4);
  CHECK(s.pct(50) == 2.5);
  CHECK(s.pct(25) == doctest::Approx(1.75));
  CHECK(s.pct(99) == doctest::Approx(3.97));
  CHECK(s.std == doctest::Approx(std::sqrt(1.25)));  // ddof 0, not the sample std 1.29
  CHECK(compute_stats({7}).std == 0);
  CHECK(compute_stats({}).count == 0);
}

TEST_CASE("numpy_sum sums pairwise in 8192-element blocks, unlike a plain loop") {
  // 0.1 repeated: the plain left-to-right sum drifts in the last bits; NumPy's pairwise sum of
  // 10000 values has a known different result.
  std::vector<double> v(10000, 0.1);
  double naive = 0;
  for (double x : v) naive += x;
  const double pw = numpy_sum(v.data(), v.size());
  CHECK(naive != pw);
  CHECK(pw == doctest::Approx(1000.0));
}

TEST_CASE("the real AIPerf run is reproduced exactly from its per-request file") {
  RequestSet set = load_requests({kAiperf + "/profile_export.jsonl.gz"});
  REQUIRE(set.kind == RowKind::kAiperf);
  REQUIRE(set.requests.size() == 100);
  Report rep = build_report(set);
  Json want = Json::parse(slurp(kAiperf + "/profile_export_aiperf.json"));
  const Json& records = want.contains("records") ? want["records"] : want;
  int compared = 0;
  for (const auto& [old_tag, m] : records.items()) {
    const std::string tag = tag_now(old_tag);
    CAPTURE(tag);
    const bool is_series = !m["std"].is_null();
    if (is_series) {
      const Series* s = rep.find_series(tag);
      REQUIRE_MESSAGE(s, "missing series " << tag);
      CHECK(s->unit == m["unit"].get<std::string>());
      CHECK(s->header == m["header"].get<std::string>());
      CHECK(s->stats.count == m["count"].get<std::size_t>());
      CHECK(s->stats.avg == m["avg"].get<double>());
      CHECK(s->stats.min == m["min"].get<double>());
      CHECK(s->stats.max == m["max"].get<double>());
      CHECK(s->stats.std == m["std"].get<double>());
      for (int p : {1, 5, 25, 50, 75, 90, 95, 99}) {
        CAPTURE(p);
        CHECK(s->stats.pct(p) == m["p" + std::to_string(p)].get<double>());
        ++compared;
      }
      compared += 5;
    } else {
      const Scalar* s = rep.find_scalar(tag);
      REQUIRE_MESSAGE(s, "missing scalar " << tag);
      CHECK(s->unit == m["unit"].get<std::string>());
      CHECK(s->value == m["avg"].get<double>());
      ++compared;
    }
  }
  CHECK(compared == 10 * 13 + 11);
  // Nothing extra either: the same metrics as AIPerf reported.
  CHECK(rep.series.size() == 10);
  CHECK(rep.scalars.size() == 11);
  // Error summary: 11 cancellations.
  REQUIRE(rep.errors.size() == 1);
  CHECK(rep.errors[0].count == want["error_summary"][0]["count"].get<uint64_t>());
  CHECK(rep.errors[0].info.code == 499);
  CHECK(rep.errors[0].info.type == "RequestCancellationError");
  CHECK(rep.errors[0].info.message == want["error_summary"][0]["error_details"]["message"].get<std::string>());

  // The CSV is AIPerf's byte for byte, apart from the p10 column this toolkit adds.
  const std::string csv = report_csv(rep);
  CHECK(csv.find("p10") != std::string::npos);
  CHECK(without_p10(csv) == without_p10(slurp(kAiperf + "/profile_export_aiperf.csv")));
}

TEST_CASE("case 04: ITL excludes TTFT") {
  // tests/fixtures/cases/04-itl-excludes-ttft/timeline.jsonl: chunks at 250, 300, 350, 420, 470 ms,
  // one token each, [DONE] at 471 ms.
  std::ifstream f(std::string(DYN_SOURCE_DIR) + "/tests/fixtures/cases/04-itl-excludes-ttft/timeline.jsonl");
  REQUIRE(f.good());
  ChunkTimeline t;
  std::string line;
  double done_ms = -1;
  while (std::getline(f, line)) {
    Json j = Json::parse(line);
    if (j["event"] == "chunk") {
      t.chunk_ms.push_back(j["t_ms"].get<double>());
      t.tokens.push_back(j["tokens"].get<double>());
    } else if (j["event"] == "done") {
      done_ms = j["t_ms"].get<double>();
    }
  }
  REQUIRE(t.chunk_ms.size() == 5);
  REQUIRE(done_ms == 471);
  RequestRecord r = metrics_from_timeline(t);
  CHECK(*r.ttft == 250);
  CHECK(r.inter_chunk == std::vector<double>{50, 50, 70, 50});  // 250 is not among them
  CHECK(compute_stats(r.inter_chunk).avg == 55);                // not the wrong 94
  CHECK(*r.latency == 470);  // last content chunk; [DONE] at 471 does not count (SPEC 7)
  CHECK(*r.itl == 55);       // (470 - 250) / (5 - 1)
  CHECK(*r.ttst == 50);
  CHECK(*r.osl == 5);
  CHECK(*r.per_user_tps == doctest::Approx(1000.0 / 55));
}

TEST_CASE("issue 21.4: per-token ITL excludes the first chunk's tokens; AIPerf's ITL kept beside it") {
  // Chunks at 100, 250, 400 and 430 ms carrying 2, 1, 3 and 1 tokens.
  ChunkTimeline t{{100, 250, 400, 430}, {2, 1, 3, 1}};
  RequestRecord r = metrics_from_timeline(t);
  CHECK(*r.ttft == 100);
  CHECK(*r.itl_per_token == doctest::Approx(66));  // 330 / 5
  CHECK_FALSE(r.itl_per_token_estimated);
  CHECK(*r.itl == doctest::Approx(55));                             // AIPerf: 330 / 6
  CHECK(compute_stats(r.inter_chunk).avg == doctest::Approx(110));  // per-chunk gaps: neither
  // The same request as a request_end row: exact with dyn.chunk_tokens, estimated without.
  Json row = {{"event_type", "request_end"},
              {"request", {{"request_id", "r"}, {"ttft_ms", 100}, {"output_tokens", 7}, {"total_time_ms", 431}}},
              {"dyn",
               {{"status", "ok"},
                {"request_latency_ms", 430},
                {"inter_chunk_ms", {150, 150, 30}},
                {"chunk_tokens", {2, 1, 3, 1}}}}};
  auto exact = parse_request_end(row, "x:1");
  REQUIRE(exact);
  CHECK(*exact->itl_per_token == doctest::Approx(66));
  CHECK_FALSE(exact->itl_per_token_estimated);
  CHECK(*exact->itl == doctest::Approx(55));
  row["dyn"].erase("chunk_tokens");
  auto est = parse_request_end(row, "x:1");
  CHECK(*est->itl_per_token == doctest::Approx(55));
  CHECK(est->itl_per_token_estimated);
  // The report labels both: AIPerf's figure under its own name, the per-token one saying how it
  // was obtained.
  RequestSet set;
  set.requests = {*exact};
  std::string table = report_table(build_report(set, {}), false);
  CHECK(table.find("Inter Token Latency per Token (first chunk's tokens excluded)") != std::string::npos);
  set.requests = {*est};
  table = report_table(build_report(set, {}), false);
  CHECK(table.find("Inter Token Latency per Token (estimated: no per-chunk usage)") != std::string::npos);
}

TEST_CASE("request_end rows: warmup excluded, errors only in the error summary, ITL recomputed") {
  auto row = [](const std::string& id, const std::string& session, int worker, double start, double ttft, double total,
                int osl, int isl, int cached) {
    return Json{{"schema", "dynamo.request.trace.v1"},
                {"event_type", "request_end"},
                {"event_time_unix_ms", static_cast<uint64_t>(start + total)},
                {"agent_context", {{"session_id", session}}},
                {"request",
                 {{"request_id", id},
                  {"input_tokens", isl},
                  {"output_tokens", osl},
                  {"cached_tokens", cached},
                  {"request_received_ms", start},
                  {"ttft_ms", ttft},
                  {"total_time_ms", total},
                  {"avg_itl_ms", 999.0},
                  {"worker", {{"decode_worker_id", worker}}}}}};
  };
  RequestSet set;
  bool warm = false;
  set.requests.push_back(*parse_request_end(row("a", "s1", 0, 1000, 100, 1100, 11, 1000, 0), "t:1"));
  set.requests.push_back(*parse_request_end(row("b", "s1", 0, 3000, 50, 550, 11, 2000, 1000), "t:2"));
  set.requests.push_back(*parse_request_end(row("c", "s2", 1, 1500, 200, 1200, 2, 500, 0), "t:3"));
  Json err = row("d", "s2", 1, 2000, 0, 10, 0, 500, 0);
  err["dyn"] = {{"status", "error"}, {"error", {{"code", 503}, {"type", "http"}, {"message", "busy"}}}};
  set.requests.push_back(*parse_request_end(err, "t:4"));
  Json wu = row("w", "s3", 0, 0, 1, 2, 2, 10, 0);
  wu["dyn"] = {{"warmup", true}};
  CHECK_FALSE(parse_request_end(wu, "t:5", &warm).has_value());
  CHECK(warm);

  CHECK(*set.requests[0].itl == 100);  // (1100 - 100) / 10, not the row's 999
  auto slos = parse_goodput("ttft:150 request_latency:1150");
  REQUIRE(slos.ok());
  ReportOptions ro;
  ro.goodput = *slos;
  Report rep = build_report(set, ro);
  CHECK(rep.find_scalar("request_count")->value == 3);
  CHECK(rep.find_scalar("error_request_count")->value == 1);
  CHECK(rep.find_series("time_to_first_token")->stats.count == 3);
  CHECK(rep.find_scalar("benchmark_duration")->value == doctest::Approx(2.55));  // 1000 .. 3550 ms
  CHECK(rep.find_scalar("good_request_count")->value == 2);                      // a and b
  CHECK(rep.find_scalar("goodput")->value == doctest::Approx(2 / 2.55));
  CHECK(rep.find_scalar("prompt_cache_hit_rate")->value == doctest::Approx(100.0 * 1000 / 3500));
  REQUIRE(rep.errors.size() == 1);
  CHECK(rep.errors[0].info.code == 503);
  REQUIRE(rep.workers.size() == 2);
  CHECK(rep.workers[0].requests == 2);
  CHECK(rep.workers[1].errors == 1);
  CHECK(*rep.workers[0].hit_pct == doctest::Approx(100.0 / 3));
  REQUIRE(rep.sessions.size() == 2);
  CHECK(rep.sessions[0].session_id == "s1");
  CHECK(rep.sessions[0].turns == 2);

  CHECK_FALSE(parse_goodput("bogus:1").ok());
  CHECK_FALSE(parse_goodput("ttft:x").ok());
  CHECK(parse_goodput("ttft:1,itl:2")->size() == 2);
}

TEST_CASE("request_end times and codes out of int64 range are unknown, not undefined (fuzz_request_end finding)") {
  // The minimized fuzz input (fuzz/seeds/request_end/event-time-ns-overflow): an event time of
  // 1.78e13 ms (a trace writing microseconds) overflowed int64 when converted to ns.
  auto r = parse_request_end(Json::parse(R"({"event_type":"request_end","event_time_unix_ms":17773128010000})"), "t:1");
  REQUIRE(r);
  CHECK(!r->end_ns);
  CHECK(!r->start_ns);
  // The largest representable event time still converts exactly.
  auto ok = parse_request_end(Json::parse(R"({"event_type":"request_end","event_time_unix_ms":9223372036854,
      "request":{"total_time_ms":1000}})"),
                              "t:2");
  REQUIRE(ok);
  CHECK(ok->end_ns == 9223372036854000000);
  CHECK(ok->start_ns == 9223372035854000000);
  // Float times, totals and error codes beyond int64: unknown instead of a wrapped value.
  auto f = parse_request_end(Json::parse(R"({"event_type":"request_end","event_time_unix_ms":1e300,
      "request":{"request_received_ms":-1e300,"total_time_ms":1e300},
      "dyn":{"status":"error","error":{"code":1e30}}})"),
                             "t:3");
  REQUIRE(f);
  CHECK(!f->start_ns);
  CHECK(!f->end_ns);
  CHECK(f->error->code == 0);
  // AIPerf records: the same for ns timestamps and error codes.
  RequestRecord a = parse_aiperf_record(Json::parse(R"({"metadata":{"request_start_ns":18446744073709551615,
      "request_end_ns":1e40},"metrics":{},"error":{"code":-1e300,"type":"x"}})"),
                                        "t:4");
  CHECK(!a.start_ns);
  CHECK(!a.end_ns);
  CHECK(a.error->code == 0);
}

TEST_CASE("theoretical hit rate counts blocks seen earlier in the workload") {
  RequestSet set;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r;
    r.start_ns = i * 1'000'000;
    r.end_ns = r.start_ns.value() + 1;
    r.hash_ids = i == 0   ? std::vector<uint64_t>{0, 1, 2}
                 : i == 1 ? std::vector<uint64_t>{0, 3, 4, 5}
                          : std::vector<uint64_t>{1, 4, 6};
    set.requests.push_back(r);
  }
  // custom_trace.jsonl's hash ids: 10 blocks, 0 (second row) and 1, 4 (third row) seen before.
  Report rep = build_report(set);
  CHECK(rep.find_scalar("theoretical_cache_hit_rate")->value == doctest::Approx(30.0));
}

TEST_CASE("theoretical hit rate counts full engine blocks when the ids' block size is recorded") {
  // Two turns with 512-token hash ids, engines of 64-token blocks. Turn 1: ids [0, 1], 1000
  // tokens = 15 full engine blocks (8 under id 0, 7 under id 1, the 40-token tail is never
  // cached). Turn 2: ids [0, 1, 2], 1100 tokens = 17 blocks; its first 15 are turn 1's (same
  // ids under the same token ranges), blocks 15-16 are new. Hit = 15 x 64 of 2100 input tokens.
  RequestSet set;
  for (int i = 0; i < 2; ++i) {
    RequestRecord r;
    r.start_ns = i * 1'000'000;
    r.end_ns = r.start_ns.value() + 1;
    r.isl = i == 0 ? 1000 : 1100;
    r.hash_block_size = 512;
    r.hash_ids = i == 0 ? std::vector<uint64_t>{0, 1} : std::vector<uint64_t>{0, 1, 2};
    set.requests.push_back(r);
  }
  Report rep = build_report(set);
  CHECK(rep.find_scalar("theoretical_cache_hit_rate")->value == doctest::Approx(100.0 * 15 * 64 / 2100));
  // The old count (hash ids seen before: 2 of 5 = 40 %) is below what a 64-token cache reaches.
  CHECK(rep.find_scalar("theoretical_cache_hit_rate")->value > 45.0);
  // At the ids' own block size: turn 1 has 1 full block, turn 2 has 2, the first shared.
  ReportOptions o;
  o.kv_block_size = 512;
  CHECK(build_report(set, o).find_scalar("theoretical_cache_hit_rate")->value == doctest::Approx(100.0 * 512 / 2100));
}

TEST_CASE("format_number groups thousands") {
  CHECK(format_number(1234567.891) == "1,234,567.89");
  CHECK(format_number(-5.5) == "-5.50");
  CHECK(format_number(0.004) == "0.00");
}

#include "dyn/metrics/affinity.h"
#include "dyn/metrics/compare.h"
#include "dyn/metrics/plot.h"

#include <set>

namespace {

/// Check options with only a TTL (seconds), the other members at their defaults.
CheckOptions ttl(double secs) {
  CheckOptions o;
  o.ttl_secs = secs;
  return o;
}

Turn turn(const std::string& session, const std::string& parent, const std::string& worker, double start, double end,
          bool error = false) {
  static uint64_t order = 0;
  Turn t;
  t.session_id = session;
  t.parent_session_id = parent;
  t.worker = worker;
  t.start_ms = start;
  t.end_ms = end;
  t.error = error;
  t.request_id = session + "@" + std::to_string(static_cast<int>(start));
  t.order = order++;
  return t;
}

}  // namespace

TEST_CASE("affinity check: a move within the TTL is a violation, after it is not") {
  std::vector<Turn> ts{turn("s", "", "0", 0, 1000), turn("s", "", "1", 5000, 6000), turn("s", "", "0", 20000, 21000)};
  // Gaps: 4 s and 14 s.
  CHECK(check_affinity(ts, ttl(3)).violations.empty());
  auto r = check_affinity(ts, ttl(10));
  REQUIRE(r.violations.size() == 1);
  CHECK(r.violations[0].gap_ms == 4000);
  CHECK(r.violations[0].key == "session:s");
  CHECK(check_affinity(ts, ttl(15)).violations.size() == 2);
  CHECK(check_affinity(ts, ttl(4)).violations.size() == 1);  // gap equal to the TTL still binds
}

TEST_CASE("affinity check: subagents bind under their parent group, the parent under its own id") {
  std::vector<Turn> ts{turn("p", "", "0", 0, 100), turn("a", "p", "1", 10, 50), turn("b", "p", "1", 20, 60),
                       turn("p", "", "0", 200, 300)};
  CHECK(check_affinity(ts, ttl(60)).violations.empty());  // parent on 0, group on 1: both kept
  ts.push_back(turn("c", "p", "0", 30, 70));              // a sibling elsewhere: the group moved
  auto r = check_affinity(ts, ttl(60));
  REQUIRE(r.violations.size() == 1);  // b (worker 1) -> c (worker 0); a -> b stayed
  CHECK(r.violations[0].key == "parent:p");
  CHECK(r.violations[0].gap_ms == 30 - 60);  // overlapping turns: negative gap
}

TEST_CASE("affinity check: a move after the bound worker failed is a rebind (SPEC 2.3), not a violation") {
  std::vector<Turn> ts{turn("s", "", "0", 0, 100), turn("s", "", "0", 200, 210, true), turn("s", "", "1", 300, 400)};
  auto r = check_affinity(ts, ttl(60));
  CHECK(r.violations.empty());
  REQUIRE(r.moves.size() == 1);
  CHECK(r.moves[0].reason == "previous_turn_failed");
  CHECK(r.turns_checked == 2);
}

TEST_CASE("affinity check: forced moves (the row's rebind_reason) and soft rebinds are reported apart") {
  std::vector<Turn> ts{turn("s", "", "0", 0, 100),   turn("s", "", "1", 200, 300), turn("t", "", "0", 0, 100),
                       turn("t", "", "1", 200, 300), turn("u", "", "0", 0, 100),   turn("u", "", "1", 200, 300)};
  ts[1].binding = "rebound", ts[1].rebind_reason = "unhealthy";
  ts[3].binding = "rebound", ts[3].rebind_reason = "busy";
  ts[5].binding = "rebound";  // a soft rebind written before reasons were recorded
  CheckOptions o = ttl(60);
  o.forced_reasons = {"unhealthy", "removed", "drained", "dispatch_failed"};
  o.soft_reasons = {"busy"};
  auto hard = check_affinity(ts, o);
  REQUIRE(hard.moves.size() == 1);
  CHECK(hard.moves[0].reason == "unhealthy");
  CHECK(hard.moves[0].key == "session:s");
  CHECK(hard.violations.size() == 2);  // hard affinity never moves a session for load
  o.soft = true;
  auto soft = check_affinity(ts, o);
  CHECK(soft.violations.empty());
  REQUIRE(soft.moves.size() == 3);
  CHECK(violation_json(soft.moves[1], 60)["reason"] == "busy");
  CHECK(violation_json(soft.moves[2], 60)["reason"] == "soft");
  CHECK_FALSE(violation_json(hard.violations[0], 60).contains("reason"));
}

TEST_CASE("route_decision rows use event times; show summarizes sessions and groups") {
  auto decision = [](const std::string& s, int worker, uint64_t t) {
    return Json{{"schema", "dynamo.request.trace.v1"},
                {"event_type", "route_decision"},
                {"event_time_unix_ms", t},
                {"agent_context", {{"session_id", s}}},
                {"request",
                 {{"request_id", s + std::to_string(t)},
                  {"input_tokens", 100},
                  {"cached_tokens", 50},
                  {"worker", {{"decode_worker_id", worker}}}}},
                {"dyn", {{"binding", "new"}}}};
  };
  std::vector<Turn> ts;
  ts.push_back(*parse_turn(decision("s", 0, 1000), "d:1", 0));
  ts.push_back(*parse_turn(decision("s", 1, 3000), "d:2", 1));
  CHECK(*ts[1].start_ms == 3000);
  CHECK(check_affinity(ts, ttl(1)).violations.empty());  // 2 s between arrivals > 1 s TTL
  REQUIRE(check_affinity(ts, ttl(2)).violations.size() == 1);
  auto sums = summarize_bindings(ts);
  REQUIRE(sums.size() == 1);
  CHECK(sums[0].rebinds == 1);
  CHECK(sums[0].workers == std::vector<std::string>{"0", "1"});
  CHECK(*sums[0].cached_ratio == 0.5);
  CHECK_FALSE(parse_turn(Json{{"event_type", "tool_start"}}, "x", 0).has_value());
}

TEST_CASE("live bindings: array or {bindings: [...]}, anything else is bad data") {
  Json arr = Json::parse(R"([{"key":"session:a","worker":1},{"key":"parent:b","worker":0,"active_leases":2}])");
  auto a = parse_bindings(arr);
  REQUIRE(a.ok());
  CHECK(a->size() == 2);
  auto b = parse_bindings(Json{{"bindings", arr}});
  REQUIRE(b.ok());
  CHECK(b->size() == 2);
  CHECK_FALSE(parse_bindings(Json{{"nope", 1}}).ok());
  CHECK_FALSE(parse_bindings(Json::parse("[1]")).ok());
  const std::string table = bindings_table(*a);
  CHECK(table.find("active_leases") != std::string::npos);
  CHECK(table.find("parent:b") != std::string::npos);
}

TEST_CASE("compare: repeats give mean and sample sd; a side is marked only beyond the spread") {
  auto run = [](double ttft, double hit) {
    Report r;
    r.series.push_back({"time_to_first_token", "Time to First Token", "ms", false, compute_stats({ttft, ttft})});
    r.scalars.push_back({"prompt_cache_hit_rate", "Prompt Cache Hit Rate", "percent", hit});
    return r;
  };
  // TTFT: A 100, 140 (mean 120, sd 28.28); B 90, 100 (mean 95, sd 7.07): 25 apart, within 35.36.
  // Hit rate: A 40, 42; B 60, 61: 19.5 apart, beyond 1.41 + 0.71.
  auto rows = compare_runs({run(100, 40), run(140, 42)}, {run(90, 60), run(100, 61)});
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].a == 120);
  CHECK(*rows[0].a_sd == doctest::Approx(28.2843).epsilon(1e-4));
  CHECK(rows[0].b == 95);
  CHECK(rows[0].better == "b");
  CHECK(*rows[0].exceeds_spread == false);
  CHECK(rows[0].a_runs == std::vector<double>{100, 140});
  CHECK(rows[4].better == "b");
  CHECK(*rows[4].exceeds_spread == true);
  // One run a side: no spread, so the verdict is only indicative.
  auto single = compare_runs({run(100, 40)}, {run(90, 60)});
  CHECK_FALSE(single[0].a_sd);
  CHECK_FALSE(single[0].exceeds_spread);
  CompareSide sa{"a", {run(100, 40)}, {"a.jsonl"}, ""}, sb{"b", {run(90, 60)}, {"b.jsonl"}, ""};
  const std::string t = compare_table(sa, sb);
  CHECK(t.find("(b)") != std::string::npos);
  CHECK(t.find("better: a or b") != std::string::npos);
}

TEST_CASE("compare: differences, ratios and which side is better") {
  Report a, b;
  a.series.push_back({"time_to_first_token", "Time to First Token", "ms", false, compute_stats({100, 200})});
  b.series.push_back({"time_to_first_token", "Time to First Token", "ms", false, compute_stats({50, 100})});
  a.scalars.push_back({"prompt_cache_hit_rate", "Prompt Cache Hit Rate", "percent", 20});
  b.scalars.push_back({"prompt_cache_hit_rate", "Prompt Cache Hit Rate", "percent", 60});
  auto rows = compare_reports(a, b);
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].stat == "avg");
  CHECK(rows[0].diff == -75);
  CHECK(*rows[0].ratio == 0.5);
  CHECK(rows[0].better == "b");
  CHECK(rows[4].better == "b");
  CHECK(*rows[4].ratio == 3);
}

TEST_CASE(
    "multi-run plot: separate set-ups are never joined, a sweep draws one line per group, 15 runs get "
    "15 colours and CDFs as small multiples (issue 50)") {
  // 15 runs of one request each: TTFT 10 + i ms, 5i % of the prompt cached.
  std::vector<RequestSet> sets(15);
  std::vector<Report> reps;
  for (int i = 0; i < 15; ++i) {
    Json row{{"event_type", "request_end"},
             {"event_time_unix_ms", 2000},
             {"request",
              {{"request_id", "r"},
               {"input_tokens", 100},
               {"output_tokens", 5},
               {"cached_tokens", 5 * i},
               {"request_received_ms", 1000.0},
               {"ttft_ms", 10.0 + i},
               {"total_time_ms", 100.0}}}};
    sets[i].requests.push_back(*parse_request_end(row, "t:1"));
  }
  for (const auto& s : sets) reps.push_back(build_report(s));
  std::vector<PlotRun> runs;
  for (int i = 0; i < 15; ++i) runs.push_back(PlotRun{"run" + std::to_string(i), &sets[i], &reps[i], {}, ""});
  auto count = [](const std::string& h, const std::string& what) {
    size_t n = 0;
    for (size_t p = h.find(what); p != std::string::npos; p = h.find(what, p + 1)) ++n;
    return n;
  };
  std::string sep = render_runs_html(runs, "");
  const std::string sweep_part = sep.substr(sep.find("<h2>Set-ups side by side"));
  CHECK(count(sweep_part, "<polyline") == 0);   // set-ups as points, never a line through them
  CHECK(count(sep, "one chart per run") == 2);  // TTFT and latency CDFs as small multiples
  std::set<std::string> colors;
  const std::string swatch = "<rect width=\"12\" height=\"12\" fill=\"";
  for (size_t p = sep.find(swatch); p != std::string::npos; p = sep.find(swatch, p + 1))
    colors.insert(sep.substr(p + swatch.size(), 7));
  CHECK(colors.size() == 15);  // the legend's swatches: no colour repeats

  // A sweep: 3 policies x 5 rates, one line per policy in each of the three charts.
  for (int i = 0; i < 15; ++i) {
    runs[i].group = std::vector<std::string>{"rr", "kv", "kv+aff"}[i / 5];
    runs[i].x = 0.5 * (i % 5 + 1);
  }
  std::string sw = render_runs_html(runs, "rate");
  const std::string part = sw.substr(sw.find("<h2>Sweep: metrics against rate"));
  CHECK(count(part, "<polyline") == 9);  // 3 charts (hit %, TTFT p90, req/s) x 3 policies
  CHECK(count(sw, "one chart per run") == 2);
  // Up to 6 runs share one CDF chart with a legend.
  runs.resize(6);
  for (auto& r : runs) r.group.clear(), r.x.reset();
  std::string few = render_runs_html(runs, "");
  CHECK(count(few, "one chart per run") == 0);
  CHECK(count(few.substr(0, few.find("<h2>Set-ups")), "<polyline") == 12);
}
