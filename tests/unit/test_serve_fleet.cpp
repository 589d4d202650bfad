// Unit tests of a changing fleet (issue 53) and of worker identity (issue 51.2): canonical worker
// URLs, the fleet's ids and circuit breakers, membership through the Placer (drain, remove), and
// the continuation of a migrated stream.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/json.h"
#include "dyn/http/url.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/migration.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/response_tap.h"

using dyn::Json;
using namespace dyn::serve;

namespace {
std::string canon(const char* url) {
  auto c = dyn::http::canonical_worker_url(url);
  return c ? *c : "error: " + c.error().message;
}
}  // namespace

TEST_CASE("worker URLs: every spelling of one worker has one canonical form (issue 51.2)") {
  for (const char* s : {"http://h:8000", "http://h:8000/", "HTTP://H:8000", "http://H:8000/v1", "http://h:08000//",
                        "Http://h:8000/v1/"})
    CHECK(canon(s) == "http://h:8000");
  CHECK(canon("http://h:80") == "http://h");  // the scheme's default port is left out
  CHECK(canon("http://h") == "http://h");
  CHECK(canon("https://h:443/") == "https://h");
  CHECK(canon("https://h:80") == "https://h:80");
  CHECK(canon("http://[::1]:9000/") == "http://[::1]:9000");
  CHECK(canon("http://h:8000/Prefix/v1") == "http://h:8000/Prefix");  // the path keeps its case
  auto u = dyn::http::UpstreamUrl::parse("HTTP://Example.COM:0080/x/");
  REQUIRE(u);
  CHECK((u->host == "example.com" && u->port == "80" && u->path_prefix == "/x"));
  CHECK(u->canonical == "http://example.com/x");
  CHECK(dyn::http::UpstreamUrl::parse(u->canonical)->canonical == u->canonical);  // a fixed point
  for (const char* bad : {"h:8000", "ftp://h:1", "http://:8000", "http://h:0", "http://h:65536", "http://h:8x",
                          "http://u:p@h:1", "http://h:1/?q", "http://h:1/#f", "http://h 1:2", "http://[::1"}) {
    auto e = dyn::http::UpstreamUrl::parse(bad);
    CHECK_MESSAGE(!e, bad);
    if (!e) CHECK(e.error().exit_code == dyn::kExitUsage);
  }
}

TEST_CASE("fleet: one worker under two spellings is one worker; ids are kept across removal") {
  dyn::http::EventLoop loop(1, 1);
  CHECK_THROWS_AS(Fleet({"http://127.0.0.1:1", "HTTP://127.0.0.1:1/"}, loop, {}, 16, false), dyn::Fatal);
  Fleet fleet({"http://127.0.0.1:1/v1"}, loop, {}, 16, false);
  CHECK(fleet.at(0).url == "http://127.0.0.1:1");
  CHECK(fleet.find("http://127.0.0.1:1/") == 0u);
  CHECK_FALSE(fleet.find("http://127.0.0.1:2"));
  auto a = fleet.add("http://127.0.0.1:2", WorkerSource::kApi);
  REQUIRE(a);
  CHECK((a->id == 1 && a->created));
  fleet.set_state(1, WorkerState::kRemoved);
  CHECK_FALSE(fleet.at(1).present());
  auto back = fleet.add("http://127.0.0.1:2/", WorkerSource::kFile);  // another spelling: the same id
  REQUIRE(back);
  CHECK((back->id == 1 && !back->created && back->was == WorkerState::kRemoved));
  CHECK(fleet.at(1).present());
  CHECK(fleet.size() == 2);
  CHECK_FALSE(fleet.add("not a url", WorkerSource::kApi));
}

