// Unit tests for lib/dyn/http: SSE parser (cases 01, 03), OpenAI chunk interpretation, the
// keep-alive client against an in-process server with scripted faults, and the worker pool.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <mutex>
#include <thread>
#include <fstream>
#include <sstream>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "dyn/http/client.h"
#include "dyn/http/event_server.h"
#include "dyn/http/pool.h"
#include "dyn/http/prometheus.h"
#include "dyn/http/proxy.h"
#include "dyn/http/server.h"
#include "dyn/http/sse.h"
#include "dyn/http/sse_openai.h"
#include "http_test_server.h"

using namespace dyn::http;
using dyn::testing::chunk;
using dyn::testing::TestServer;

namespace {

std::string slurp(const std::string& rel) {
  std::ifstream f(std::string(DYN_SOURCE_DIR) + "/" + rel, std::ios::binary);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Feeds `reads` (each stamped 10, 20, 30, ...) and interprets the events.
ResponseSummary run_stream(const std::vector<std::string>& reads, std::vector<SseEvent>* all = nullptr,
                           bool* clean = nullptr) {
  SseParser p;
  OpenAiStream s(true);
  std::vector<SseEvent> ev;
  double t = 0;
  for (const auto& r : reads) {
    t += 10;
    p.feed(r, t, ev);
  }
  bool c = p.finish(ev);
  if (clean) *clean = c;
  for (auto& e : ev) s.on_event(e);
  if (all) *all = ev;
  return s.summary();
}

}  // namespace

TEST_CASE("sse: fields, CRLF, CR, comments, data without space, multi-line data") {
  SseParser p;
  std::vector<SseEvent> ev;
  p.feed(": keep-alive\r\ndata:a\r\ndata: b\r\n\r\nevent: x\rid: 7\rdata:  two spaces\r\r", 5, ev);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].data == "a\nb");
  CHECK(ev[0].event.empty());
  CHECK(ev[1].event == "x");
  CHECK(ev[1].id == "7");
  CHECK(ev[1].data == " two spaces");
  CHECK(p.comments() == 1);
  // An event without data is not dispatched; a line without colon is a field with empty value.
  ev.clear();
  p.feed("event: nothing\n\ndata\n\n", 6, ev);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].data.empty());
  CHECK(p.finish(ev));
}

TEST_CASE("sse: stamp is the arrival of the event's first field byte, not of comments") {
  SseParser p;
  std::vector<SseEvent> ev;
  p.feed(": ping\n", 1, ev);
  p.feed("da", 2, ev);
  p.feed("ta: {\"x\":1}\n", 3, ev);
  p.feed("\n", 4, ev);
  p.feed("data: y\n\n", 5, ev);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].first_byte_ms == 2);
  CHECK(ev[1].first_byte_ms == 5);
}

TEST_CASE("sse: CRLF split between reads is one line end") {
  SseParser p;
  std::vector<SseEvent> ev;
  p.feed("data: a\r", 1, ev);
  p.feed("\ndata: b\r", 2, ev);
  p.feed("\n\r", 3, ev);
  p.feed("\n", 4, ev);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].data == "a\nb");
}

TEST_CASE("case 01: events split mid-JSON and mid-UTF-8 across three reads") {
  const std::string dir = "tests/fixtures/cases/01-sse-split-mid-json/";
  std::vector<std::string> reads = {slurp(dir + "read-1.bin"), slurp(dir + "read-2.bin"), slurp(dir + "read-3.bin")};
  CHECK(reads[0].size() == 318);
  CHECK(reads[1].size() == 168);
  CHECK(reads[2].size() == 199);
  std::vector<SseEvent> ev;
  bool clean = false;
  auto s = run_stream(reads, &ev, &clean);
  CHECK(clean);
  REQUIRE(ev.size() == 5);
  CHECK(ev[4].data == "[DONE]");
  CHECK(s.parse_errors == 0);
  CHECK(s.events == 5);
  CHECK(s.done);
  CHECK(s.content ==
        "Gr\xc3\xbc\xc3\x9f"
        "e \xe6\x97\xa5\xe6\x9c\xac");
  CHECK(s.content.find("\xef\xbf\xbd") == std::string::npos);
  CHECK(s.finish_reason == "stop");
  // Stamps: event 2 began in read 1 (t=10) though it completed in read 2; event 3 began in read 2.
  CHECK(ev[1].first_byte_ms == 10);
  CHECK(ev[2].first_byte_ms == 20);
  REQUIRE(s.token_chunk_ms.size() == 2);  // the role-only first chunk is not a token
  CHECK(s.token_chunk_ms[0] == 10);
  // Identical to one read, and to one byte per read.
  auto whole = run_stream({slurp(dir + "full.sse")});
  CHECK(whole.content == s.content);
  CHECK(whole.finish_reason == "stop");
  std::vector<std::string> bytes;
  for (char c : slurp(dir + "full.sse")) bytes.emplace_back(1, c);
  auto bytewise = run_stream(bytes);
  CHECK(bytewise.content == s.content);
  CHECK(bytewise.events == 5);
}

