// Unit tests for lib/dyn/serve and the proxy helpers of lib/dyn/http: the response tap on the SSE
// cases (01 split reads, 03 usage chunks), and the frontend in capture and serve mode against
// scripted in-process upstreams on 127.0.0.1 (errors keep their status, a cut stream gives the
// client an error, a disconnecting client cancels the upstream, request_end rows).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dyn/base/json.h"
#include "dyn/http/proxy.h"
#include "dyn/http/server.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/frontend.h"
#include "dyn/serve/intake.h"
#include "dyn/tokens/hash.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/response_tap.h"

using dyn::Json;
using namespace dyn::serve;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
const std::string kCases = std::string(DYN_SOURCE_DIR) + "/tests/fixtures/cases/";

httplib::Headers sse_headers() { return {{"Content-Type", "text/event-stream"}}; }

/// Feeds reads through a tap, returns what the client would see.
std::string feed(ResponseTap& tap, const std::vector<std::string>& reads) {
  tap.on_response(200, sse_headers(), 0);
  std::string out;
  double t = 1;
  for (const auto& r : reads) tap.on_data(r, t++, out);
  tap.on_end(t, out);
  return out;
}
}  // namespace

TEST_CASE("case 01: an event split mid-JSON and mid-UTF-8 across reads is kept whole") {
  std::string dir = kCases + "01-sse-split-mid-json/";
  std::string full = slurp(dir + "full.sse");
  ResponseTap split(Api::kChat, false), whole(Api::kChat, false);
  std::string out = feed(split, {slurp(dir + "read-1.bin"), slurp(dir + "read-2.bin"), slurp(dir + "read-3.bin")});
  std::string out2 = feed(whole, {full});
  CHECK(out == full);  // relayed byte for byte
  CHECK(out2 == full);
  CHECK(split.facts().events == 5);
  CHECK(split.facts().finish_reason == std::optional<std::string>("stop"));
  CHECK(split.facts().content_bytes == std::string("Grüße 日本").size());
  CHECK(split.facts().content_chunks == whole.facts().content_chunks);
  CHECK(split.facts().content_bytes == whole.facts().content_bytes);
}

TEST_CASE("case 03: usage from the final empty-choices chunk or the last content chunk; null usage is absent") {
  std::string dir = kCases + "03-sse-usage-empty-choices/";
  for (const char* name : {"stream-a.sse", "stream-b.sse"}) {
    CAPTURE(name);
    ResponseTap tap(Api::kChat, false);
    std::string in = slurp(dir + name);
    // One byte per read: the worst split there is.
    std::vector<std::string> reads;
    for (char c : in) reads.emplace_back(1, c);
    std::string out = feed(tap, reads);
    CHECK(out == in);
    CHECK(tap.facts().input_tokens == std::optional<uint64_t>(17));
    CHECK(tap.facts().output_tokens == std::optional<uint64_t>(3));
    CHECK(tap.facts().finish_reason == std::optional<std::string>("stop"));
    CHECK(tap.facts().content_bytes == std::string("Hi there!").size());
  }
  {
    // stream-a: the usage chunk is no token arrival: the last content time stays at "!".
    ResponseTap tap(Api::kChat, false);
    std::string in = slurp(dir + "stream-a.sse");
    tap.on_response(200, sse_headers(), 0);
    std::string out;
    size_t pos = 0;
    double t = 0;
    while (pos < in.size()) {  // one event per read, at t = 1, 2, ...
      size_t e = in.find("\n\n", pos) + 2;
      tap.on_data(std::string_view(in).substr(pos, e - pos), ++t, out);
      pos = e;
    }
    CHECK(tap.facts().first_content_ms == std::optional<double>(2));
    CHECK(tap.facts().last_content_ms == std::optional<double>(4));
    CHECK(tap.facts().inter_chunk_ms.size() == 2);
  }
  {
    ResponseTap tap(Api::kChat, false);
    feed(tap, {slurp(dir + "stream-c.sse")});
    CHECK_FALSE(tap.facts().input_tokens.has_value());
    CHECK_FALSE(tap.facts().output_tokens.has_value());
    CHECK(tap.facts().content_bytes == std::string("Hi there!").size());
  }
  {
    // The frontend asked for usage on the client's behalf: the usage-only chunk is hidden.
    ResponseTap tap(Api::kChat, true);
    std::string in = slurp(dir + "stream-a.sse");
    std::string out = feed(tap, {in});
    CHECK(out.find("\"usage\"") == std::string::npos);
    CHECK(out.find("[DONE]") != std::string::npos);
    CHECK(tap.facts().dropped_events == 1);
    CHECK(tap.facts().output_tokens == std::optional<uint64_t>(3));
  }
}