TEST_CASE("circuit breaker: opens after consecutive failures, half-opens after the timeout, closes on successes") {
  CircuitOptions o;  // SGLang's defaults: 5 failures, 2 successes, 30 s open, 60 s window
  CircuitBreaker b;
  for (int i = 0; i < 4; ++i) CHECK_FALSE(b.record(false, 1000.0 * i, o));
  CHECK(b.state() == CircuitBreaker::State::kClosed);
  CHECK(b.record(true, 4000, o) == false);  // a success resets the count
  for (int i = 0; i < 4; ++i) b.record(false, 5000.0 + i, o);
  CHECK(b.state() == CircuitBreaker::State::kClosed);
  CHECK(b.record(false, 5010, o));  // the fifth in a row
  CHECK(b.state() == CircuitBreaker::State::kOpen);
  CHECK(b.opens() == 1);
  CHECK_FALSE(b.tick(5010 + 29'999, o));
  CHECK(b.tick(5010 + 30'000, o));
  CHECK(b.state() == CircuitBreaker::State::kHalfOpen);
  CHECK_FALSE(b.record(true, 40'000, o));
  CHECK(b.record(true, 40'001, o));  // the second success closes it
  CHECK(b.state() == CircuitBreaker::State::kClosed);
  // Failures further apart than the window do not add up.
  CircuitBreaker w;
  for (int i = 0; i < 10; ++i) w.record(false, 61'000.0 * i, o);
  CHECK(w.state() == CircuitBreaker::State::kClosed);
  // One failure while half-open opens it again.
  for (int i = 0; i < 5; ++i) w.record(false, 700'000.0 + i, o);
  REQUIRE(w.state() == CircuitBreaker::State::kOpen);
  w.tick(800'000, o);
  CHECK(w.record(false, 800'001, o));
  CHECK(w.state() == CircuitBreaker::State::kOpen);
}

TEST_CASE("fleet: an open circuit takes the worker out of routing until it half-opens") {
  dyn::http::EventLoop loop(1, 1);
  dyn::FakeClock clock;
  CircuitOptions o;
  o.failure_threshold = 2;
  o.timeout_s = 1;
  Fleet fleet({"http://127.0.0.1:1", "http://127.0.0.1:2"}, loop, {}, 16, false, o, clock);
  std::vector<std::pair<size_t, bool>> changes;
  fleet.on_health_change([&](size_t i, bool ok) { changes.emplace_back(i, ok); });
  int opened = 0;  // the health poller's wake-up
  fleet.on_circuit_open([&] { ++opened; });
  CHECK_FALSE(fleet.tick());  // nothing open: the poller may sleep a whole round
  fleet.record_outcome(0, false);
  CHECK(opened == 0);
  fleet.record_outcome(0, false);
  CHECK(opened == 1);
  CHECK_FALSE(fleet.at(0).routable);
  CHECK(fleet.at(0).healthy);  // health and circuit are apart; routability is both
  CHECK(fleet.first_healthy() == 1u);
  clock.advance(999);
  CHECK(fleet.tick());  // still open: tick again soon
  CHECK_FALSE(fleet.at(0).routable);
  clock.advance(1);
  CHECK_FALSE(fleet.tick());
  CHECK(fleet.at(0).routable);
  CHECK(fleet.at(0).breaker.state() == CircuitBreaker::State::kHalfOpen);
  CHECK(changes == std::vector<std::pair<size_t, bool>>{{0, false}, {0, true}});
}

TEST_CASE("placer: a drained worker's session moves at its next turn; a removed worker's binding is dropped") {
  dyn::http::EventLoop loop(1, 1);
  FrontendOptions o;
  o.workers = {"http://127.0.0.1:1", "http://127.0.0.1:2"};
  o.router.affinity_ttl_secs = 300;
  o.router.affinity_mode = dyn::route::AffinityMode::kHard;
  Fleet fleet(o.workers, loop, {}, o.router.block_size, false);
  dyn::FakeClock clock;
  Placer placer(o, fleet, clock, [](std::function<void()> f) { f(); });
  auto turn = [&](const std::string& session) {
    dyn::route::RouteRequest rr;
    rr.session_id = session;
    auto placed = placer.place(rr);
    REQUIRE(placed);
    auto r = std::make_tuple(placed->worker(), std::string(dyn::route::binding_name(placed->binding())),
                             std::string(dyn::route::rebind_reason_name(placed->rebind_reason())));
    Lease lease;
    lease.placement.emplace(std::move(*placed));
    lease.placement->commit();
    placer.release(lease, TurnEnd{});
    return r;
  };
  auto [w, b, why] = turn("s");
  CHECK(b == "new");
  fleet.set_state(w, WorkerState::kDraining);
  placer.drain_worker(w);
  auto [w2, b2, why2] = turn("s");
  CHECK(w2 != w);
  CHECK(b2 == "rebound");
  CHECK(why2 == "drained");
  CHECK(std::get<1>(turn("fresh")) == "new");
  CHECK(std::get<0>(turn("fresh")) == w2);  // nothing new lands on the draining worker
  // Remove the worker the session is now on: its binding is dropped and reported, never followed,
  // even when the worker comes back before the session's next turn.
  fleet.set_state(w2, WorkerState::kRemoved);
  CHECK(placer.remove_worker(w2) == 2);  // "s" and "fresh"
  auto back = fleet.add(fleet.at(w2).url, WorkerSource::kApi);
  REQUIRE(back);
  placer.add_worker(w2);
  fleet.add(fleet.at(w).url, WorkerSource::kApi);
  placer.add_worker(w);
  auto [w3, b3, why3] = turn("s");
  CHECK(b3 == "rebound");
  CHECK(why3 == "removed");
  CHECK(std::get<1>(turn("s")) == "hit");
  CHECK(w3 < 2);
}

TEST_CASE("migration: the continuation request carries the text sent and lowers the output limit") {
  StreamLog log;
  log.text = "Hello wor";
  log.tokens = 3;
  auto chat = continuation_body(dyn::api::Api::kChat,
                                R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]})", log);
  REQUIRE(chat);
  Json c = Json::parse(*chat);
  CHECK(c["max_tokens"] == 7);
  CHECK(c["messages"].size() == 2);
  CHECK(c["messages"][1] == Json{{"role", "assistant"}, {"content", "Hello wor"}});
  CHECK(c["continue_final_message"] == true);
  CHECK(c["add_generation_prompt"] == false);
  // Anthropic: a client prefill is extended, not repeated.
  auto msg = continuation_body(
      dyn::api::Api::kMessages,
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"A: "}]})",
      log);
  REQUIRE(msg);
  Json m = Json::parse(*msg);
  CHECK(m["messages"].size() == 2);
  CHECK(m["messages"][1]["content"] == "A: Hello wor");
  CHECK(m["max_tokens"] == 2);
  CHECK_FALSE(m.contains("continue_final_message"));
  log.tokens = 10;
  CHECK_FALSE(continuation_body(dyn::api::Api::kChat, R"({"max_tokens":10,"messages":[{"role":"user"}]})", log));
  CHECK(migrates(dyn::api::Api::kChat));
  CHECK(migrates(dyn::api::Api::kMessages));
  CHECK_FALSE(migrates(dyn::api::Api::kCompletions));
}

TEST_CASE("migration: a continuation's events join the client's stream without a second role or start") {
  StreamLog log;
  log.tokens = 2;
  log.text = "abcdefgh";
  log.id = "chatcmpl-first";
  log.model = "m";
  log.created = 7;
  auto client = std::make_shared<ResponseTap>(dyn::api::Api::kChat, /*hide_usage=*/false);
  ContinuationTap tap(dyn::api::Api::kChat, client, log, nullptr);
  std::string out;
  tap.on_data(R"(data: {"id":"x","created":9,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]})"
              "\n\n"
              R"(data: {"id":"x","created":9,"model":"m","choices":[{"index":0,"delta":{"content":"ijkl"}}]})"
              "\n\ndata: {\"id\":\"x\",",
              1, out);
  tap.on_data(
      R"("choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}})"
      "\n\ndata: [DONE]\n\n",
      2, out);
  tap.on_end(3, out);
  CHECK(out.find("\"role\"") == std::string::npos);
  CHECK(out.find(R"("content":"ijkl")") != std::string::npos);
  CHECK(out.find("chatcmpl-first") != std::string::npos);
  CHECK(out.find("\"x\"") == std::string::npos);
  CHECK(out.find(R"("completion_tokens":3)") != std::string::npos);  // 2 sent + 1 continued
  CHECK(out.find(R"("prompt_tokens":10)") != std::string::npos);
  CHECK(out.find("data: [DONE]") != std::string::npos);
}