TEST_CASE("case 03: usage chunk with empty choices, usage on last chunk, usage null") {
  const std::string dir = "tests/fixtures/cases/03-sse-usage-empty-choices/";
  auto split = [](const std::string& s) {  // one read per event, so each event has its own stamp
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t e = s.find("\n\n", pos);
      e = e == std::string::npos ? s.size() : e + 2;
      out.push_back(s.substr(pos, e - pos));
      pos = e;
    }
    return out;
  };
  auto a = run_stream(split(slurp(dir + "stream-a.sse")));
  CHECK(a.content == "Hi there!");
  CHECK(a.prompt_tokens == 17u);
  CHECK(a.completion_tokens == 3u);
  CHECK(a.finish_reason == "stop");
  // Events: role(10) Hi(20) there(30) !(40) finish(50) usage(60) DONE(70): the usage chunk is no token.
  REQUIRE(a.token_chunk_ms.size() == 3);
  CHECK(a.token_chunk_ms.back() == 40);
  auto b = run_stream(split(slurp(dir + "stream-b.sse")));
  CHECK(b.content == "Hi there!");
  CHECK(b.prompt_tokens == 17u);
  CHECK(b.completion_tokens == 3u);
  CHECK(b.finish_reason == "stop");
  CHECK(b.token_chunk_ms.size() == 3);
  auto c = run_stream(split(slurp(dir + "stream-c.sse")));
  CHECK(c.content == "Hi there!");
  CHECK_FALSE(c.prompt_tokens.has_value());
  CHECK_FALSE(c.completion_tokens.has_value());
  CHECK(c.text_bytes == 9);  // the SPEC 4.2 estimate: ceil(9 / 4) = 3 tokens
  CHECK(c.token_chunk_ms.size() == 3);
}

TEST_CASE("openai chunks: reasoning, tool calls, completions text, cached tokens, error object") {
  SseParser p;
  OpenAiStream s(true);
  std::vector<SseEvent> ev;
  p.feed(
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"ls\",\"arguments\":\"\"}}]}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n",
      1, ev);
  for (auto& e : ev) s.on_event(e);
  auto& r = s.summary();
  CHECK(r.token_chunk_ms.size() == 3);
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].id == "call_1");
  CHECK(r.tool_calls[0].name == "ls");
  CHECK(r.finish_reason == "tool_calls");
  CHECK(r.cached_tokens == 64u);
  CHECK_FALSE(r.cached_tokens_by_tier.has_value());  // no usage.dyn
  CHECK(r.content.empty());

  // dyn-mocker with KV tiers splits the cached tokens by tier (SPEC 8.7); the client keeps the split
  // for request_end only when all four counts are there.
  OpenAiStream tiered(false);
  tiered.on_event({"",
                   "{\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"prompt_tokens_details\":{\"cached_tokens\":64},"
                   "\"dyn\":{\"cached_tokens_by_tier\":{\"g1\":16,\"g2\":32,\"g3\":0,\"g4\":16}}}}",
                   "", 2});
  REQUIRE(tiered.summary().cached_tokens_by_tier.has_value());
  CHECK(*tiered.summary().cached_tokens_by_tier == std::array<uint64_t, 4>{16, 32, 0, 16});
  OpenAiStream partial(false);
  partial.on_event(
      {"", "{\"choices\":[],\"usage\":{\"dyn\":{\"cached_tokens_by_tier\":{\"g1\":16,\"g2\":-1}}}}", "", 2});
  CHECK_FALSE(partial.summary().cached_tokens_by_tier.has_value());

  OpenAiStream comp(false);
  comp.on_event({"", "{\"choices\":[{\"index\":0,\"text\":\"abc\",\"finish_reason\":null}]}", "", 3});
  CHECK(comp.summary().token_chunk_ms.size() == 1);
  CHECK(comp.summary().text.empty());  // not kept
  CHECK(comp.summary().text_bytes == 3);

  OpenAiStream err(false);
  err.on_event({"", "{\"error\":{\"type\":\"overloaded\",\"message\":\"busy\"}}", "", 1});
  CHECK(err.summary().stream_error);
  CHECK(err.summary().error_type == "overloaded");
}

TEST_CASE("endpoint URL parsing and path joining") {
  auto e = Endpoint::parse("http://127.0.0.1:8123/v1/");
  REQUIRE(e.ok());
  CHECK(e->host == "127.0.0.1");
  CHECK(e->port == 8123);
  CHECK(e->join("/v1/chat/completions") == "/v1/chat/completions");
  auto plain = Endpoint::parse("localhost:9000");
  REQUIRE(plain.ok());
  CHECK(plain->join("/v1/completions") == "/v1/completions");
  CHECK_FALSE(Endpoint::parse("https://x").ok());
  CHECK_FALSE(Endpoint::parse("http://x:99999").ok());
}

namespace {
// Under ThreadSanitizer every thread runs several times slower and the 300-stream pool case runs
// 700 threads on a 2-core machine: its streams then need more than 5 s to reach their headers,
// which is the sanitizer's cost, not the pool's (a 5 s timeout still holds without it).
#if defined(__SANITIZE_THREAD__)
constexpr double kSlowdown = 6;
#else
constexpr double kSlowdown = 1;
#endif

ClientOptions opts_for(const TestServer& s, double read_timeout_s = 5) {
  ClientOptions o;
  o.endpoint = *Endpoint::parse(s.url());
  o.read_timeout_s = read_timeout_s;
  return o;
}
HttpRequest chat_req() {
  HttpRequest r;
  r.path = "/v1/chat/completions";
  r.body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})";
  r.keep_text = true;
  return r;
}
}  // namespace