TEST_CASE("events of the wrong shape are relayed and counted, never read as content") {
  // choices, delta, tool_calls, usage and their fields of unexpected JSON types (a string for an
  // array, an array for an object, a negative or fractional count): the bytes pass unchanged.
  ResponseTap tap(Api::kChat, false);
  const std::string in =
      "data: {\"choices\":\"x\"}\n\n"
      "data: {\"choices\":{\"0\":1},\"usage\":[1]}\n\n"
      "data: {\"choices\":[1,null,{\"delta\":\"x\"},{\"delta\":{\"tool_calls\":\"x\",\"content\":7}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"tool_calls\":[1,{\"function\":[]}]}}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":2.5}}\n\n"
      "data: [1,2]\n\ndata: \"s\"\n\ndata: [DONE]\n\n";
  CHECK(feed(tap, {in}) == in);
  CHECK(tap.facts().events == 8);
  CHECK(tap.facts().content_bytes == 0);
  CHECK_FALSE(tap.facts().input_tokens.has_value());
  CHECK_FALSE(tap.facts().output_tokens.has_value());
  CHECK(tap.facts().terminal_event);
}

TEST_CASE("random event shapes on every API: relayed byte for byte, no crash") {
  // Values of every JSON type under the keys the tap reads, nested a few levels, for each API
  // (fixed seed: a failure reproduces). The tap must relay every byte and never fault on a shape.
  const char* keys[] = {"choices",
                        "delta",
                        "content",
                        "text",
                        "tool_calls",
                        "function",
                        "arguments",
                        "name",
                        "id",
                        "index",
                        "usage",
                        "prompt_tokens",
                        "completion_tokens",
                        "prompt_tokens_details",
                        "cached_tokens",
                        "finish_reason",
                        "type",
                        "message",
                        "response",
                        "item",
                        "error",
                        "content_block",
                        "stop_reason",
                        "output",
                        "status",
                        "output_index",
                        "model"};
  const char* types[] = {"message_start",
                         "content_block_start",
                         "content_block_delta",
                         "message_delta",
                         "response.output_text.delta",
                         "response.output_item.added",
                         "response.completed",
                         "response.failed",
                         "error",
                         "tool_use",
                         "function_call"};
  std::mt19937 rng(16);
  std::function<Json(int)> value = [&](int depth) -> Json {
    switch (rng() % (depth > 3 ? 5 : 8)) {
      case 0: return nullptr;
      case 1: return static_cast<int64_t>(rng() % 7) - 2;
      case 2: return 1.5;
      case 3: return std::string(types[rng() % std::size(types)]);
      case 4: return rng() % 2 == 0;
      case 5: {
        Json a = Json::array();
        for (unsigned i = rng() % 3; i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        Json o = Json::object();
        for (unsigned i = rng() % 4; i > 0; --i) o[keys[rng() % std::size(keys)]] = value(depth + 1);
        return o;
      }
    }
  };
  for (Api api : {Api::kChat, Api::kCompletions, Api::kMessages, Api::kResponses}) {
    for (bool hide : {false, true}) {
      ResponseTap tap(api, hide);
      tap.on_response(200, {{"Content-Type", "text/event-stream"}}, 0);
      std::string in;
      for (int i = 0; i < 1500; ++i) {
        if (rng() % 4 == 0) in += std::string("event: ") + types[rng() % std::size(types)] + "\n";
        in += "data: " + value(0).dump() + "\n\n";
      }
      std::string out;
      tap.on_data(in, 1, out);
      tap.on_end(2, out);
      if (!hide) CHECK(out == in);
      CHECK(tap.facts().events == 1500);
    }
  }
}

TEST_CASE(
    "chat chunks: a repeated key reads as its first occurrence, a null one as absent, a non-object choice as none") {
  // What simdjson's at_key finds, kept by the one-pass member lookup of each chunk.
  ResponseTap tap(Api::kChat, false);
  feed(
      tap,
      {"data: {\"model\":null,\"model\":\"late\",\"choices\":[{\"delta\":{\"content\":\"ab\",\"content\":\"xyz\"}}]}\n\n"
       "data: {\"choices\":[{\"delta\":{\"content\":null,\"content\":\"xyz\"}}]}\n\n"
       "data: {\"choices\":[7,{\"index\":1,\"index\":2,\"delta\":{\"reasoning\":\"r\",\"content\":\"c\"},"
       "\"finish_reason\":\"stop\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":4},"
       "\"usage\":{\"completion_tokens\":9},\"model\":\"m\"}\n\n"});
  CHECK(tap.facts().content_bytes == 2 + 2);
  CHECK(tap.facts().content_chunks == 2);  // the null-content chunk is no token arrival
  CHECK(tap.facts().model == "m");
  CHECK(tap.facts().finish_reason == std::optional<std::string>("stop"));
  CHECK(tap.facts().output_tokens == std::optional<uint64_t>(4));
}

