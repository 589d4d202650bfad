// Unit tests for lib/dyn/replay run.h: dyn-replay as one call. The --header and --extra-inputs
// parsers, the model asked of the endpoint, the flags one mode refuses, and whole runs (live against
// an in-process server, --sim) with their rows, --summary record and --artifact-dir files.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/replay/run.h"
#include "http_test_server.h"

using namespace dyn::replay;
using dyn::Json;
using dyn::testing::TestServer;
namespace fs = std::filesystem;

namespace {

/// A fresh folder under /tmp, removed with its contents at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("dyn-test-run-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// Three requests of two sessions, with timestamps (the fixed schedule).
std::string write_workload(const TempDir& d) {
  const std::string p = d.file("w.jsonl");
  std::ofstream(p) << R"({"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [1], "session_id": "a"})"
                   << "\n"
                   << R"({"timestamp": 1, "input_length": 40, "output_length": 3, "hash_ids": [2], "session_id": "b"})"
                   << "\n"
                   << R"({"input_length": 600, "output_length": 3, "hash_ids": [1, 3], "session_id": "a", "delay": 1})"
                   << "\n";
  return p;
}

std::vector<Json> read_rows(const std::string& path) {
  std::ifstream f(path);
  std::vector<Json> rows;
  for (std::string line; std::getline(f, line);) rows.push_back(Json::parse(line));
  return rows;
}

/// Rows to /dev/null, no records.
RunOutput discard() {
  RunOutput out;
  out.rows = "/dev/null";
  return out;
}

/// The message of the Fatal `run` throws, checking its exit code ("" when it throws none).
std::string run_error(const RunOptions& o, int code = dyn::kExitUsage) {
  try {
    run(o, discard());
  } catch (const dyn::Fatal& e) {
    CHECK(e.exit_code() == code);
    return e.what();
  }
  return "";
}

/// An OpenAI endpoint: GET /v1/models names `model`; chat completions answer one streamed word
/// with usage and record the model each request named.
void serve(TestServer& srv, const std::string& model, std::vector<std::string>& models_asked) {
  srv.server.Get("/v1/models", [model](const httplib::Request&, httplib::Response& res) {
    res.set_content(Json{{"data", Json::array({{{"id", model}}})}}.dump(), "application/json");
  });
  srv.server.Post("/v1/chat/completions", [&models_asked](const httplib::Request& req, httplib::Response& res) {
    models_asked.push_back(Json::parse(req.body)["model"].get<std::string>());
    res.set_content(dyn::testing::chunk("hi", "stop") +
                        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1}}\n\n"
                        "data: [DONE]\n\n",
                    "text/event-stream");
  });
}

}  // namespace

TEST_CASE("--header: 'Name: value' with the value's leading blanks dropped; bad forms are usage errors") {
  auto h = parse_header("X-Team:  \tblue green");
  REQUIRE(h.ok());
  CHECK(h->first == "X-Team");
  CHECK(h->second == "blue green");
  CHECK(parse_header("X-Empty:")->second.empty());
  for (const std::string bad : {"no-colon", ": value"}) {
    auto e = parse_header(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().exit_code == dyn::kExitUsage);
    CHECK(e.error().message == "--header " + bad + ": expected 'Name: value'");
  }
  // RFC 9110: no blanks in a field name, no CR, LF or NUL in a value (header injection).
  for (const std::string& bad :
       std::vector<std::string>{"X Team: v", " X: v", "X: a\r\nY: b", std::string("X: a\0b", 6)}) {
    auto e = parse_header(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().exit_code == dyn::kExitUsage);
    CHECK(e.error().message.find("no spaces in the name, no line breaks") != std::string::npos);
  }
}

TEST_CASE("--extra-inputs: the value as JSON when it parses, else as a string") {
  CHECK(parse_extra_input("temperature:0.5")->second == Json(0.5));
  CHECK(parse_extra_input("stop:[\"x\",\"y\"]")->second == Json::array({"x", "y"}));
  CHECK(parse_extra_input("user:alice")->second == Json("alice"));
  CHECK(parse_extra_input("url:http://a:1/b")->second == Json("http://a:1/b"));  // the first colon splits
  CHECK(parse_extra_input("url:http://a:1/b")->first == "url");
  for (const char* bad : {"novalue", ":x"}) {
    auto e = parse_extra_input(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().exit_code == dyn::kExitUsage);
  }
}