TEST_CASE("client: streamed SSE with pauses, worker header, keep-alive reuse") {
  TestServer srv;
  std::atomic<int> conns{0};
  std::set<int> ports;
  std::mutex mu;
  srv.server.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lk(mu);
      ports.insert(req.remote_port);
    }
    res.set_header("x-dyn-worker", "1");
    res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
      auto send = [&](const std::string& s) { sink.write(s.data(), s.size()); };
      send(": hello\n\n");
      // 100 ms apart: a client thread kept off the CPU that long on a loaded machine would read
      // both chunks at once (30 ms was not always enough under ctest -j2).
      send(chunk("A"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      send(chunk("B"));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      send(chunk("", "stop"));
      send("data: [DONE]\n\n");
      sink.done();
      return true;
    });
  });
  srv.start();
  Connection c(opts_for(srv));
  for (int i = 0; i < 3; ++i) {
    auto r = c.post(chat_req());
    CHECK_FALSE(r.error.has_value());
    CHECK(r.status == 200);
    CHECK(r.streamed);
    CHECK(r.header("x-dyn-worker") == "1");
    CHECK(r.summary.content == "AB");
    REQUIRE(r.summary.token_chunk_ms.size() == 2);
    double gap = r.summary.token_chunk_ms[1] - r.summary.token_chunk_ms[0];
    INFO("reads=" << r.reads << " enc=" << r.header("content-encoding") << " te=" << r.header("transfer-encoding"));
    CHECK(gap >= 50);
    CHECK(gap < 2000);
    CHECK(r.summary.token_chunk_ms[0] >= r.start_ms);
  }
  CHECK(ports.size() == 1);  // one keep-alive connection for all three requests
}

TEST_CASE("client: 503 then OK, error body message; connection refused") {
  TestServer srv;
  std::atomic<int> n{0};
  srv.server.Post("/v1/chat/completions", [&](const httplib::Request&, httplib::Response& res) {
    if (n++ == 0) {
      res.status = 503;
      res.set_content(R"({"error":{"message":"no capacity","type":"overloaded"}})", "application/json");
      return;
    }
    res.set_content(chunk("ok", "stop") + "data: [DONE]\n\n", "text/event-stream");
  });
  srv.start();
  Connection c(opts_for(srv));
  auto r1 = c.post(chat_req());
  REQUIRE(r1.error.has_value());
  CHECK(r1.error->code == 503);
  CHECK(r1.error->type == "http");
  CHECK(r1.error->message == "no capacity");
  auto r2 = c.post(chat_req());
  CHECK_FALSE(r2.error.has_value());
  CHECK(r2.summary.content == "ok");

  ClientOptions dead;
  dead.endpoint = *Endpoint::parse("http://127.0.0.1:1");
  dead.connect_timeout_s = 1;
  Connection d(dead);
  auto r3 = d.post(chat_req());
  REQUIRE(r3.error.has_value());
  CHECK(r3.error->code == 0);
  CHECK(r3.error->type == "connection");
}

TEST_CASE("client: cancel() from another thread ends a stream in flight as cancelled; later posts send nothing") {
  TestServer srv;
  std::atomic<int> requests{0};
  std::atomic<bool> first_sent{false};
  srv.server.Post("/v1/chat/completions", [&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    res.set_chunked_content_provider("text/event-stream", [&first_sent](size_t, httplib::DataSink& sink) {
      sink.write(chunk("A").data(), chunk("A").size());
      first_sent = true;
      // A slow stream: 10 s unless the client goes away (write fails once it has).
      for (int i = 0; i < 1000 && sink.is_writable(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        sink.write(": keep-alive\n\n", 14);
      }
      sink.done();
      return true;
    });
  });
  srv.start();
  Connection c(opts_for(srv));
  std::thread canceller([&] {
    // Mid-response: after the server wrote its first chunk (a fixed delay from the start lost
    // the race on a loaded machine), plus time for the client to read it.
    for (int i = 0; i < 1000 && !first_sent; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c.cancel();
  });
  auto r = c.post(chat_req());
  canceller.join();
  REQUIRE(r.error.has_value());
  CHECK(r.error->code == 499);
  CHECK(r.error->type == "cancelled");
  CHECK(r.error->message.rfind("cancelled mid-response after ", 0) == 0);
  CHECK(r.status == 200);
  CHECK(r.summary.content == "A");  // what arrived is kept
  CHECK(r.end_ms - r.start_ms < 5000);
  auto again = c.post(chat_req());
  REQUIRE(again.error.has_value());
  CHECK(again.error->type == "cancelled");
  CHECK(again.error->message == "cancelled before it was sent");
  CHECK(requests == 1);
}

TEST_CASE(
    "client: drop mid-stream is stream_cut; missing [DONE] with finish is success; neither is stream_incomplete") {
  TestServer srv;
  srv.server.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    bool drop = req.body.find("drop") != std::string::npos;
    bool nofinish = req.body.find("nofinish") != std::string::npos;
    res.set_chunked_content_provider("text/event-stream", [drop, nofinish](size_t, httplib::DataSink& sink) {
      std::string a = chunk("x");
      sink.write(a.data(), a.size());
      if (drop) {
        std::string half = "data: {\"choices\":[{\"ind";
        sink.write(half.data(), half.size());
        return false;  // abort the connection without the terminating chunk
      }
      if (!nofinish) {
        std::string b = chunk("", "length");
        sink.write(b.data(), b.size());
      }
      sink.done();
      return true;
    });
  });
  srv.start();
  Connection c(opts_for(srv));
  auto req = chat_req();
  req.body = R"({"drop":1})";
  auto r = c.post(req);
  REQUIRE(r.error.has_value());
  CHECK(r.error->type == "stream_cut");
  CHECK(r.error->code == 200);
  CHECK(r.summary.token_chunk_ms.size() == 1);  // what arrived is kept
  req.body = R"({"ok":1})";
  auto ok = c.post(req);  // the connection recovers
  CHECK_FALSE(ok.error.has_value());
  CHECK(ok.summary.finish_reason == "length");
  CHECK_FALSE(ok.summary.done);
  req.body = R"({"nofinish":1})";
  auto nf = c.post(req);
  REQUIRE(nf.error.has_value());
  CHECK(nf.error->type == "stream_incomplete");  // issue 21.2: ended cleanly, but unfinished
  CHECK(nf.error->message == "stream ended without a finish reason or [DONE]");
}