TEST_CASE("tool calls, Anthropic and Responses streams") {
  ResponseTap chat(Api::kChat, false);
  feed(
      chat,
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"spawn_agent\",\"arguments\":\"\"}}]}}]}\n\n"
       "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"});
  REQUIRE(chat.facts().tool_calls.size() == 1);
  CHECK(chat.facts().tool_calls[0].id == "call_1");
  CHECK(chat.facts().tool_calls[0].name == "spawn_agent");
  CHECK(chat.facts().finish_reason == std::optional<std::string>("tool_calls"));

  ResponseTap msg(Api::kMessages, false);
  feed(
      msg,
      {"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,\"output_tokens\":1}}}\n\n"
       "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Agent\",\"input\":{}}}\n\n"
       "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"
       "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n"});
  CHECK(msg.facts().input_tokens == std::optional<uint64_t>(100));
  CHECK(msg.facts().cached_tokens == std::optional<uint64_t>(90));
  CHECK(msg.facts().output_tokens == std::optional<uint64_t>(7));
  CHECK(msg.facts().finish_reason == std::optional<std::string>("tool_use"));
  REQUIRE(msg.facts().tool_calls.size() == 1);
  CHECK(msg.facts().tool_calls[0].name == "Agent");
  CHECK(msg.facts().model == "claude");

  ResponseTap resp(Api::kResponses, false);
  feed(
      resp,
      {"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_9\",\"name\":\"spawn_agent\",\"arguments\":\"\"}}\n\n"
       "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{}\"}\n\n"
       "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"model\":\"m\",\"usage\":{\"input_tokens\":50,\"output_tokens\":5,\"input_tokens_details\":{\"cached_tokens\":32}}}}\n\n"});
  CHECK(resp.facts().input_tokens == std::optional<uint64_t>(50));
  CHECK(resp.facts().cached_tokens == std::optional<uint64_t>(32));
  CHECK(resp.facts().finish_reason == std::optional<std::string>("tool_calls"));
  REQUIRE(resp.facts().tool_calls.size() == 1);
  CHECK(resp.facts().tool_calls[0].id == "call_9");
}

TEST_CASE("case 27: a final message_delta with input_tokens 0 or none keeps message_start's count") {
  std::string dir = std::string(DYN_SOURCE_DIR) + "/tests/fixtures/cases/27-anthropic-delta-input-zero/";
  for (const char* v : {"A", "B", "C"}) {
    CAPTURE(v);
    ResponseTap tap(Api::kMessages, false);
    std::string in = slurp(dir + "stream-" + v + ".sse");
    REQUIRE_FALSE(in.empty());
    std::vector<std::string> reads;
    for (size_t i = 0; i < in.size(); i += 7) reads.push_back(in.substr(i, 7));  // split anywhere
    CHECK(feed(tap, reads) == in);                                               // byte for byte
    CHECK(tap.facts().input_tokens == std::optional<uint64_t>(25));
    CHECK(tap.facts().output_tokens == std::optional<uint64_t>(12));  // cumulative, not 1 + 12
    CHECK(tap.facts().terminal_event);
    CHECK(stream_end(Api::kMessages, tap.facts()).complete);
    CHECK(stream_end(Api::kMessages, tap.facts()).warning.empty());
  }
  // The same rule for the other APIs: a later, smaller count never replaces a larger one.
  ResponseTap chat(Api::kChat, false);
  feed(
      chat,
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":1}}\n\n"
       "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n"});
  CHECK(chat.facts().input_tokens == std::optional<uint64_t>(40));
  CHECK(chat.facts().output_tokens == std::optional<uint64_t>(5));
}

