// Tests of --tokenizer-url as routing uses it (issue 51.3): what the engine's /tokenize is asked,
// and a tokenizer that fails, is slow, answers the wrong shape or cannot take chat messages.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/json.h"
#include "dyn/http/tokenize.h"
#include "dyn/serve/tokenizer.h"
#include "http_test_server.h"

using dyn::Json;
using dyn::api::Api;
using dyn::serve::EngineTokenizer;
using dyn::testing::TestServer;

namespace {

/// A stand-in engine tokenizer: answers POST /tokenize as `mode` says and keeps what it was asked.
struct Tokenizer {
  TestServer srv;
  std::mutex mu;
  std::vector<Json> asked;
  std::string mode = "ok";  // ok | shape | slow | refuse-chat | error
  Tokenizer() {
    srv.server.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) {
      std::string m;
      {
        std::lock_guard<std::mutex> lk(mu);
        asked.push_back(Json::parse(q.body));
        m = mode;
      }
      if (m == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(400));
      if (m == "error") r.status = 500;
      if (m == "refuse-chat" && asked.back().contains("messages")) {
        r.status = 422;  // FastAPI's answer to a body without its required `prompt` (SGLang)
        return r.set_content(R"({"detail":[{"loc":["body","prompt"],"msg":"Field required"}]})", "application/json");
      }
      r.set_content(m == "shape" ? R"({"ids": [1, 2, 3]})" : R"({"count": 3, "tokens": [7, 8, 9]})",
                    "application/json");
    });
    srv.start();
  }
  size_t calls() {
    std::lock_guard<std::mutex> lk(mu);
    return asked.size();
  }
  void set(const std::string& m) {
    std::lock_guard<std::mutex> lk(mu);
    mode = m;
  }
};

const Json kChat = Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
  "tools": [{"type": "function", "function": {"name": "f"}}], "chat_template_kwargs": {"enable_thinking": false},
  "reasoning_effort": "low", "max_tokens": 5})");

}  // namespace

TEST_CASE("tokenize_request: the chat template's inputs, and why a body has no precise form") {
  auto chat = dyn::http::tokenize_request(Api::kChat, kChat, "m");
  REQUIRE(chat);
  CHECK(
      chat->dump() ==
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],)"
      R"("add_generation_prompt":true,"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"low"}})");
  auto msgs = dyn::http::tokenize_request(
      Api::kMessages, Json::parse(R"({"system": "s", "messages": [{"role": "user", "content": "q"}]})"), "");
  REQUIRE(msgs);
  CHECK((*msgs)["messages"].dump() == R"([{"role":"system","content":"s"},{"role":"user","content":"q"}])");
  auto batch = dyn::http::tokenize_request(Api::kCompletions, Json::parse(R"({"prompt": [1, 2]})"), "");
  REQUIRE_FALSE(batch);
  CHECK(batch.error().message.find("not one string") != std::string::npos);
}

TEST_CASE("EngineTokenizer: the engine's ids, else approximate routing, never a failed request") {
  Tokenizer tok;
  dyn::FakeClock clock(1000);
  std::atomic<uint64_t> errors{0};
  EngineTokenizer et(tok.srv.url(), clock, errors, {/*timeout_s=*/0.15, /*backoff_s=*/5});

  auto ids = et.ids(Api::kChat, kChat, "m");
  REQUIRE(ids);
  CHECK(*ids == std::vector<uint32_t>{7, 8, 9});
  CHECK(tok.asked.back().contains("tools"));
  CHECK(tok.asked.back()["chat_template_kwargs"]["enable_thinking"] == false);

  // The wrong shape: approximate, counted, and no call during the back-off.
  tok.set("shape");
  CHECK_FALSE(et.ids(Api::kChat, kChat, "m"));
  CHECK(errors == 1);
  const size_t asked = tok.calls();
  tok.set("ok");
  CHECK_FALSE(et.ids(Api::kChat, kChat, "m"));
  CHECK(tok.calls() == asked);
  clock.advance(5000);
  CHECK(et.ids(Api::kChat, kChat, "m"));

  // Slower than the timeout: the request waits for the timeout, not for the tokenizer.
  tok.set("slow");
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(et.ids(Api::kChat, kChat, "m"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(350));
  CHECK(errors == 2);
  clock.advance(5000);
  tok.set("error");
  CHECK_FALSE(et.ids(Api::kChat, kChat, "m"));
  CHECK(errors == 3);

  // A body without a precise form is not sent at all.
  clock.advance(5000);
  tok.set("ok");
  const size_t before = tok.calls();
  CHECK_FALSE(et.ids(Api::kCompletions, Json::parse(R"({"prompt": [[1], [2]]})"), "m"));
  CHECK(tok.calls() == before);
  CHECK(errors == 3);

  // Down: nothing listens.
  std::atomic<uint64_t> down_errors{0};
  EngineTokenizer down("http://127.0.0.1:1", clock, down_errors, {0.15, 5});
  CHECK_FALSE(down.ids(Api::kChat, kChat, "m"));
  CHECK(down_errors == 1);
}

TEST_CASE("EngineTokenizer: a tokenizer that cannot take chat messages is asked prompts only") {
  Tokenizer tok;
  tok.set("refuse-chat");
  dyn::FakeClock clock(0);
  std::atomic<uint64_t> errors{0};
  EngineTokenizer et(tok.srv.url(), clock, errors, {0.5, 5});
  CHECK_FALSE(et.ids(Api::kChat, kChat, "m"));
  clock.advance(60000);
  const size_t asked = tok.calls();
  CHECK_FALSE(et.ids(Api::kMessages, Json::parse(R"({"messages": [{"role": "user", "content": "q"}]})"), "m"));
  CHECK(tok.calls() == asked);  // not asked again
  auto ids = et.ids(Api::kCompletions, Json::parse(R"({"prompt": "once upon"})"), "m");
  REQUIRE(ids);
  CHECK(tok.asked.back()["prompt"] == "once upon");
}