TEST_CASE("client: slow headers time out; non-streaming JSON body") {
  TestServer srv;
  srv.server.Post("/slow", [&](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    res.set_content("{}", "application/json");
  });
  srv.server.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        R"({"choices":[{"index":0,"text":"hello","finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}})",
        "application/json");
  });
  srv.start();
  Connection c(opts_for(srv, 0.2));
  HttpRequest slow = chat_req();
  slow.path = "/slow";
  auto r = c.post(slow);
  REQUIRE(r.error.has_value());
  CHECK(r.error->type == "timeout");
  CHECK(r.error->code == 0);
  HttpRequest comp = chat_req();
  comp.path = "/v1/completions";
  auto ok = c.post(comp);
  CHECK_FALSE(ok.error.has_value());
  CHECK_FALSE(ok.streamed);
  CHECK(ok.summary.content == "hello");
  CHECK(ok.summary.completion_tokens == 2u);
  CHECK(ok.summary.token_chunk_ms.size() == 1);
}

TEST_CASE("pool: 300 concurrent streams, workers reused") {
  raise_fd_limit();
  TestServer srv(400);
  std::atomic<int> in_flight{0}, peak{0};
  srv.server.Post("/v1/chat/completions", [&](const httplib::Request&, httplib::Response& res) {
    int now = ++in_flight;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    // Hold each stream until 250 are in flight together (or 3 s passed): on a loaded machine the
    // pool's 300 connections may start over more than a fixed sleep, which is not what is tested.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(3000 * kSlowdown));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    while (peak.load() < 250 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --in_flight;
    res.set_content(chunk("z", "stop") + "data: [DONE]\n\n", "text/event-stream");
  });
  srv.start();
  std::atomic<int> ok{0}, done{0};
  {
    ConnectionPool pool(opts_for(srv, 5 * kSlowdown), 300);
    for (int i = 0; i < 600; ++i) {
      ConnectionPool::Job job{[&](Transport& c) {
                                auto r = c.post(chat_req());
                                if (!r.error) ++ok;
                                else
                                  MESSAGE(r.error->type << ": " << r.error->message << " after "
                                                        << (r.end_ms - r.start_ms) << " ms, status " << r.status);
                              },
                              [&] { ++done; }};
      while (!pool.submit(job)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    while (done < 600) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(pool.workers() == 300);
  }
  CHECK(ok.load() == 600);
  CHECK(peak.load() >= 250);
}

TEST_CASE("is_loopback_address and header_with_control_bytes") {
  CHECK(is_loopback_address("127.0.0.1"));
  CHECK(is_loopback_address("127.8.9.10"));
  CHECK(is_loopback_address("::1"));
  CHECK(is_loopback_address("::ffff:127.0.0.1"));
  CHECK_FALSE(is_loopback_address("10.0.0.1"));
  CHECK_FALSE(is_loopback_address("::ffff:10.0.0.1"));
  CHECK_FALSE(is_loopback_address("1270.0.0.1"));
  CHECK_FALSE(is_loopback_address(""));
  httplib::Headers h{{"x-a", "fine"}, {"x-b", "also fine"}};
  CHECK(header_with_control_bytes(h).empty());
  h.emplace("x-c", std::string("a\r\nx-injected: 1"));
  CHECK(header_with_control_bytes(h) == "x-c");
  httplib::Headers nul{{"x-d", std::string("a\0b", 3)}};
  CHECK(header_with_control_bytes(nul) == "x-d");
}

TEST_CASE("proxy: a shared body is sent as it lies, with its insert spliced in at its offset") {
  TestServer up;
  up.server.Post("/v1/x", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.get_header_value("Content-Length") + " " + req.body, "text/plain");
  });
  up.start();
  auto url = UpstreamUrl::parse(up.url());
  REQUIRE(url);
  EventLoop loop(1, 2);
  loop.start();
  UpstreamPool pool(*url, loop, UpstreamTimeouts{5, 5});
  auto send = [&](const ProxyRequest& r) {
    auto call = ProxyCall::start(pool, r, nullptr, dyn::RealClock::instance());
    REQUIRE(call->wait_response());
    ServerResponse res;
    call->relay_blocking(res, {}, nullptr);
    return res.body;
  };
  ProxyRequest r;
  r.path = "/v1/x";
  r.body = std::make_shared<const std::string>(R"({"a":1})");
  r.insert = R"("s":true,)";
  r.insert_at = 1;
  CHECK(r.bytes() == R"({"s":true,"a":1})");
  CHECK(send(r) == R"(16 {"s":true,"a":1})");
  r.insert.clear();
  CHECK(send(r) == R"(7 {"a":1})");
  r.body = nullptr;  // no body: an empty one, its length said
  CHECK(send(r) == "0 ");
}