TEST_CASE("issue 21.2: a stream is complete only with its API's terminal event") {
  struct Case {
    Api api;
    std::string body;
    bool complete;
    bool warning;
  };
  const std::string chat_tok = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n";
  const std::string chat_fin = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
  const std::string cmp_tok = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n";
  const std::string cmp_fin = "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
  const std::string msg_start =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n";
  const std::string msg_tok =
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n";
  const std::string msg_delta =
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n";
  const std::string msg_stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const std::string rsp_tok =
      "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n";
  const std::string rsp_done =
      "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n";
  std::vector<Case> cases = {
      {Api::kChat, chat_tok + chat_fin + "data: [DONE]\n\n", true, false},
      {Api::kChat, chat_tok + chat_fin, true, true},  // finished, no [DONE]: ok with a warning
      {Api::kChat, chat_tok, false, false},           // cut between events
      {Api::kCompletions, cmp_tok + cmp_fin + "data: [DONE]\n\n", true, false},
      {Api::kCompletions, cmp_tok, false, false},
      {Api::kMessages, msg_start + msg_tok + msg_delta + msg_stop, true, false},
      {Api::kMessages, msg_start + msg_tok + msg_delta, true, true},
      {Api::kMessages, msg_start + msg_tok, false, false},
      {Api::kResponses, rsp_tok + rsp_done, true, false},
      {Api::kResponses, rsp_tok, false, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    ResponseTap tap(cases[i].api, false);
    feed(tap, {cases[i].body});
    StreamEnd e = stream_end(cases[i].api, tap.facts());
    CHECK(e.complete == cases[i].complete);
    CHECK(e.warning.empty() == !cases[i].warning);
    if (!e.complete) CHECK(e.message.find("stream ended without a finish reason or ") == 0);
  }
  // A JSON (non-stream) body is judged by its status and body, never by this rule.
  ResponseTap plain(Api::kChat, false);
  plain.on_response(200, {{"Content-Type", "application/json"}}, 0);
  std::string out;
  plain.on_end(1, out);
  CHECK(stream_end(Api::kChat, plain.facts()).complete);
}

TEST_CASE("issue 21.3: an error inside a stream keeps the upstream's type and message") {
  ResponseTap msg(Api::kMessages, false);
  feed(
      msg,
      {"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
       "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"});
  CHECK(msg.facts().error_event);
  CHECK(msg.facts().error_type == "overloaded_error");
  CHECK(msg.facts().error_message == "Overloaded");

  ResponseTap chat(Api::kChat, false);
  feed(chat, {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
              "data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n"
              "data: {\"error\":{\"message\":\"echo\",\"type\":\"later\"}}\n\n"});
  CHECK(chat.facts().error_type == "InternalServerError");  // the first error is the cause
  CHECK(chat.facts().error_message == "engine died");

  ResponseTap resp(Api::kResponses, false);
  feed(resp, {"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n"});
  CHECK(resp.facts().error_type == "server_error");
  CHECK(resp.facts().error_message == "boom");

  ResponseTap failed(Api::kResponses, false);
  feed(
      failed,
      {"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}}}\n\n"});
  CHECK(failed.facts().error_type == "rate_limit_exceeded");
  CHECK(failed.facts().error_message == "slow down");
  CHECK(failed.facts().terminal_event);
}

TEST_CASE("issue 21.5: headers a Connection header names are hop-by-hop, as are Proxy-*") {
  httplib::Headers h = {{"Connection", "keep-alive, X-Internal-Hop"},
                        {"connection", " Close ,x-other\t"},
                        {"X-Internal-Hop", "secret"},
                        {"X-End-To-End", "kept"}};
  auto n = dyn::http::connection_nominated(h);
  REQUIRE(n.size() == 4);
  CHECK(n[2] == "Close");
  CHECK(n[3] == "x-other");
  CHECK_FALSE(dyn::http::forwardable_header("x-internal-hop", n));
  CHECK_FALSE(dyn::http::forwardable_header("X-OTHER", n));
  CHECK(dyn::http::forwardable_header("X-End-To-End", n));
  CHECK_FALSE(dyn::http::forwardable_header("Proxy-Authorization", {}));
  CHECK_FALSE(dyn::http::forwardable_header("Proxy-Authenticate", {}));
  CHECK(dyn::http::forwardable_header("Authorization", {}));  // credentials go end to end
}

TEST_CASE("upstream URLs") {
  auto u = dyn::http::UpstreamUrl::parse("http://127.0.0.1:8000/v1/");
  REQUIRE(u.ok());
  CHECK(u->scheme_host_port == "http://127.0.0.1:8000");
  CHECK(u->path_prefix == "");
  CHECK((u->host == "127.0.0.1" && u->port == "8000" && !u->tls));
  auto v6 = dyn::http::UpstreamUrl::parse("https://[::1]/p");
  REQUIRE(v6.ok());
  CHECK((v6->host == "::1" && v6->port == "443" && v6->tls && v6->path_prefix == "/p"));
  CHECK_FALSE(dyn::http::UpstreamUrl::parse("127.0.0.1:8000").ok());
}

namespace {

/// A scripted upstream on 127.0.0.1 (port 0). The request header x-test-mode picks the script:
/// "error" 503 with a JSON error; "cut" one chunk then the connection drops; "slow" a chunk every
/// 20 ms for up to 5 s (counts chunks written, to see cancellation); anything else a normal
/// three-chunk stream (or a JSON body when not streaming).
struct ScriptedUpstream {
  httplib::Server svr;
  std::thread th;
  int port = 0;
  std::atomic<int> slow_chunks{0};
  std::atomic<bool> slow_ended{false};
  std::atomic<int> health_failures{0};  ///< answer this many GET /health with 503
  std::atomic<int> health_polls{0};
  std::atomic<bool> health_hold{false};  ///< a good poll waits while this is set (≤ 0.5 s)
  std::mutex mu;
  std::vector<Json> bodies;
  std::vector<std::string> auth;

  ScriptedUpstream() {
    svr.new_task_queue = [] { return new httplib::ThreadPool(16); };
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      health_polls++;
      if (health_failures.fetch_sub(1) > 0) {
        res.status = 503;
        return;
      }
      for (int i = 0; i < 50 && health_hold; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      res.set_content("ok", "text/plain");
    });
    svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Json body = Json::parse(req.body);
      {
        std::lock_guard<std::mutex> lk(mu);
        bodies.push_back(body);
        auth.push_back(req.get_header_value("Authorization"));
      }
      std::string mode = req.get_header_value("x-test-mode");
      bool usage = body.contains("stream_options") && body["stream_options"].value("include_usage", false);
      if (mode == "error") {
        res.status = 503;
        res.set_content(R"({"error":{"message":"overloaded","type":"service_unavailable","code":503}})",
                        "application/json");
        return;
      }
      if (!body.value("stream", false)) {
        res.set_content(
            R"({"id":"x","model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}})",
            "application/json");
        return;
      }
      res.set_chunked_content_provider("text/event-stream", [this, mode, usage, i = 0](
                                                                size_t, httplib::DataSink& sink) mutable {
        auto chunk = [](const std::string& text) {
          return "data: {\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text +
                 "\"},\"finish_reason\":null}]}\n\n";
        };
        if (mode == "slow") {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          std::string c = chunk("tok");
          if (!sink.write(c.data(), c.size()) || ++i > 250) {
            slow_ended = true;
            return false;
          }
          slow_chunks++;
          return true;
        }
        if (mode == "cut") {
          std::string c = chunk("partial");
          sink.write(c.data(), c.size());
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return false;
        }
        std::string all;
        for (const char* t : {"Hel", "lo ", "you"}) {
          std::string c = chunk(t);
          sink.write(c.data(), c.size());
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        all = "data: {\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
        if (usage)
          all +=
              "data: {\"model\":\"up\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n";
        all += "data: [DONE]\n\n";
        sink.write(all.data(), all.size());
        sink.done();
        return true;
      });
    });
    port = svr.bind_to_any_port("127.0.0.1");
    th = std::thread([this] { svr.listen_after_bind(); });
    while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ScriptedUpstream() {
    svr.stop();
    th.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

struct RunningFrontend {
  std::unique_ptr<Frontend> fe;
  std::thread th;
  int port = 0;
  explicit RunningFrontend(FrontendOptions o) {
    fe = std::make_unique<Frontend>(std::move(o));
    auto p = fe->bind();
    REQUIRE(p.ok());
    port = *p;
    th = std::thread([this] { fe->serve(); });
  }
  void stop() {
    if (th.joinable()) {
      fe->stop();
      th.join();
    }
  }
  ~RunningFrontend() { stop(); }
};

std::string temp_prefix(const char* name) { return "/tmp/dyn-unit-serve-" + std::to_string(::getpid()) + "-" + name; }

std::vector<Json> read_rows(const std::string& path) {
  std::vector<Json> rows;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) rows.push_back(Json::parse(line));
  return rows;
}