TEST_CASE("the model: the endpoint's first id; no id asks for --model; nothing answering is a network error") {
  TestServer srv;
  std::vector<std::string> asked;
  serve(srv, "qwen-7b", asked);
  srv.server.Get("/empty/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"data": []})", "application/json");
  });
  srv.start();
  dyn::http::ClientOptions c;
  c.endpoint = *dyn::http::Endpoint::parse(srv.url());
  CHECK(*endpoint_model(c) == "qwen-7b");
  c.endpoint = *dyn::http::Endpoint::parse(srv.url() + "/empty");
  auto none = endpoint_model(c);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().exit_code == dyn::kExitUsage);
  CHECK(none.error().message.find("answered HTTP 200 without a model id; pass --model") != std::string::npos);
  c.endpoint = *dyn::http::Endpoint::parse(srv.url() + "/absent");
  CHECK(endpoint_model(c).error().message.find("answered HTTP 404") != std::string::npos);
  // A port nothing listens on (the server's own, once it has stopped).
  const std::string gone = srv.url();
  srv.server.stop();
  srv.thread.join();
  c.endpoint = *dyn::http::Endpoint::parse(gone);
  c.connect_timeout_s = 1;
  auto down = endpoint_model(c);
  REQUIRE_FALSE(down.ok());
  CHECK(down.error().exit_code == dyn::kExitIo);
}

TEST_CASE("flags one mode does not read are usage errors, before the workload is read") {
  RunOptions sim;
  sim.sim = true;
  sim.inputs = {"/nonexistent/workload.jsonl"};  // never opened: the flags fail first
  sim.typed = {"--workers", "--url"};
  CHECK(run_error(sim) == "--url applies to a live endpoint; it has no meaning with --sim");
  sim.typed = {"--streaming"};
  CHECK(run_error(sim) == "--streaming / --no-streaming applies to a live endpoint; it has no meaning with --sim");
  sim.typed = {"--progress"};
  CHECK(run_error(sim) == "--progress / --no-progress applies to a live endpoint; it has no meaning with --sim");
  sim.typed = {};
  sim.warmup = 2;
  CHECK(run_error(sim).find("--warmup-request-count cannot be used with --sim") == 0);
  sim.warmup = 0;
  sim.tokenizer_url = "http://127.0.0.1:1";
  CHECK(run_error(sim).find("--tokenizer-url sizes prompts for a live endpoint") == 0);
  sim.tokenizer_url.clear();
  sim.typed = {"--request-rate-mode"};  // typed, without a rate
  CHECK(run_error(sim) == "--request-rate-mode needs --request-rate");
  sim.typed = {};
  sim.cluster.admission.mode = dyn::route::AdmissionMode::kThunderAgent;
  sim.cluster.admission.pause_target = 0.99;  // above the pause threshold
  CHECK(run_error(sim) == "--pause-target must be in [0, --pause-threshold], got 0.99");

  RunOptions live;
  live.inputs = {"/nonexistent/workload.jsonl"};
  CHECK(run_error(live) == "--url is required (or --sim)");
  live.url = "http://127.0.0.1:1";
  live.cluster.references = {dyn::tokens::ReferencePolicy::kLru};
  CHECK(run_error(live).find("--reference needs --sim") == 0);
  live.cluster.references.clear();
  live.cluster_typed = {"--router-mode", "--workers"};
  CHECK(run_error(live) ==
        "--router-mode configures the simulated cluster (--sim); a live run uses the endpoint's own workers, router "
        "and engines");
  live.cluster_typed.clear();
  live.headers = {"X-Dynamo-Session-ID: s1"};  // the dynamo style writes it from each row's session
  CHECK(run_error(live).find("--session-headers dynamo sends this header") != std::string::npos);
  live.session_headers = "none";
  live.headers = {"Bad Name: v"};
  CHECK(run_error(live).find("no spaces in the name") != std::string::npos);
  live.headers.clear();
  live.extra_inputs = {"novalue"};
  CHECK(run_error(live) == "--extra-inputs novalue: expected KEY:VALUE");
  live.extra_inputs.clear();
  live.fixed_schedule = true;
  live.schedule.request_rate = 5;
  CHECK(run_error(live).find("--request-rate cannot be used with --fixed-schedule") == 0);
  live.fixed_schedule = false;
  live.schedule.request_rate = 0;
  // Past the flags, the missing workload is the error (exit 3 or 4, not a usage error).
  try {
    run(live, discard());
    FAIL("a missing workload must fail");
  } catch (const dyn::Fatal& e) {
    CHECK(e.exit_code() != dyn::kExitUsage);
  }
}