TEST_CASE("proxy: idle connections the upstream closed are dropped, not a failed request; slow headers time out") {
  TestServer up;
  up.server.set_keep_alive_timeout(1);  // the upstream closes a connection idle for 1 s
  std::atomic<int> served{0};
  up.server.Post("/v1/x", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("x-slow")) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    res.set_content("{\"n\":" + std::to_string(++served) + "}", "application/json");
  });
  up.start();
  auto url = UpstreamUrl::parse(up.url());
  REQUIRE(url);
  EventLoop loop(1, 4);
  loop.start();
  UpstreamPool pool(*url, loop, UpstreamTimeouts{1, 1});
  auto& clock = dyn::RealClock::instance();
  auto exchange = [&](const std::shared_ptr<ProxyCall>& call) {
    ServerResponse cres;
    std::optional<ProxyOutcome> end;
    call->relay_blocking(cres, {}, [&](const ProxyOutcome& o) { end = o; });
    REQUIRE(end);
    CHECK(end->kind == ProxyOutcome::Kind::kOk);
    CHECK(cres.status == 200);
    return cres.body;
  };
  ProxyRequest r;
  r.path = "/v1/x";
  r.body = std::make_shared<const std::string>("{}");
  // Two exchanges open at once leave two keep-alive connections in the pool.
  auto a = ProxyCall::start(pool, r, nullptr, clock);
  auto b = ProxyCall::start(pool, r, nullptr, clock);
  REQUIRE(a->wait_response());
  REQUIRE(b->wait_response());
  exchange(a);
  exchange(b);
  // Both go stale; the next call must neither fail nor spend its retry on the second stale one.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto c = ProxyCall::start(pool, r, nullptr, clock);
  REQUIRE(c->wait_response());
  CHECK(exchange(c) == "{\"n\":3}");
  // Headers later than the read timeout: timed out, never resent.
  ProxyRequest slow = r;
  slow.headers.emplace("x-slow", "1");
  auto d = ProxyCall::start(pool, slow, nullptr, clock);
  CHECK_FALSE(d->wait_response());
  CHECK(d->timed_out());
  CHECK(d->error().find("read timeout") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  CHECK(served == 4);
}

TEST_CASE("proxy: a body that stalls longer than the read timeout ends as a cut, with the timeout named") {
  TestServer up;
  up.server.Post("/v1/x", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      sink.write("{\"a\":", 5);
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // longer than the 1 s read timeout
      sink.write("1}", 2);
      sink.done();
      return true;
    });
  });
  up.start();
  auto url = UpstreamUrl::parse(up.url());
  REQUIRE(url);
  EventLoop loop(1, 4);
  loop.start();
  UpstreamPool pool(*url, loop, UpstreamTimeouts{1, 1});
  ProxyRequest r;
  r.path = "/v1/x";
  r.body = std::make_shared<const std::string>("{}");
  auto call = ProxyCall::start(pool, r, nullptr, dyn::RealClock::instance());
  REQUIRE(call->wait_response());
  ServerResponse cres;
  std::optional<ProxyOutcome> end;
  call->relay_blocking(cres, {}, [&](const ProxyOutcome& o) { end = o; });
  REQUIRE(end);
  CHECK(end->kind == ProxyOutcome::Kind::kStreamCut);
  CHECK(end->message.find("read timeout") != std::string::npos);
  CHECK(cres.status == 502);
}

namespace {
/// Sends `request` (may be empty) on the connection `fd`; returns what arrives within `wait_ms`
/// (the connection stays open), or until the peer closes.
std::string exchange_raw(int fd, const std::string& request, int wait_ms) {
  if (!request.empty()) REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    timeval tv{0, 20'000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  return got;
}
/// Connects a new socket to 127.0.0.1:`port`; returns it, or -1 when the connection failed.
int dial_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
  ::close(fd);
  return -1;
}
/// Binds `server` to a free loopback port, starts `loop` and the server; returns the port.
int start_on_free_port(EventLoop& loop, EventServer& server) {
  ListenOptions lo;
  lo.port = 0;
  auto port = server.bind(lo);
  REQUIRE(port);
  loop.start();
  server.start();
  return *port;
}
}  // namespace