FrontendOptions base_options(const std::string& trace_path) {
  FrontendOptions o;
  o.listen.port = 0;
  o.listen.threads = 32;
  o.trace = true;
  o.trace_file.prefix = trace_path;
  o.trace_file.gzip = false;
  o.health_interval_ms = 100;
  return o;
}

const char* kChatStream =
    R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hello there, this is a prompt"}]})";

}  // namespace

TEST_CASE("capture: streams relayed as they arrive, usage hidden, errors keep status, rows written") {
  ScriptedUpstream up;
  std::string trace = temp_prefix("capture.jsonl");
  std::remove(trace.c_str());
  FrontendOptions o = base_options(trace);
  o.capture = true;
  o.workers = {up.url()};
  RunningFrontend fe(o);
  httplib::Client cli("127.0.0.1", fe.port);
  cli.set_read_timeout(std::chrono::seconds(10));

  // Streaming without include_usage: the client never sees the usage chunk; the row has usage.
  httplib::Headers h = {{"x-dynamo-session-id", "research-run-42:researcher"},
                        {"x-dynamo-parent-session-id", "research-run-42:planner"},
                        {"Authorization", "Bearer sk-secret"},
                        {"x-request-id", "rid-1"}};
  std::string got;
  httplib::Request r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.headers = h;
  r.body = kChatStream;
  r.headers.emplace("Content-Type", "application/json");
  std::vector<double> arrivals;
  auto t0 = std::chrono::steady_clock::now();
  r.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    got.append(d, n);
    arrivals.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  REQUIRE(cli.send(r, res, err));
  CHECK(res.status == 200);
  CHECK(got.find("\"usage\"") == std::string::npos);
  CHECK(got.find("Hel") != std::string::npos);
  CHECK(got.find("[DONE]") != std::string::npos);
  // (Relaying chunk by chunk is shown below: the "slow" client stops after three chunks while the
  // upstream is still streaming, which only works if chunks reach it before the end.)
  {
    std::lock_guard<std::mutex> lk(up.mu);
    REQUIRE(up.bodies.size() == 1);
    CHECK(up.bodies[0]["stream_options"]["include_usage"] == true);
    CHECK(up.auth[0] == "Bearer sk-secret");  // credentials forwarded
  }

  // An upstream error keeps its status and body.
  auto e = cli.Post("/v1/chat/completions", {{"x-test-mode", "error"}}, kChatStream, "application/json");
  REQUIRE(e);
  CHECK(e->status == 503);
  CHECK(e->body.find("overloaded") != std::string::npos);

  // Malformed JSON: 400 with an OpenAI-style error body; the server keeps serving.
  auto bad = cli.Post("/v1/chat/completions", "{not json", "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(Json::parse(bad->body)["error"]["type"] == "invalid_request_error");

  // Non-streaming: a plain JSON body with a Content-Length.
  auto plain = cli.Post("/v1/chat/completions", R"({"model":"m","messages":[{"role":"user","content":"hi"}]})",
                        "application/json");
  REQUIRE(plain);
  CHECK(plain->status == 200);
  CHECK(Json::parse(plain->body)["choices"][0]["message"]["content"] == "Hello world");

  // A cut stream: the client gets an error event and an incomplete response, not a hang.
  std::string cut_body;
  httplib::Request rc = r;
  rc.headers.emplace("x-test-mode", "cut");
  rc.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    cut_body.append(d, n);
    return true;
  };
  httplib::Response cres;
  cli.send(rc, cres, err);
  CHECK(cut_body.find("partial") != std::string::npos);
  CHECK(cut_body.find("stream_cut") != std::string::npos);

  // A client that goes away mid-stream stops the upstream request.
  httplib::Client c2("127.0.0.1", fe.port);
  httplib::Request rs = r;
  rs.headers.emplace("x-test-mode", "slow");
  int seen = 0;
  rs.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++seen < 3; };
  httplib::Response sres;
  c2.send(rs, sres, err);
  for (int i = 0; i < 100 && !up.slow_ended; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(up.slow_ended.load());
  CHECK(up.slow_chunks.load() < 200);  // 250 when never cancelled

  fe.stop();  // flushes the trace
  auto rows = read_rows(trace);
  REQUIRE(rows.size() == 6);
  const Json& first = rows[0];
  CHECK(first["event_type"] == "request_end");
  CHECK(first["event_source"] == "router");
  CHECK(first["agent_context"]["session_id"] == "research-run-42:researcher");
  CHECK(first["agent_context"]["parent_session_id"] == "research-run-42:planner");
  CHECK(first["request"]["x_request_id"] == "rid-1");
  CHECK(first["request"]["input_tokens"] == 40);
  CHECK(first["request"]["output_tokens"] == 3);
  CHECK(first["request"]["cached_tokens"] == 32);
  CHECK(first["request"]["finish_reason_metadata"]["finish_reason"] == "stop");
  CHECK(first["request"]["ttft_ms"].get<double>() > 0);
  CHECK(first["request"]["avg_itl_ms"].get<double>() > 0);
  CHECK(first["request"]["replay"]["trace_block_size"] == 64);
  CHECK_FALSE(first["request"].contains("worker"));
  CHECK(first["dyn"]["status"] == "ok");
  std::string all;
  for (const auto& row : rows) all += row.dump();
  CHECK(all.find("sk-secret") == std::string::npos);    // never credentials
  CHECK(all.find("hello there") == std::string::npos);  // never prompts
  CHECK(all.find("Hello world") == std::string::npos);  // never responses
  CHECK(rows[1]["dyn"]["error"]["code"] == 503);
  CHECK(rows[2]["dyn"]["error"]["code"] == 400);
  CHECK(rows[3]["request"]["output_tokens"] == 2);
  CHECK(rows[4]["dyn"]["error"]["type"] == "stream_cut");
  CHECK(rows[5]["dyn"]["status"] == "cancelled");
  std::remove(trace.c_str());
}