TEST_CASE("a live run: the endpoint's model, one row per request, the run record and AIPerf's files") {
  TempDir d;
  TestServer srv;
  std::vector<std::string> asked;
  serve(srv, "served-model", asked);
  srv.start();
  RunOptions o;
  o.inputs = {write_workload(d)};
  o.url = srv.url();
  o.schedule.speedup = 100;
  o.progress = false;
  RunOutput out;
  out.summary_path = d.file("summary.json");
  out.artifact_dir = d.file("art");  // created; the rows default to art/requests.jsonl
  out.config = {{"tool", "dyn-replay"}};
  CHECK(run(o, out) == dyn::kExitOk);
  CHECK(asked == std::vector<std::string>(3, "served-model"));
  const auto rows = read_rows(d.file("art/requests.jsonl"));
  REQUIRE(rows.size() == 3);
  for (const auto& r : rows) CHECK(r["event_type"] == "request_end");
  Json record = Json::parse(std::ifstream(d.file("summary.json")));
  CHECK(record["config"]["tool"] == "dyn-replay");
  CHECK(record["summary"]["mode"] == "live");
  CHECK(record["summary"]["ok"] == 3);
  CHECK(record["summary"]["exit_status"] == 0);
  CHECK(Json::parse(std::ifstream(d.file("art/summary.json"))) == record);
  for (const char* f : {"profile_export.jsonl", "profile_export_aiperf.json", "profile_export_aiperf.csv"})
    CHECK(fs::file_size(d.path / "art" / f) > 0);
  CHECK(Json::parse(std::ifstream(d.file("art/profile_export_aiperf.json")))["input_config"]["tool"] == "dyn-replay");
}

TEST_CASE("a --sim run: the cluster's rows under the given model, with the load flags' meaning") {
  TempDir d;
  RunOptions o;
  o.sim = true;
  o.inputs = {write_workload(d)};
  o.model = "sim-model";
  o.cluster.workers = 2;
  RunOutput out;
  out.rows = d.file("rows.jsonl");
  out.summary_path = d.file("summary.json");
  CHECK(run(o, out) == dyn::kExitOk);
  const auto rows = read_rows(out.rows);
  REQUIRE(rows.size() == 3);
  for (const auto& r : rows) CHECK(r["request"]["model"] == "sim-model");
  Json s = Json::parse(std::ifstream(out.summary_path))["summary"];
  CHECK(s["mode"] == "sim");
  CHECK(s["workers"] == 2);
  CHECK(s["requests"] == 3);
  // --request-count 2: the first two rows only (the same meaning as live).
  o.schedule.request_count = 2;
  CHECK(run(o, out) == dyn::kExitOk);
  CHECK(read_rows(out.rows).size() == 2);
}

TEST_CASE("a --sim session turn after a tool call starts tool_wait_ms after the previous turn, as live") {
  // SPEC 6.1 / 6.2.1 and the live schedule (build_plan): the gap after the last dependency is the
  // turn's delay plus its tool_wait_ms, with or without wait_for (--sim once added the tool wait
  // only with wait_for, so WEKA tool waits were skipped).
  TempDir d;
  const std::string p = d.file("tool.jsonl");
  std::ofstream(p)
      << R"({"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [1], "session_id": "a", "request_id": "a0"})"
      << "\n"
      << R"({"input_length": 600, "output_length": 3, "hash_ids": [1, 2], "session_id": "a", "request_id": "a1", "tool_wait_ms": 5000})"
      << "\n"
      << R"({"input_length": 1100, "output_length": 3, "hash_ids": [1, 2, 3], "session_id": "a", "request_id": "a2", "delay": 700, "wait_for": ["a0"], "tool_wait_ms": 300})"
      << "\n";
  RunOptions o;
  o.sim = true;
  o.inputs = {p};
  o.schedule.speedup = 2;
  RunOutput out;
  out.rows = d.file("rows.jsonl");
  CHECK(run(o, out) == dyn::kExitOk);
  std::map<std::string, Json> by_id;
  for (const auto& r : read_rows(out.rows)) by_id[r["request"]["request_id"]] = r["request"];
  REQUIRE(by_id.size() == 3);
  auto end = [&](const char* id) {
    return by_id[id]["request_received_ms"].get<double>() + by_id[id]["total_time_ms"].get<double>();
  };
  // request_received_ms is written in whole ms.
  CHECK(std::abs(by_id["a1"]["request_received_ms"].get<double>() - (end("a0") + 5000 / 2.0)) <= 1);
  CHECK(std::abs(by_id["a2"]["request_received_ms"].get<double>() - (end("a1") + (700 + 300) / 2.0)) <= 1);
}