TEST_CASE("event server: a 1 MiB body arrives whole with room for a parser's padding, then the next request") {
  EventLoop loop(1, 2);
  EventServer server(loop);
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>('a' + i % 26);
  // Read straight into the body (issue 54), what the header's read brought first: the bytes and
  // their order must not change; simdjson parses in place only with 64 bytes of room after it.
  server.route("POST", "/echo", [&](const ServerRequest& req, ServerResponse& res) {
    const bool same = req.body == big || req.body == "tail";
    const bool room = req.body.capacity() - req.body.size() >= 64;
    res.set_content(std::to_string(req.body.size()) + (same ? " same" : " differs") + (room ? " room" : " tight"),
                    "text/plain");
  });
  const int port = start_on_free_port(loop, server);
  const int fd = dial_local(port);
  REQUIRE(fd >= 0);
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ";
  std::string got =
      exchange_raw(fd, head + std::to_string(big.size()) + "\r\n\r\n" + big + head + "4\r\n\r\ntail", 1500);
  CHECK(got.find("\r\n\r\n1048576 same room") != std::string::npos);
  CHECK(got.find("\r\n\r\n4 same room") != std::string::npos);
  ::close(fd);
  server.close();
  loop.shutdown();
}

TEST_CASE("event server: a body in pieces with pauses arrives whole; a client gone mid-body leaves it serving") {
  EventLoop loop(1, 2);
  EventServer server(loop);
  server.route("POST", "/echo", [&](const ServerRequest& req, ServerResponse& res) {
    res.set_content(
        std::to_string(req.body.size()) + ":" + req.body.substr(0, 3) + req.body.substr(req.body.size() - 3),
        "text/plain");
  });
  const int port = start_on_free_port(loop, server);
  // The head with the body's first bytes, then the rest in two writes: the server reads what its
  // buffer holds, then the socket, straight into the body.
  std::string body(300'000, 'm');
  body.replace(0, 3, "abc");
  body.replace(body.size() - 3, 3, "xyz");
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  int fd = dial_local(port);
  REQUIRE(fd >= 0);
  std::string first = head + body.substr(0, 1000);
  REQUIRE(::send(fd, first.data(), first.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(first.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(::send(fd, body.data() + 1000, 100'000, MSG_NOSIGNAL) == 100'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(exchange_raw(fd, body.substr(101'000), 1000).find("\r\n\r\n300000:abcxyz") != std::string::npos);
  ::close(fd);
  // Half a body, then gone: nothing is answered on it, and the next client is served.
  fd = dial_local(port);
  REQUIRE(fd >= 0);
  std::string half = head + body.substr(0, 150'000);
  REQUIRE(::send(fd, half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
  ::close(fd);
  fd = dial_local(port);
  REQUIRE(fd >= 0);
  CHECK(exchange_raw(fd, head + body, 1000).find("\r\n\r\n300000:abcxyz") != std::string::npos);
  // A chunked body (no length to read straight into) goes through the parser, appended chunk by chunk.
  CHECK(exchange_raw(
            fd,
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\nmxyz\r\n0\r\n\r\n",
            1000)
            .find("\r\n\r\n7:abcxyz") != std::string::npos);
  ::close(fd);
  server.close();
  loop.shutdown();
}

TEST_CASE("event server: a stream's head goes with its first chunk, or alone when the producer has none yet") {
  EventLoop loop(1, 2);
  EventServer server(loop);
  // /now writes its chunk in the turn the stream starts; /later writes nothing for 400 ms.
  auto producer = [&loop](int delay_ms) {
    return [&loop, delay_ms](std::shared_ptr<const ServerRequest>, std::shared_ptr<ServerResponse> res,
                             std::function<void()> done) {
      res->headers.emplace("Content-Type", "text/event-stream");
      res->stream = [&loop, delay_ms](std::shared_ptr<BodyStream> out) {
        auto send = [out] {
          out->write("data: 1\n\n", [out](bool ok) {
            if (ok) out->end();
          });
        };
        if (delay_ms == 0) return send();
        auto t = std::make_shared<boost::asio::steady_timer>(loop.context(), std::chrono::milliseconds(delay_ms));
        t->async_wait([t, send](boost::system::error_code) { send(); });
      };
      done();
    };
  };
  server.route_async("POST", "/now", producer(0));
  server.route_async("POST", "/later", producer(400));
  server.route_async("GET", "/now", producer(0));
  const int port = start_on_free_port(loop, server);
  const std::string head_end = "\r\n\r\n";
  const int fd = dial_local(port);
  REQUIRE(fd >= 0);
  std::string got = exchange_raw(fd, "POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 300);
  CHECK(got.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(got.find("Transfer-Encoding: chunked") != std::string::npos);
  CHECK(got.substr(got.find(head_end) + 4) == "9\r\ndata: 1\n\n\r\n0\r\n\r\n");
  // Keep-alive: the next request on the same connection waits 400 ms for its chunk, and its head
  // arrives before that.
  got = exchange_raw(fd, "POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 200);
  CHECK(got.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(got.substr(got.find(head_end) + 4).empty());
  got = exchange_raw(fd, "", 500);
  CHECK(got == "9\r\ndata: 1\n\n\r\n0\r\n\r\n");
  // HEAD: the head alone, and the connection serves the next request.
  got = exchange_raw(fd, "HEAD /now HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  CHECK(got.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(got.size() == got.find(head_end) + 4);
  got = exchange_raw(fd, "POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 300);
  CHECK(got.substr(got.find(head_end) + 4) == "9\r\ndata: 1\n\n\r\n0\r\n\r\n");
  ::close(fd);
  server.close();
  loop.shutdown();
}

TEST_CASE(
    "event server: a hang-up while the handler has not answered is told at once; a pipelined request is not one") {
  EventLoop loop(1, 2);
  EventServer server(loop);
  // /hold answers only when its client goes, or when the test releases it (issue 51.4: nothing is
  // written meanwhile, so only the watch can see the hang-up).
  std::mutex mu;
  std::vector<std::function<void()>> held;
  std::promise<std::chrono::steady_clock::time_point> gone_at;
  std::atomic<int> gone{0};
  server.route_async(
      "POST", "/hold",
      [&](std::shared_ptr<const ServerRequest> req, std::shared_ptr<ServerResponse> res, std::function<void()> done) {
        res->set_content("held", "text/plain");
        REQUIRE(req->client);
        req->client->on_gone([&, done] {
          if (gone++ == 0) gone_at.set_value(std::chrono::steady_clock::now());
          done();
        });
        std::lock_guard<std::mutex> lk(mu);
        held.push_back(done);
      });
  const int port = start_on_free_port(loop, server);
  const std::string hold = "POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";

  // Pipelined: the second request's bytes arrive while the first is held; it is no hang-up.
  int fd = dial_local(port);
  REQUIRE(fd >= 0);
  std::string got = exchange_raw(fd, hold + hold, 300);
  CHECK(got.empty());
  CHECK(gone == 0);
  auto release = [&] {
    std::function<void()> d;
    for (int i = 0; i < 200 && !d; ++i) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (!held.empty()) {
          d = held.front();
          held.erase(held.begin());
        }
      }
      if (!d) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE(d);
    d();
  };
  release();
  release();  // the pipelined one, read once the first was answered
  got = exchange_raw(fd, "", 300);
  CHECK(got.find("held") != std::string::npos);
  CHECK(got.find("held", got.find("held") + 1) != std::string::npos);
  CHECK(gone == 0);

  // The client closes while its request is held: the handler hears of it without any write.
  got = exchange_raw(fd, hold, 100);
  CHECK(got.empty());
  const auto closed = std::chrono::steady_clock::now();
  ::close(fd);
  auto f = gone_at.get_future();
  REQUIRE(f.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(f.get() - closed < std::chrono::seconds(2));  // the old server: never, until a write
  CHECK(gone == 1);
  server.close();
  loop.shutdown();
}

TEST_CASE(
    "event server: try_write sends from the loop's own turn; off the loop or behind a pending write it leaves the chunk") {
  using TW = BodyStream::TryWrite;
  EventLoop loop(1, 2);
  EventServer server(loop);
  std::promise<std::shared_ptr<BodyStream>> stream_p;
  server.route_async(
      "POST", "/s",
      [&](std::shared_ptr<const ServerRequest>, std::shared_ptr<ServerResponse> res, std::function<void()> done) {
        res->headers.emplace("Content-Type", "text/event-stream");
        res->stream = [&](std::shared_ptr<BodyStream> out) { stream_p.set_value(out); };
        done();
      });
  const int port = start_on_free_port(loop, server);
  // Runs fn on the loop thread and returns what it returned.
  auto on_loop = [&](auto fn) {
    std::promise<decltype(fn())> p;
    boost::asio::post(loop.context(), [&] { p.set_value(fn()); });
    return p.get_future().get();
  };
  const int fd = dial_local(port);
  REQUIRE(fd >= 0);
  const std::string req = "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  auto out = stream_p.get_future().get();
  std::string one = "data: 1\n\n";
  CHECK(out->try_write(one) == TW::kNotNow);  // this thread is not the connection's
  CHECK(one == "data: 1\n\n");
  CHECK(on_loop([&] { return out->try_write(one); }) == TW::kTaken);
  // A chunk larger than the socket takes while the client reads nothing: taken, its rest
  // pending; the next chunk is left to write(), which waits for it.
  std::string big(16 << 20, 'x');
  CHECK(on_loop([&] { return out->try_write(big); }) == TW::kTaken);
  std::string two = "data: 2\n\n";
  CHECK(on_loop([&] { return out->try_write(two); }) == TW::kNotNow);
  CHECK(two == "data: 2\n\n");
  on_loop([&] {
    out->write(two, [out](bool ok) {
      if (ok) out->end();
    });
    return 0;
  });
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until &&
         (got.size() < 5 || got.compare(got.size() - 5, 5, "0\r\n\r\n") != 0))
    got += exchange_raw(fd, "", 50);
  const size_t body = got.find("\r\n\r\n") + 4;
  REQUIRE(body >= 4);
  CHECK(got.substr(body, 14) == "9\r\ndata: 1\n\n\r\n");
  CHECK(got.substr(body + 14, 9) == "1000000\r\n");  // 16 MiB in hex
  CHECK(got.find_first_not_of('x', body + 23) == body + 23 + (16u << 20));
  CHECK(got.substr(body + 23 + (16u << 20)) == "\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n");
  // The client gone: a write fails and try_write says so.
  stream_p = {};
  const int fd2 = dial_local(port);
  REQUIRE(fd2 >= 0);
  REQUIRE(::send(fd2, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  auto out2 = stream_p.get_future().get();
  ::close(fd2);
  TW last = TW::kTaken;
  for (int i = 0; i < 100 && last != TW::kClosed; ++i) {
    std::string c = "data: 3\n\n";
    last = on_loop([&] { return out2->try_write(c); });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(last == TW::kClosed);
  ::close(fd);
  server.close();
  loop.shutdown();
}

TEST_CASE("event server: close() while clients keep connecting returns (no self-deadlock on accept)") {
  // A connection accepted after close() set `closing` used to lock the session table twice on the
  // acceptor's loop thread, and close() waited forever for that thread (SIGTERM hung under load).
  for (int round = 0; round < 20; ++round) {
    EventLoop loop(1, 2);
    EventServer server(loop);
    const int port = start_on_free_port(loop, server);
    std::atomic<bool> stop{false};
    std::thread dialer([&] {
      while (!stop)
        if (const int fd = dial_local(port); fd >= 0) ::close(fd);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto closed = std::async(std::launch::async, [&] { server.close(); });
    const bool returned = closed.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    stop = true;
    dialer.join();
    if (!returned) {
      // The hung close() would also block the future's and the loop's destructors: fail now.
      std::fprintf(stderr, "event server close() did not return within 10 s (round %d)\n", round);
      std::abort();
    }
    loop.shutdown();
  }
}

TEST_CASE("SignalWatcher: a signal reaches on_signal once; stop() ends a waiting watcher without one") {
  std::atomic<int> got{0};
  {
    SignalWatcher w([&](int s) { got = s; });
    ::kill(::getpid(), SIGTERM);  // blocked in every thread but taken by the watcher
    for (int i = 0; i < 500 && got.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(got.load() == SIGTERM);
    CHECK(w.received() == SIGTERM);
  }
  // The watcher sleeps in sigwaitinfo with no timeout: stop() (the destructor) must wake it, and
  // the wake-up it sends is not a signal for on_signal; a second watcher still gets real ones.
  std::atomic<int> calls{0};
  {
    SignalWatcher idle([&](int) { ++calls; }, /*exit_on_second=*/true);
  }
  CHECK(calls.load() == 0);
  SignalWatcher again([&](int s) { got = -s; });
  ::kill(::getpid(), SIGINT);
  for (int i = 0; i < 500 && got.load() != -SIGINT; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(got.load() == -SIGINT);
}

TEST_CASE("prom_label_u64: vLLM's cache_config_info labels, the sample line only, bad values refused") {
  // As vLLM 0.10 writes it (labels sorted, unset fields "None").
  const std::string vllm =
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
      "# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",cpu_offload_gb=\"0.0\","
      "enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\",num_cpu_blocks=\"None\","
      "num_gpu_blocks=\"2340\",num_gpu_blocks_override=\"None\",sliding_window=\"None\"} 1.0\n"
      "vllm:num_requests_running{model_name=\"m\"} 0.0\n";
  CHECK(prom_label_u64(vllm, "vllm:cache_config_info", "num_gpu_blocks") == 2340u);
  CHECK(prom_label_u64(vllm, "vllm:cache_config_info", "block_size") == 16u);
  CHECK_FALSE(prom_label_u64(vllm, "vllm:cache_config_info", "num_cpu_blocks"));  // "None"
  CHECK_FALSE(prom_label_u64(vllm, "vllm:cache_config_info", "gpu_memory_utilization"));
  CHECK_FALSE(prom_label_u64(vllm, "vllm:cache_config_info", "no_such_label"));
  CHECK_FALSE(prom_label_u64(vllm, "vllm:cache_config", "block_size"));  // a prefix is not the metric
  CHECK_FALSE(prom_label_u64("", "vllm:cache_config_info", "num_gpu_blocks"));
  // An escaped quote in an earlier value does not end it; a name only inside a value is no label.
  CHECK(prom_label_u64("m{a=\"x\\\"num_gpu_blocks=\\\"9\",num_gpu_blocks=\"7\"} 1\n", "m", "num_gpu_blocks") == 7u);
  CHECK_FALSE(prom_label_u64("m{n=\"12345678901234567890\"} 1\n", "m", "n"));  // 20 digits
  CHECK_FALSE(prom_label_u64("m{n=\"-3\"} 1\n", "m", "n"));
  CHECK_FALSE(prom_label_u64("m{n=\"3} 1\n", "m", "n"));  // unterminated
}