TEST_CASE("serve: x-dyn-worker, bindings, identity errors, 404, unreachable worker") {
  ScriptedUpstream a, b;
  std::string trace = temp_prefix("serve.jsonl");
  std::remove(trace.c_str());
  FrontendOptions o = base_options(trace);
  o.workers = {a.url(), b.url()};
  o.router.affinity_ttl_secs = 300;
  RunningFrontend fe(o);
  httplib::Client cli("127.0.0.1", fe.port);
  std::string worker;
  for (int i = 0; i < 4; ++i) {
    auto r = cli.Post("/v1/chat/completions", {{"x-session-id", "s1"}}, kChatStream, "application/json");
    REQUIRE(r);
    CHECK(r->status == 200);
    if (i == 0) worker = r->get_header_value("x-dyn-worker");
    CHECK(r->get_header_value("x-dyn-worker") == worker);
  }
  auto bj = cli.Get("/v1/bindings");
  REQUIRE(bj);
  Json bindings = Json::parse(bj->body);
  REQUIRE(bindings["count"] == 1);
  CHECK(bindings["bindings"][0]["key"] == "s1");
  CHECK(std::to_string(bindings["bindings"][0]["worker"].get<uint64_t>()) == worker);
  CHECK(bindings["bindings"][0]["active_leases"] == 0);

  auto longid =
      cli.Post("/v1/chat/completions", {{"x-session-id", std::string(257, 'a')}}, kChatStream, "application/json");
  REQUIRE(longid);
  CHECK(longid->status == 400);
  auto nf = cli.Post("/v1/nope", "{}", "application/json");
  REQUIRE(nf);
  CHECK(nf->status == 404);
  CHECK(Json::parse(nf->body)["error"]["code"] == 404);
  auto m = cli.Get("/metrics");
  REQUIRE(m);
  CHECK(m->body.find("dyn_router_bindings_total{outcome=\"hit\"} 3") != std::string::npos);
  fe.stop();
  auto rows = read_rows(trace);
  REQUIRE(rows.size() == 5);  // the 404 is no API request: no row
  CHECK(rows[0]["dyn"]["binding"] == "new");
  CHECK(rows[1]["dyn"]["binding"] == "hit");
  CHECK(rows[1]["request"]["worker"]["decode_worker_id"].get<int>() == std::stoi(worker));
  std::remove(trace.c_str());
}

TEST_CASE("serve: the latency histograms count a streamed request with tracing off too") {
  // The ITL histogram was fed by the request_end row's builder, so without --trace it stayed 0.
  ScriptedUpstream a;
  FrontendOptions o = base_options(temp_prefix("untraced.jsonl"));
  o.trace = false;
  o.workers = {a.url()};
  RunningFrontend fe(o);
  httplib::Client cli("127.0.0.1", fe.port);
  auto r = cli.Post("/v1/chat/completions", kChatStream, "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto m = cli.Get("/metrics");
  REQUIRE(m);
  CHECK(m->body.find("dyn_request_ttft_seconds_count 1\n") != std::string::npos);
  CHECK(m->body.find("dyn_request_duration_seconds_count 1\n") != std::string::npos);
  CHECK(m->body.find("dyn_request_itl_seconds_count 1\n") != std::string::npos);
}

TEST_CASE("serve: a worker is marked down after --health-failure-threshold failed polls in a row, not one") {
  ScriptedUpstream a, b;
  FrontendOptions o = base_options(temp_prefix("health.jsonl"));
  o.trace = false;
  o.health_interval_ms = 10;
  o.health_failure_threshold = 3;
  o.workers = {a.url(), b.url()};
  // Two failed polls, then a good one held open while the router is asked: a slow moment, not a
  // dead worker, so the router must never have marked it down.
  a.health_failures = 2;
  a.health_hold = true;
  RunningFrontend fe(o);
  httplib::Client cli("127.0.0.1", fe.port);
  auto healthy = [&](int w) {
    auto r = cli.Get("/health");
    REQUIRE(r);
    return Json::parse(r->body)["workers"][w]["healthy"].get<bool>();
  };
  auto wait_polls = [](ScriptedUpstream& u, int n) {
    for (int i = 0; i < 500 && u.health_polls < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(u.health_polls >= n);
  };
  wait_polls(a, 3);
  CHECK(healthy(0));
  a.health_hold = false;
  a.health_failures = 1000000;  // now it stays down: the third failed poll in a row marks it
  wait_polls(a, a.health_polls + 4);
  CHECK_FALSE(healthy(0));
  CHECK(healthy(1));
  a.health_failures = 0;  // one good poll brings it back
  wait_polls(a, a.health_polls + 2);
  CHECK(healthy(0));
}

TEST_CASE("serve: a dead worker is retried elsewhere; all dead gives 503 or 502, never a hang") {
  ScriptedUpstream a;
  // A port that refuses connections: bound (to learn a free number) but never listening.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  int dead_port = ntohs(sa.sin_port);
  FrontendOptions o = base_options(temp_prefix("dead.jsonl"));
  o.trace = false;
  o.health_interval_ms = 60000;  // only the dispatch failure can notice the dead worker
  o.workers = {"http://127.0.0.1:" + std::to_string(dead_port), a.url()};
  RunningFrontend fe(o);
  httplib::Client cli("127.0.0.1", fe.port);
  for (int i = 0; i < 3; ++i) {
    auto r = cli.Post("/v1/chat/completions", kChatStream, "application/json");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("x-dyn-worker") == "1");
  }
  ::close(fd);
}

TEST_CASE("fleet: a health change reaches its listener once; a block size mismatch refuses the worker") {
  dyn::http::EventLoop loop(1, 1);
  Fleet fleet({"http://127.0.0.1:1", "http://127.0.0.1:2"}, loop, {}, /*block_size=*/16, false);
  std::vector<std::pair<size_t, bool>> changes;
  fleet.on_health_change([&](size_t i, bool ok) { changes.emplace_back(i, ok); });
  fleet.set_health(1, false, "test");
  fleet.set_health(1, false, "test again");  // no change: not told twice
  CHECK(changes == std::vector<std::pair<size_t, bool>>{{1, false}});
  CHECK(fleet.first_healthy() == 0u);
  CHECK(fleet.check_block_size(0, 16, "test"));
  CHECK_FALSE(fleet.check_block_size(0, 32, "test"));  // refused: marked down
  CHECK(fleet.at(0).refused);
  CHECK_FALSE(fleet.at(0).healthy);
  CHECK(fleet.at(0).block_size == 32u);
  CHECK_FALSE(fleet.first_healthy());
  CHECK(fleet.check_block_size(0, 16, "test"));  // accepted again; the next good poll marks it up
  CHECK_FALSE(fleet.at(0).refused);
  Fleet lenient({"http://127.0.0.1:1"}, loop, {}, 16, /*allow_block_size_mismatch=*/true);
  CHECK(lenient.check_block_size(0, 32, "test"));
  CHECK(lenient.at(0).healthy);
  CHECK_THROWS_AS(Fleet({"not a url"}, loop, {}, 16, false), dyn::Fatal);
}

TEST_CASE("placer: the router follows the fleet's health; a lease is given back once") {
  dyn::http::EventLoop loop(1, 1);
  FrontendOptions o;
  o.workers = {"http://127.0.0.1:1", "http://127.0.0.1:2"};
  o.router.affinity_ttl_secs = 300;
  Fleet fleet(o.workers, loop, {}, o.router.block_size, false);
  dyn::FakeClock clock;
  Placer placer(o, fleet, clock, [](std::function<void()> f) { f(); });
  fleet.on_health_change([&](size_t i, bool ok) { placer.on_health_change(i, ok); });
  fleet.set_health(0, false, "test");
  for (int k = 0; k < 4; ++k) {
    dyn::route::RouteRequest rr;
    rr.session_id = "s" + std::to_string(k);
    auto placed = placer.place(rr);
    REQUIRE(placed);
    CHECK(placed->worker() == 1u);
    Lease lease;
    lease.placement.emplace(std::move(*placed));
    lease.placement->commit();
    placer.release(lease, TurnEnd{});
    CHECK_FALSE(lease.placement);
  }
  CHECK(placer.router().bindings().size() == 4);
  fleet.set_health(1, false, "test");
  dyn::route::RouteRequest rr;
  CHECK_FALSE(placer.place(rr));  // no healthy worker
  o.binding_store = "redis://127.0.0.1:1";
  o.router.affinity_ttl_secs = 0;
  CHECK_THROWS_AS(Placer(o, fleet, clock, nullptr), dyn::Fatal);  // a shared store needs affinity
}

TEST_CASE("intake: body errors are 400s that quote no body bytes; the origin form of a target") {
  Exchange ex;
  auto err = [&](const std::string& body) {
    auto b = read_body(ex, body, false);
    REQUIRE_FALSE(b);
    CHECK(b.error().exit_code == 400);
    return b.error().message;
  };
  CHECK(err("") == "empty request body (a JSON object is required)");
  CHECK(err("[1]") == "request body must be a JSON object");
  std::string bad = err(R"({"model": "secret-text)");
  CHECK(bad.find("secret") == std::string::npos);
  CHECK(bad.find("near byte") != std::string::npos);
  CHECK(err(std::string(200, '[') + std::string(200, ']')).find("nested deeper") != std::string::npos);
  // A repeated key: read as a Json tree reads it (the last value), not simdjson's first.
  auto b = read_body(ex, R"({"model":"a","model":"b","stream":true,"messages":[]})", false);
  REQUIRE(b);
  CHECK(ex.model == "b");
  CHECK(ex.stream);
  CHECK(b->json);
  Exchange ex2;
  auto fast = read_body(ex2, R"({"model":"c","messages":[{"role":"user","content":"hi"}]})", false);
  REQUIRE(fast);
  CHECK(ex2.model == "c");
  CHECK_FALSE(ex2.stream);
  CHECK(fast->rendered);
  CHECK_FALSE(fast->json);
  // With PromptHashing the prompt is hashed as it is rendered (no text kept): hash_prompt's
  // figures, under the model's seed.
  const std::string chat = R"({"model":"c","messages":[{"role":"user","content":"hi, a prompt of a few blocks"}]})";
  const PromptHashing hp{4, [](std::string_view m) { return dyn::tokens::adapter_seed(m); }};
  Exchange ex3, ex4;
  auto hashed = read_body(ex3, chat, false, &hp);
  auto rendered = read_body(ex4, chat, false);
  REQUIRE(hashed);
  REQUIRE(rendered);
  CHECK(hashed->hashed);
  CHECK_FALSE(hashed->rendered);
  hash_prompt(ex3, *hashed, nullptr, 4, dyn::tokens::adapter_seed("c"));
  hash_prompt(ex4, *rendered, nullptr, 4, dyn::tokens::adapter_seed("c"));
  CHECK(ex3.input_length == ex4.input_length);
  CHECK(ex3.sequence_hashes.size() == 3);  // "user\nhi, ...\n": 35 bytes, 9 tokens
  CHECK(ex3.sequence_hashes == ex4.sequence_hashes);
  CHECK(origin_form("http://h:1/v1/x?q=1") == "/v1/x?q=1");
  CHECK(origin_form("http://h:1?q=1") == "/?q=1");
  CHECK(origin_form("http://h:1") == "/");
  CHECK(origin_form("/v1/models") == "/v1/models");
}

TEST_CASE("intake: the resolved priority is spliced in as the engine's `priority`, in its polarity") {
  // build_upstream then forward_priority on `text`, the bytes the worker gets.
  auto sent = [](const std::string& text, int32_t priority, WorkerPriority polarity) {
    Exchange ex;
    auto b = read_body(ex, text, false);
    REQUIRE(b);
    auto req = std::make_shared<dyn::http::ServerRequest>();
    req->path = "/v1/chat/completions";
    req->body = text;
    Dispatch d;
    build_upstream(ex, *b, req, d);
    forward_priority(*b, priority, polarity, d);
    return d.request.bytes();
  };
  const std::string plain = R"({"model":"m","messages":[]})";
  CHECK(sent(plain, 5, WorkerPriority::kLowerFirst) == R"({"priority":-5,"model":"m","messages":[]})");
  CHECK(sent(plain, 5, WorkerPriority::kHigherFirst) == R"({"priority":5,"model":"m","messages":[]})");
  CHECK(sent(plain, 5, WorkerPriority::kOff) == plain);
  CHECK(sent(plain, 0, WorkerPriority::kLowerFirst) == plain);  // every engine's default
  // i32 both ways: the negation of INT32_MIN is clamped.
  CHECK(sent(plain, INT32_MIN, WorkerPriority::kLowerFirst) == R"({"priority":2147483647,"model":"m","messages":[]})");
  // The client set the engine's field itself: left as it is.
  const std::string own = R"({"model":"m","priority":9,"messages":[]})";
  CHECK(sent(own, 5, WorkerPriority::kLowerFirst) == own);
  // Beside the stream_options the router adds (both spliced in, the body not copied).
  const std::string stream = R"({"model":"m","stream":true,"messages":[]})";
  CHECK(sent(stream, 3, WorkerPriority::kHigherFirst) ==
        R"({"priority":3,"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]})");
  // A body rewritten as a Json tree (its stream_options edited) gets it too.
  const std::string edited = R"({"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[]})";
  CHECK(sent(edited, 3, WorkerPriority::kHigherFirst).rfind(R"({"priority":3,)", 0) == 0);
}
