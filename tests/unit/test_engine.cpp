// Unit tests for lib/dyn/engine: SPEC 8 timing, the KV pool, the scheduler, mock wire shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "dyn/engine/engine.h"
#include "dyn/engine/mock_api.h"

using namespace dyn::engine;
using dyn::Json;

namespace {

Reply text_reply(const char* text) {
  Reply r;
  r.text = text;
  return r;
}

RequestSpec req(uint64_t id, uint64_t prompt, uint64_t out, uint64_t first_hash = 1000, uint32_t bs = 64) {
  RequestSpec r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.max_output_tokens = out;
  for (uint64_t i = 0; i < prompt / bs; ++i) r.block_hashes.push_back(first_hash + i);
  return r;
}

// Runs the engine on a virtual clock until `id` finishes; returns {ttft, end, cached}.
struct Timing {
  double ttft = -1, end = -1;
  uint64_t cached = 0, tokens = 0;
};

std::vector<Timing> run_all(Engine& e, size_t n_ids) {
  std::vector<Timing> t(n_ids + 1);
  double now = 0;
  StepResult r;
  while (e.has_work()) {
    e.step(r);
    now += r.duration_ms;
    for (auto& o : r.outputs) {
      if (o.generated == 1) t[o.id].ttft = now;
      t[o.id].tokens = o.generated;
      t[o.id].cached = o.cached_tokens;
      if (o.finished) t[o.id].end = now;
    }
  }
  return t;
}

// Requests of 4 blocks (block size 16) through a 10-block pool one after another (each runs to
// its end before the next is added): the cached prompt tokens of the last. With three before it,
// the third needs room, and eviction `ev` decides whose blocks it takes.
uint64_t hit_after_pressure(KvEviction ev, bool low_priority_values_first, std::vector<RequestSpec> reqs) {
  EngineConfig cfg;
  cfg.num_blocks = 10;
  cfg.block_size = 16;
  cfg.kv_eviction = ev;
  cfg.low_priority_values_first = low_priority_values_first;
  Engine e(cfg);
  std::vector<Timing> t;
  for (RequestSpec& r : reqs) {
    const uint64_t id = r.id;
    REQUIRE(e.add(std::move(r)));
    t = run_all(e, id);
  }
  return t.back().cached;
}

}  // namespace

TEST_CASE("SPEC 8 timing polynomials") {
  CHECK(prefill_time_ms(0) == 0.0);
  CHECK(prefill_time_ms(1000) == doctest::Approx(4.209989e-07 * 1e6 + 15.18344 + 16.50142));
  CHECK(decode_time_ms(0) == doctest::Approx(5.74));
  CHECK(decode_time_ms(0.5) == doctest::Approx(-25.74 * 0.25 + 54.01 * 0.5 + 5.74));
  CHECK(decode_time_ms(-10) == 1.0);  // clamped at 1 ms
}

TEST_CASE("KV pool: refcounts, reuse after release, LRU eviction leaf before prefix") {
  KvPool p(4, true);
  REQUIRE(p.make_room(3));
  p.insert(1, std::nullopt);
  p.insert(2, 1);
  p.insert(3, 2);
  CHECK(p.used() == 3);
  CHECK(p.active() == 3);
  // Release last block first, as Engine does: 3 then 2 then 1 enter the LRU in that order.
  p.release(3);
  p.release(2);
  p.release(1);
  CHECK(p.active() == 0);
  CHECK(p.inactive() == 3);
  CHECK(p.match_prefix(std::vector<uint64_t>{1, 2, 3, 4}) == 3);
  // Need 3 new blocks with 1 free: evicts the two oldest inactive, which are the leaves 3, 2.
  REQUIRE(p.make_room(3));
  CHECK(p.contains(1));
  CHECK_FALSE(p.contains(2));
  CHECK_FALSE(p.contains(3));
  CHECK(p.evictions() == 2);
  auto ev = p.take_events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind == KvEvent::Kind::kStored);
  CHECK(ev[0].block_hashes == std::vector<uint64_t>{1, 2, 3});
  CHECK(ev[1].kind == KvEvent::Kind::kRemoved);
  CHECK(ev[1].block_hashes == std::vector<uint64_t>{3, 2});
  // An acquired block is no longer evictable.
  CHECK(p.acquire(1));
  CHECK(p.available() == 3);
  CHECK_FALSE(p.make_room(4));
}

TEST_CASE("KV pool: full and churning, every lookup and eviction agrees with a plain LRU model") {
  // The table is sized once for the capacity and evictions load their victims' cells ahead
  // (issue 54): thousands of requests' chains through a full pool must still find exactly the
  // blocks a list-and-set model keeps, evict its victims in its order, and hand the evict hook
  // each victim's parent.
  constexpr uint64_t kCap = 300;
  KvPool p(kCap);
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> evicted;
  p.set_evict_hook([&](uint64_t h, std::optional<uint64_t> parent) { evicted.emplace_back(h, parent); });
  std::vector<uint64_t> lru;  // the model: inactive blocks, oldest first
  std::vector<uint64_t> present;
  uint64_t seed = 7;
  auto draw = [&](uint64_t n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (seed >> 33) % n;
  };
  size_t model_evictions = 0;
  for (int req = 0; req < 4000; ++req) {
    const uint64_t chain = draw(400), len = 1 + draw(12);
    std::vector<uint32_t> slots;
    for (uint64_t j = 0; j < len; ++j) {
      const uint64_t h = chain * 1000 + j;
      if (p.contains(h)) {
        REQUIRE(std::find(present.begin(), present.end(), h) != present.end());
        lru.erase(std::find(lru.begin(), lru.end(), h));  // only this request holds blocks
        const uint32_t s = p.slot_of(h);
        p.acquire_slot(s);
        slots.push_back(s);
        continue;
      }
      REQUIRE(std::find(present.begin(), present.end(), h) == present.end());
      if (p.free() == 0) {
        const size_t before = evicted.size();
        REQUIRE(p.make_room(1));
        REQUIRE(evicted.size() == before + 1);
        REQUIRE(evicted.back().first == lru.front());  // the model's oldest
        const uint64_t v = lru.front();
        CHECK(evicted.back().second == (v % 1000 ? std::optional<uint64_t>(v - 1) : std::nullopt));
        lru.erase(lru.begin());
        present.erase(std::find(present.begin(), present.end(), v));
        ++model_evictions;
      }
      slots.push_back(p.insert(h, j ? std::optional<uint64_t>(h - 1) : std::nullopt));
      present.push_back(h);
    }
    for (size_t j = slots.size(); j-- > 0;) {
      p.release_slot(slots[j]);
      lru.push_back(chain * 1000 + j);
    }
  }
  CHECK(model_evictions > 10000);
  CHECK(p.evictions() == model_evictions);
  CHECK(p.used() == present.size());
  CHECK(p.used() == kCap);
  for (uint64_t chain = 0; chain < 400; ++chain)
    for (uint64_t j = 0; j < 12; ++j) {
      const uint64_t h = chain * 1000 + j;
      CHECK(p.contains(h) == (std::find(present.begin(), present.end(), h) != present.end()));
    }
}

TEST_CASE("KV pool: first-out blocks are evicted before the LRU; owners until shared") {
  KvPool p(4, false, /*track_owners=*/true);
  REQUIRE(p.make_room(4));
  const uint32_t a = p.insert(1, std::nullopt), b = p.insert(2, std::nullopt);
  const uint32_t c = p.insert(3, std::nullopt), d = p.insert(4, std::nullopt);
  p.claim(a, 7);
  p.claim(b, 7);
  p.claim(c, 8);
  p.claim(d, 9);
  CHECK(p.owner(a) == 7);
  // Another session holding block 4 too makes it shared.
  p.acquire_slot(d);
  p.claim(d, 7);
  CHECK(p.owner(d) == 0);
  p.release_slot(d);
  // Released in the order a, c, d, b; only b goes to the first-out list.
  p.release_slot(a);
  p.release_slot(c);
  p.release_slot(d);
  p.release_slot(b, true, /*first_out=*/true);
  REQUIRE(p.make_room(1));
  CHECK_FALSE(p.contains(2));  // first out, although released last
  CHECK(p.contains(1));
  REQUIRE(p.make_room(2));
  CHECK_FALSE(p.contains(1));  // then the LRU: a is the oldest
  CHECK(p.contains(3));
  // A first-out block that is acquired again leaves that list.
  const uint32_t e = p.insert(5, std::nullopt);
  p.release_slot(e, true, true);
  p.acquire_slot(e);
  p.release_slot(e);
  REQUIRE(p.make_room(3));
  CHECK(p.contains(5));  // newest in the LRU now, not first out
  CHECK_FALSE(p.contains(3));
}

TEST_CASE("KV pool by rank: lowest rank first, LRU among equals, a shared block keeps the highest") {
  KvPool p(6, false, false, /*by_rank=*/true);
  REQUIRE(p.make_room(6));
  // Blocks 1..5 inserted by requests of ranks 5, 1, 5, 1, 3; block 2 is held by a rank-9
  // request too (shared: it keeps 9, also after that holder lets go first).
  const int64_t rank[] = {5, 1, 5, 1, 3};
  uint32_t s[5];
  for (int i = 0; i < 5; ++i) {
    s[i] = p.insert(static_cast<uint64_t>(i + 1), std::nullopt);
    p.claim(s[i], 0, rank[i]);
  }
  p.acquire_slot(s[1]);
  p.claim(s[1], 0, 9);
  p.claim(s[1], 0, 2);  // a lower holder does not lower it
  CHECK(p.rank(s[1]) == 9);
  p.release_slot(s[1]);
  // Released in the order 4, 1, 3, 5, 2: recency alone would evict 4 first, then 1.
  for (int i : {3, 0, 2, 4, 1}) p.release_slot(s[i]);
  CHECK(p.inactive() == 5);
  std::vector<uint64_t> gone;
  for (int n = 2; n <= 6; ++n) {
    REQUIRE(p.make_room(static_cast<uint64_t>(n)));
    for (uint64_t h = 1; h <= 5; ++h)
      if (!p.contains(h) && std::find(gone.begin(), gone.end(), h) == gone.end()) gone.push_back(h);
  }
  // Rank 1: block 4 (block 2 was rank 1 too, but its rank-9 holder raised it); rank 3: block 5;
  // rank 5: blocks 1 then 3 (LRU among equals); rank 9: block 2, although released last.
  CHECK(gone == std::vector<uint64_t>{4, 5, 1, 3, 2});
  // Reacquiring an inactive block takes it off its rank's list; a first-out block still goes first.
  const uint32_t a = p.insert(10, std::nullopt), b = p.insert(11, std::nullopt);
  p.claim(a, 0, 0);
  p.claim(b, 0, 7);
  p.release_slot(a);
  p.acquire_slot(a);
  p.release_slot(a);
  p.release_slot(b, true, /*first_out=*/true);
  REQUIRE(p.make_room(5));
  CHECK_FALSE(p.contains(11));
  CHECK(p.contains(10));
}

TEST_CASE("engine --kv-eviction priority: the background request's blocks go first, in either polarity") {
  // An important request (lead) runs first, a background one after: LRU would evict the lead's
  // blocks (the older) when a third prompt needs room; priority eviction takes the background's.
  auto run = [](KvEviction ev, bool low_first) {
    const int64_t lead = low_first ? -5 : 5, background = low_first ? 5 : -5;
    RequestSpec a = req(1, 64, 1, 100, 16), b = req(2, 64, 1, 200, 16), c = req(3, 64, 1, 300, 16);
    RequestSpec again = req(4, 64, 1, 100, 16);
    a.priority = again.priority = lead;
    b.priority = c.priority = background;
    return hit_after_pressure(ev, low_first, {a, b, c, again});
  };
  CHECK(run(KvEviction::kLru, true) < 64);
  CHECK(run(KvEviction::kPriority, true) == 64);   // vLLM's polarity: lower values matter more
  CHECK(run(KvEviction::kPriority, false) == 64);  // SGLang's: higher values matter more
  CHECK(run(KvEviction::kSession, true) < 64);
}

TEST_CASE("engine --kv-eviction session: a finished session's blocks go first, not a live one's") {
  // Two sessions of 4 blocks each in a 10-block pool, A (live) before B (its last turn); a third
  // prompt needs room for 4 more blocks. LRU evicts A's blocks (the oldest); session eviction
  // takes B's, so A's next turn still hits.
  auto run = [](KvEviction ev) {
    RequestSpec a = req(1, 64, 1, 100, 16), b = req(2, 64, 1, 200, 16), c = req(3, 64, 1, 300, 16);
    RequestSpec again = req(4, 64, 1, 100, 16);
    a.session = again.session = 11;
    b.session = 22;
    b.session_final = true;
    c.session = 33;
    return hit_after_pressure(ev, true, {a, b, c, again});
  };
  CHECK(run(KvEviction::kLru) < 64);
  CHECK(run(KvEviction::kSession) == 64);
}

TEST_CASE("engine: TTFT is the prefill time, then one token per decode step") {
  Engine e(EngineConfig{});
  REQUIRE(e.add(req(1, 1000, 4)));
  auto t = run_all(e, 1);
  CHECK(t[1].ttft == doctest::Approx(prefill_time_ms(1000)));
  // Three decode steps after the first token. u = active blocks / 16384.
  double u = 16.0 / 16384.0;  // 1003 tokens -> 16 blocks
  CHECK(t[1].end == doctest::Approx(prefill_time_ms(1000) + 3 * decode_time_ms(u)).epsilon(0.01));
  CHECK(t[1].tokens == 4);
  CHECK(t[1].cached == 0);
  CHECK(e.pool().active() == 0);
  CHECK(e.pool().inactive() == 15);  // 15 full prompt blocks stay cached
}

TEST_CASE("engine: a repeated prompt hits the prefix cache, fully cached costs no prefill") {
  Engine e(EngineConfig{});
  REQUIRE(e.add(req(1, 1000, 2)));
  run_all(e, 1);
  REQUIRE(e.add(req(2, 1000, 2)));
  auto t = run_all(e, 2);
  CHECK(t[2].cached == 960);
  CHECK(t[2].ttft == doctest::Approx(prefill_time_ms(40)));
  REQUIRE(e.add(req(3, 960, 1)));  // exactly 15 cached blocks
  t = run_all(e, 3);
  CHECK(t[3].cached == 960);
  CHECK(t[3].ttft == doctest::Approx(decode_time_ms(15.0 / 16384)).epsilon(0.01));
  auto st = e.stats();
  CHECK(st.cached_tokens == 1920);
  CHECK(st.prompt_tokens == 2960);
}

TEST_CASE("engine: chunked prefill splits a long prompt across steps within the budget") {
  EngineConfig c;
  c.max_num_batched_tokens = 4096;
  Engine e(c);
  REQUIRE(e.add(req(1, 10000, 1)));
  StepResult r;
  e.step(r);
  CHECK(r.prefill_tokens == 4096);
  CHECK(r.outputs.empty());
  e.step(r);
  CHECK(r.prefill_tokens == 4096);
  e.step(r);
  CHECK(r.prefill_tokens == 10000 - 8192);
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].finished);
  c.enable_chunked_prefill = false;
  Engine whole(c);
  REQUIRE(whole.add(req(1, 10000, 1)));
  whole.step(r);
  CHECK(r.prefill_tokens == 10000);  // alone in its step, an oversize prompt runs whole
}

TEST_CASE("engine: long_prefill_token_threshold bounds a long prefill's chunk, a short prompt behind it runs whole") {
  EngineConfig c;  // budget 8192: without the threshold the 3,000-token prompt runs in one step
  c.long_prefill_token_threshold = 512;
  Engine e(c);
  REQUIRE(e.add(req(1, 3000, 2)));
  StepResult r;
  e.step(r);
  CHECK(r.prefill_tokens == 512);
  CHECK(r.duration_ms == doctest::Approx(prefill_time_ms(512)));  // the step a later arrival waits for
  CHECK(r.outputs.empty());
  REQUIRE(e.add(req(2, 300, 2, 5000)));  // not longer than the threshold: whole, beside the chunk
  e.step(r);
  CHECK(r.prefill_tokens == 512 + 300);
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].id == 2);
  CHECK(r.outputs[0].generated == 1);
  std::vector<uint64_t> chunks;
  for (bool first_token = false; !first_token;) {
    e.step(r);
    chunks.push_back(r.prefill_tokens);
    for (const auto& o : r.outputs) first_token |= o.id == 1;
  }
  CHECK(chunks == std::vector<uint64_t>{512, 512, 512, 3000 - 5 * 512});  // 440: the rest, whole

  // A prefix hit counts: only the uncached rest is chunked. The budget still caps a chunk.
  Engine again(c);
  REQUIRE(again.add(req(1, 2048, 1)));
  run_all(again, 1);
  REQUIRE(again.add(req(2, 2048 + 600, 1)));  // hashes 1000.. again: 2,048 cached, 600 left
  again.step(r);
  CHECK(r.prefill_tokens == 512);
  again.step(r);
  CHECK(r.prefill_tokens == 88);
  c.max_num_batched_tokens = 256;
  Engine small(c);
  REQUIRE(small.add(req(1, 3000, 1)));
  small.step(r);
  CHECK(r.prefill_tokens == 256);

  c.long_prefill_token_threshold = 0;  // off (vLLM's default): the whole prompt in one step
  c.max_num_batched_tokens = 8192;
  Engine off(c);
  REQUIRE(off.add(req(1, 3000, 1)));
  off.step(r);
  CHECK(r.prefill_tokens == 3000);
  c.long_prefill_token_threshold = 512;
  c.enable_chunked_prefill = false;
  CHECK(c.validate().find("needs chunked prefill") != std::string::npos);
}

TEST_CASE("engine: max_num_seqs caps the running set; the rest wait in FIFO order") {
  EngineConfig c;
  c.max_num_seqs = 2;
  Engine e(c);
  for (uint64_t i = 1; i <= 3; ++i) REQUIRE(e.add(req(i, 100, 3, i * 100)));
  StepResult r;
  e.step(r);
  CHECK(e.stats().running == 2);
  CHECK(e.stats().waiting == 1);
  auto t = run_all(e, 3);
  CHECK(t[3].ttft > t[1].end - 1e-9);
}

TEST_CASE("engine: memory pressure preempts the newest sequence (LIFO) and it recomputes") {
  EngineConfig c;
  c.num_blocks = 10;
  c.block_size = 16;
  Engine e(c);
  // Each needs 3 blocks of prompt and grows to 6 blocks: both cannot finish side by side.
  REQUIRE(e.add(req(1, 48, 48, 100, 16)));
  REQUIRE(e.add(req(2, 48, 48, 200, 16)));
  auto t = run_all(e, 2);
  CHECK(t[1].tokens == 48);
  CHECK(t[2].tokens == 48);
  CHECK(e.stats().preemptions >= 1);
  CHECK(t[1].end < t[2].end);  // the older sequence was never the victim
  CHECK(e.pool().active() == 0);
}

TEST_CASE("engine: rejects what can never fit, and cancel frees blocks") {
  EngineConfig c;
  c.num_blocks = 4;
  Engine e(c);
  auto r = e.add(req(1, 300, 1));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("needs 5 KV blocks") != std::string::npos);
  REQUIRE(e.add(req(2, 128, 10)));
  StepResult s;
  e.step(s);
  CHECK(e.pool().active() == 2);  // 128 prompt tokens; the first token has no KV yet
  CHECK(e.cancel(2));
  CHECK(e.pool().active() == 0);
  CHECK_FALSE(e.has_work());
  CHECK_FALSE(e.cancel(2));
}

TEST_CASE("engine: speedup ratio divides step time") {
  EngineConfig c;
  c.speedup_ratio = 10;
  Engine e(c);
  REQUIRE(e.add(req(1, 1000, 1)));
  StepResult r;
  e.step(r);
  CHECK(r.duration_ms == doctest::Approx(prefill_time_ms(1000) / 10));
}

TEST_CASE("mock api: parse limits, tokens and hashes; errors for bad bodies") {
  Json body = {{"model", "m"},
               {"messages", {{{"role", "user"}, {"content", std::string(1000, 'a')}}}},
               {"max_tokens", 7},
               {"max_completion_tokens", 5},
               {"stream", true}};
  auto r = parse_mock_request(Api::kChat, body, 64, 100);
  REQUIRE(r);
  CHECK(r->max_tokens == 5);
  CHECK(r->prompt_tokens == (5 + 1000 + 1 + 3) / 4);
  CHECK(r->block_hashes.size() == r->prompt_tokens / 64);
  CHECK(r->stream);
  CHECK(r->last_user_text == std::string(1000, 'a'));
  CHECK_FALSE(parse_mock_request(Api::kChat, Json::array(), 64, 1));
  CHECK_FALSE(parse_mock_request(Api::kChat, Json{{"messages", Json::array()}}, 64, 1));
  CHECK_FALSE(parse_mock_request(Api::kCompletions, Json{{"prompt", "x"}, {"max_tokens", -1}}, 64, 1));
  CHECK_FALSE(
      parse_mock_request(Api::kCompletions, Json{{"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}, 64, 1));
}

TEST_CASE("mock api: scripted replies by order and by match; plan lengths") {
  std::string path = "test_engine_replies.jsonl";
  {
    std::ofstream f(path);
    f << R"({"match": "SUB", "text": "sub done"})"
      << "\n"
      << R"({"tool_call": {"name": "task", "arguments": {"prompt": "SUB: go"}}})"
      << "\n"
      << R"({"text": "all done"})"
      << "\n";
  }
  auto s = ReplyScript::load(path);
  std::remove(path.c_str());
  REQUIRE(s);
  auto a = s->choose("hello");
  REQUIRE(a);
  CHECK(a->tool_call);
  CHECK(a->name == "task");
  CHECK(a->arguments == R"({"prompt":"SUB: go"})");
  auto b = s->choose("SUB: go");
  CHECK(b->text == "sub done");
  CHECK(s->choose("x")->text == "all done");
  CHECK(s->choose("y")->text == "all done");  // the last unmatched reply repeats
  MockRequest q;
  q.max_tokens = 100;
  auto p = plan_reply(q, text_reply("hello world!"));
  CHECK(p.tokens() == 3);
  CHECK(p.finish_reason == "stop");
  q.min_tokens = 5;
  CHECK(plan_reply(q, text_reply("hello world!")).tokens() == 5);
  q.ignore_eos = true;
  CHECK(plan_reply(q, text_reply("hi")).tokens() == 100);
  CHECK(plan_reply(q, text_reply("hi")).finish_reason == "length");  // ignore_eos runs to the cap
  q = MockRequest{};
  q.max_tokens = 2;
  auto cut = plan_reply(q, text_reply("hello world!"));
  CHECK(cut.tokens() == 2);
  CHECK(cut.finish_reason == "length");
  CHECK(plan_reply(q, std::nullopt).tokens() == 2);
  // UTF-8 is never split inside a character.
  q.max_tokens = 100;
  auto u = plan_reply(q, text_reply("Grüße 日本"));
  std::string joined;
  for (auto& piece : u.pieces) joined += piece;
  CHECK(joined == "Grüße 日本");
  CHECK_FALSE(ReplyScript::parse_row(Json{{"tool_call", {{"arguments", Json::object()}}}}));
}

TEST_CASE("mock api: chat stream ends with finish, a usage chunk with empty choices, then [DONE]") {
  MockRequest q;
  q.api = Api::kChat;
  q.model = "m";
  q.include_usage = true;
  q.prompt_tokens = 100;
  q.max_tokens = 2;
  ReplyPlan p = plan_reply(q, std::nullopt);
  ResponseWriter w(q, p, 1, 0);
  std::string s = w.stream_start() + w.stream_tokens(0, 2) + w.stream_end(64);
  CHECK(s.find(R"("delta":{"role":"assistant","content":""})") != std::string::npos);
  // The unscripted filler runs to max_tokens: the limit cut it (vLLM says "length").
  CHECK(s.find(R"("finish_reason":"length")") != std::string::npos);
  CHECK(
      s.find(
          R"("choices":[],"usage":{"prompt_tokens":100,"completion_tokens":2,"total_tokens":102,"prompt_tokens_details":{"cached_tokens":64}})") !=
      std::string::npos);
  CHECK(s.size() > 14);
  CHECK(s.substr(s.size() - 14) == "data: [DONE]\n\n");
  q.api = Api::kMessages;
  ResponseWriter a(q, p, 1, 0);
  std::string m = a.stream_start() + a.stream_tokens(0, 2) + a.stream_end(64);
  CHECK(m.find("event: message_start") == 0);
  CHECK(m.find(R"("cache_read_input_tokens":64)") != std::string::npos);
  CHECK(m.find("event: message_stop") != std::string::npos);
  Json full = a.full_body(64);
  CHECK(full["stop_reason"] == "max_tokens");
  CHECK(full["usage"]["input_tokens"] == 36);
}

namespace {

Reply tool_reply(const char* name, const char* args) {
  Reply r;
  r.tool_call = true;
  r.name = name;
  r.arguments = args;
  return r;
}

MockRequest api_request(Api api, uint64_t max_tokens) {
  MockRequest q;
  q.api = api;
  q.model = "m";
  q.stream = true;
  q.prompt_tokens = 5000;
  q.max_tokens = max_tokens;
  return q;
}

}  // namespace

// Issue 18: dyn-mocker sent the tool call's name in the response head, before prefill, so a
// client timed the tool turn's first token at 1-10 ms whatever the prompt. The head holds no
// content now; the item opens with the first token, on every API.
TEST_CASE("mock api: a streamed tool call's name comes with its first token, not before prefill") {
  for (Api api : {Api::kChat, Api::kMessages, Api::kResponses}) {
    CAPTURE(static_cast<int>(api));
    MockRequest q = api_request(api, 100);
    ReplyPlan p = plan_reply(q, tool_reply("read_file", R"({"path":"a.txt"})"));
    REQUIRE(p.tool_call);
    ResponseWriter w(q, p, 7, 0);
    const std::string head = w.stream_start();
    CHECK(head.find("read_file") == std::string::npos);
    CHECK(head.find("tool_calls") == std::string::npos);
    CHECK(head.find("tool_use") == std::string::npos);
    CHECK(head.find("function_call") == std::string::npos);
    const std::string first = w.stream_tokens(0, 1);
    CHECK(first.find("read_file") != std::string::npos);
    // The header precedes the first argument piece, and is not sent twice.
    CHECK(first.find("read_file") < first.find(R"({"pa)"));
    const std::string rest = w.stream_tokens(1, p.tokens()) + w.stream_end(0);
    CHECK(rest.find("content_block_start") == std::string::npos);
    CHECK(rest.find("output_item.added") == std::string::npos);
    CHECK(rest.find(R"("name":"read_file","arguments":"")") == std::string::npos);
  }
  // Text replies open their item with the first token too (Anthropic content_block_start,
  // Responses output_item.added), so every first token is timed the same way.
  for (Api api : {Api::kMessages, Api::kResponses}) {
    MockRequest q = api_request(api, 3);
    ReplyPlan p = plan_reply(q, std::nullopt);
    ResponseWriter w(q, p, 7, 0);
    const std::string head = w.stream_start();
    CHECK(head.find("content_block_start") == std::string::npos);
    CHECK(head.find("output_item.added") == std::string::npos);
    const std::string first = w.stream_tokens(0, 1);
    CHECK((first.rfind("event: content_block_start", 0) == 0 ||
           first.rfind("event: response.output_item.added", 0) == 0));
  }
}

// Issue 18: finish reasons follow the engines when max_tokens cuts the reply: OpenAI "length",
// Anthropic "max_tokens", Responses status "incomplete" with incomplete_details.reason
// "max_output_tokens" (and a response.incomplete event when streamed); otherwise stop /
// end_turn / completed, tool_calls / tool_use.
TEST_CASE("mock api: finish reasons under a max_tokens cut, streamed and not, on every API") {
  struct Case {
    const char* what;
    std::optional<Reply> reply;
    uint64_t max_tokens;
    const char* chat;
    const char* anthropic;
    bool incomplete;
  };
  const std::vector<Case> cases = {
      {"text that ends on its own", text_reply("hello world!"), 100, "stop", "end_turn", false},
      {"text cut by max_tokens", text_reply("hello world!"), 2, "length", "max_tokens", true},
      {"unscripted filler runs to max_tokens", std::nullopt, 4, "length", "max_tokens", true},
      {"tool call that ends on its own", tool_reply("ls", R"({"dir":"."})"), 100, "tool_calls", "tool_use", false},
      {"tool call cut by max_tokens", tool_reply("ls", R"({"dir":"some/long/path"})"), 2, "length", "max_tokens", true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    for (Api api : {Api::kChat, Api::kCompletions, Api::kMessages, Api::kResponses}) {
      if (api == Api::kCompletions && c.reply && c.reply->tool_call) continue;
      CAPTURE(static_cast<int>(api));
      MockRequest q = api_request(api, c.max_tokens);
      q.include_usage = true;
      ReplyPlan p = plan_reply(q, c.reply);
      CHECK(p.finish_reason == c.chat);
      ResponseWriter w(q, p, 3, 0);
      const std::string stream = w.stream_start() + w.stream_tokens(0, p.tokens()) + w.stream_end(0);
      const Json body = w.full_body(0);
      switch (api) {
        case Api::kChat:
        case Api::kCompletions:
          CHECK(body["choices"][0]["finish_reason"] == c.chat);
          CHECK(stream.find(std::string(R"("finish_reason":")") + c.chat + "\"") != std::string::npos);
          break;
        case Api::kMessages:
          CHECK(body["stop_reason"] == c.anthropic);
          CHECK(stream.find(std::string(R"("stop_reason":")") + c.anthropic + "\"") != std::string::npos);
          break;
        case Api::kResponses:
          CHECK(body["status"] == (c.incomplete ? "incomplete" : "completed"));
          CHECK(body["output"][0]["status"] == (c.incomplete ? "incomplete" : "completed"));
          if (c.incomplete) {
            CHECK(body["incomplete_details"] == Json{{"reason", "max_output_tokens"}});
            CHECK(stream.find("event: response.incomplete\n") != std::string::npos);
            CHECK(stream.find("response.completed") == std::string::npos);
          } else {
            CHECK_FALSE(body.contains("incomplete_details"));
            CHECK(stream.find("event: response.completed\n") != std::string::npos);
          }
          break;
      }
    }
  }
}

TEST_CASE("mock api: conversation facts for --replies conditions (chat, messages, responses)") {
  // OpenCode over Chat Completions: root first turn offers `task`; after the tool result the
  // request ends with a role "tool" message answering the assistant's tool_calls[].id.
  Json tools =
      Json::array({Json{{"type", "function"}, {"function", {{"name", "task"}, {"parameters", Json::object()}}}}});
  Json first = {
      {"messages", {{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "spawn please"}}}},
      {"tools", tools}};
  auto a = parse_mock_request(Api::kChat, first, 64, 10);
  REQUIRE(a);
  CHECK(a->first_turn);
  CHECK(a->after_tool.empty());
  CHECK(a->tool_names == std::vector<std::string>{"task"});
  Json after = first;
  after["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "task"}, {"arguments", "{}"}}}}}}});
  after["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "subagent said DONE"}});
  auto b = parse_mock_request(Api::kChat, after, 64, 10);
  REQUIRE(b);
  CHECK_FALSE(b->first_turn);
  CHECK(b->after_tool == "task");
  CHECK(b->last_tool_output == "subagent said DONE");
  CHECK(b->last_user_text == "subagent said DONE");  // the last tool output counts for "match"

  // Anthropic: tool_result blocks in the final user message answer a tool_use id.
  Json msgs = {
      {"messages",
       {{{"role", "user"}, {"content", "go"}},
        {{"role", "assistant"},
         {"content", {{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Agent"}, {"input", Json::object()}}}}},
        {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "ok"}}}}}}},
      {"tools", {{{"name", "Agent"}, {"input_schema", Json::object()}}}}};
  auto c = parse_mock_request(Api::kMessages, msgs, 64, 10);
  REQUIRE(c);
  CHECK_FALSE(c->first_turn);
  CHECK(c->after_tool == "Agent");
  CHECK(c->tool_names == std::vector<std::string>{"Agent"});

  // Codex over Responses: namespace tools are flattened; a final function_call_output answers
  // a function_call's call_id.
  Json ns = Json::array({Json{{"type", "namespace"},
                              {"name", "multi_agent_v1"},
                              {"tools", {{{"name", "spawn_agent"}}, {{"name", "wait_agent"}}}}},
                         Json{{"type", "function"}, {"name", "shell"}}});
  Json resp = {
      {"input",
       {{{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "spawn"}}}}},
        {{"type", "function_call"},
         {"name", "spawn_agent"},
         {"namespace", "multi_agent_v1"},
         {"call_id", "c9"},
         {"arguments", "{}"}},
        {{"type", "function_call_output"}, {"call_id", "c9"}, {"output", R"({"agent_id":"a-42","nickname":"P"})"}}}},
      {"tools", ns}};
  auto d = parse_mock_request(Api::kResponses, resp, 64, 10);
  REQUIRE(d);
  CHECK(d->tool_names == std::vector<std::string>{"multi_agent_v1", "spawn_agent", "wait_agent", "shell"});
  CHECK_FALSE(d->first_turn);
  CHECK(d->after_tool == "spawn_agent");
  // An unanswered call id or a final user message is not "after a tool".
  resp["input"].back()["call_id"] = "other";
  CHECK(parse_mock_request(Api::kResponses, resp, 64, 10)->after_tool.empty());
}

TEST_CASE("mock api: --replies conditions script a subagent flow; ${result.PATH} fills arguments") {
  std::string path = "test_engine_replies_cond.jsonl";
  {
    std::ofstream f(path);
    f << R"({"offered": "spawn_agent", "first_turn": true, "tool_call": {"name": "spawn_agent", "arguments": {"message": "SUB: hi"}}})"
      << "\n"
      << R"({"after_tool": "spawn_agent", "tool_call": {"name": "wait_agent", "arguments": {"targets": ["${result.agent_id}"], "timeout_ms": 60000, "x": "${result.missing}"}}})"
      << "\n"
      << R"({"text": "DONE"})"
      << "\n";
  }
  auto s = ReplyScript::load(path);
  std::remove(path.c_str());
  REQUIRE(s);
  MockRequest title;  // no tools: a side request such as title generation
  CHECK(s->choose(title)->text == "DONE");
  MockRequest root;
  root.tool_names = {"multi_agent_v1", "spawn_agent", "wait_agent"};
  MockRequest later = root;
  later.first_turn = false;
  CHECK(s->choose(later)->text == "DONE");  // first_turn: true does not hold
  auto spawn = s->choose(root);
  REQUIRE(spawn);
  CHECK(spawn->name == "spawn_agent");
  CHECK_FALSE(s->choose(root)->tool_call);  // a conditioned row is used once
  MockRequest child;                        // the subagent is not offered the spawn tool
  CHECK(s->choose(child)->text == "DONE");
  later.after_tool = "spawn_agent";
  later.last_tool_output = R"({"agent_id":"a-42"})";
  auto wait = s->choose(later);
  REQUIRE(wait);
  CHECK(wait->name == "wait_agent");
  CHECK(wait->arguments == R"({"targets":["a-42"],"timeout_ms":60000,"x":"${result.missing}"})");
  CHECK(s->choose(later)->text == "DONE");
  CHECK_FALSE(ReplyScript::parse_row(Json{{"first_turn", "yes"}, {"text", "x"}}));
  CHECK_FALSE(ReplyScript::parse_row(Json{{"offered", ""}, {"text", "x"}}));
  CHECK_FALSE(ReplyScript::parse_row(Json{{"after_tool", 3}, {"text", "x"}}));
}

TEST_CASE("engine priority scheduling: vLLM's polarity, SGLang's, and arrival order among equals") {
  // One sequence at a time, so the admission order is the order of first tokens.
  auto order = [](SchedulingPolicy policy, bool low_first) {
    EngineConfig c;
    c.max_num_seqs = 1;
    c.scheduling_policy = policy;
    c.low_priority_values_first = low_first;
    Engine e(c);
    const int64_t prio[] = {3, 1, 3, 2};
    for (uint64_t id = 1; id <= 4; ++id) {
      RequestSpec r = req(id, 128, 2, 1000 * id);
      r.priority = prio[id - 1];
      REQUIRE(e.add(std::move(r)));
    }
    std::vector<Timing> t = run_all(e, 4);
    std::vector<uint64_t> ids{1, 2, 3, 4};
    std::stable_sort(ids.begin(), ids.end(), [&](uint64_t a, uint64_t b) { return t[a].ttft < t[b].ttft; });
    return ids;
  };
  CHECK(order(SchedulingPolicy::kFcfs, true) == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(order(SchedulingPolicy::kPriority, true) == std::vector<uint64_t>{2, 4, 1, 3});   // vLLM
  CHECK(order(SchedulingPolicy::kPriority, false) == std::vector<uint64_t>{1, 3, 4, 2});  // SGLang
}

// ---- KV tiers (SPEC 8.7, issue 48) ----

TEST_CASE("tier link: two transfers sharing a link take twice as long as one (processor sharing)") {
  Link one(1.0);  // 1 GB/s = 1e6 bytes per ms
  one.start(0, 1e6);
  CHECK(one.next_finish_ms() == doctest::Approx(1.0));
  Link two(1.0);
  two.start(0, 1e6);
  two.start(0, 1e6);
  CHECK(two.next_finish_ms() == doctest::Approx(2.0));
  std::vector<uint64_t> done;
  two.advance(1.99, done);
  CHECK(done.empty());
  two.advance(2.0, done);
  CHECK(done.size() == 2);
  // A later arrival shares from its start: T1 has 0.5 MB left at 0.5 ms, both at B/2 -> T1 at
  // 1.5 ms, then T2 alone -> 2.0 ms.
  Link late(1.0);
  const uint64_t a = late.start(0, 1e6);
  const uint64_t b = late.start(0.5, 1e6);
  done.clear();
  late.advance(1.5, done);
  CHECK(done == std::vector<uint64_t>{a});
  late.advance(2.0, done);
  CHECK(done == std::vector<uint64_t>{a, b});
}

TEST_CASE("tier links: a transfer due within the 1 ns slack of an advance still runs its completion") {
  // Link::advance completes a transfer due up to 1 ns after the time it is moved to; the tier's
  // advance must run that completion then, not lose it (a G4 onboard then never landed and its
  // request waited for ever: the bundled workload, G1+G2+G4, hard affinity).
  TierConfig c;
  c.g4_blocks = 4;
  c.g4_to_g2_gbps = 4;  // 4e6 bytes per ms
  SharedTier g4(c);
  int ran = 0;
  const uint64_t id = g4.up.start(0, 4e6);  // due at 1 ms
  g4.up_owner[id] = {nullptr, [&](double) { ++ran; }};
  g4.advance(1.0 - 0.5e-6);
  g4.advance(2.0);
  CHECK(ran == 1);
}

namespace {
// A small tiered engine: 16-token blocks of 1e6 bytes (1 MB: 1/14 ms on G1<->G2).
EngineConfig tiered(uint64_t g1, uint64_t g2, uint64_t g3) {
  EngineConfig c;
  c.block_size = 16;
  c.num_blocks = g1;
  c.kv_events = true;
  c.kv_bytes_per_token = 62500;
  c.tiers.g2_blocks = g2;
  c.tiers.g3_blocks = g3;
  return c;
}
RequestSpec blocks_req(uint64_t id, uint64_t first_hash, uint64_t n, uint64_t out = 1) {
  return req(id, n * 16, out, first_hash, 16);
}

// The tier of each event touching `h`, in order, as "S2" (stored on G2) / "R1" (removed from G1).
std::vector<std::string> history(const std::vector<KvEvent>& ev, uint64_t h) {
  std::vector<std::string> out;
  for (const KvEvent& e : ev)
    if (std::find(e.block_hashes.begin(), e.block_hashes.end(), h) != e.block_hashes.end())
      out.push_back(std::string(e.kind == KvEvent::Kind::kStored ? "S" : "R") +
                    std::to_string(static_cast<int>(e.tier)));
  return out;
}
}  // namespace

TEST_CASE("tiers: a G1 victim lands in G2 (stored there before its G1 remove), a hit on G2 onboards in TTFT") {
  Engine e(tiered(8, 4, 0));
  std::vector<KvEvent> ev;
  REQUIRE(e.add(blocks_req(1, 100, 4)));
  run_all(e, 1);
  REQUIRE(e.add(blocks_req(2, 200, 7, 16)));  // 8 blocks with its output: evicts request 1's four
  run_all(e, 2);
  for (auto& x : e.take_kv_events()) ev.push_back(x);
  CHECK(history(ev, 100) == std::vector<std::string>{"S1", "S2", "R1"});
  CHECK(history(ev, 103) == std::vector<std::string>{"S1", "S2", "R1"});
  CHECK(e.stats().tiers.used[2] == 4);
  CHECK(e.stats().tiers.offloaded_bytes == 4000000);
  // Request 1's prompt again: G1 misses, G2 holds all four blocks; they come up at 14 GB/s
  // (4 MB: 0.2857 ms) before the first token, which a decode step then produces.
  REQUIRE(e.add(blocks_req(3, 100, 4)));
  auto t = run_all(e, 3);
  CHECK(t[3].cached == 64);
  const EngineStats st = e.stats();
  CHECK(st.g2_tokens == 64);
  CHECK(st.tiers.onboarded_bytes == 4000000);
  const double transfer = 4e6 / 14e6;
  CHECK(t[3].ttft > transfer);
  CHECK(t[3].ttft < transfer + decode_time_ms(1.0) + 1e-9);
  // Without tiers the same prompt is recomputed: its TTFT is a prefill.
  EngineConfig flat = tiered(8, 0, 0);
  Engine f(flat);
  REQUIRE(f.add(blocks_req(1, 100, 4)));
  run_all(f, 1);
  REQUIRE(f.add(blocks_req(2, 200, 7, 16)));
  run_all(f, 2);
  REQUIRE(f.add(blocks_req(3, 100, 4)));
  auto u = run_all(f, 3);
  CHECK(u[3].cached == 0);
  CHECK(u[3].ttft >= prefill_time_ms(64));
}

TEST_CASE("tiers: --speedup-ratio divides transfer times as it divides step times; byte counts stay real") {
  // The G2 onboard of the test above at speedup 1 and 4: every time a quarter, so the TTFT too
  // (before this rule a sped-up engine spent the whole 0.2857 ms transfer: 0.214 ms more).
  auto onboard_ttft = [](double speedup) {
    EngineConfig c = tiered(8, 4, 0);
    c.speedup_ratio = speedup;
    Engine e(c);
    REQUIRE(e.add(blocks_req(1, 100, 4)));
    run_all(e, 1);
    REQUIRE(e.add(blocks_req(2, 200, 7, 16)));
    run_all(e, 2);
    CHECK(e.stats().tiers.offloaded_bytes == 4000000);
    REQUIRE(e.add(blocks_req(3, 100, 4)));
    auto t = run_all(e, 3);
    CHECK(t[3].cached == 64);
    CHECK(e.stats().tiers.onboarded_bytes == 4000000);
    return t[3].ttft;
  };
  const double t1 = onboard_ttft(1), t4 = onboard_ttft(4);
  CHECK(t1 > 4e6 / 14e6);
  CHECK(t4 == doctest::Approx(t1 / 4));
}

TEST_CASE("tiers: a G2 victim stays on G3 (written through); a G3 hit stages G3 -> G2 -> G1") {
  Engine e(tiered(8, 4, 16));
  REQUIRE(e.add(blocks_req(1, 100, 4)));
  run_all(e, 1);
  REQUIRE(e.add(blocks_req(2, 200, 7, 16)));  // request 1's blocks -> G2 -> G3
  run_all(e, 2);
  REQUIRE(e.add(blocks_req(3, 300, 7, 16)));  // request 2's blocks -> G2, pushing request 1's out of G2
  run_all(e, 3);
  auto ev = e.take_kv_events();
  CHECK(history(ev, 100) == std::vector<std::string>{"S1", "S2", "R1", "S3", "R2"});
  // Request 1's prompt again: on G3 only. Staging: 4 MB at 7 GB/s up to G2, then 4 MB at
  // 14 GB/s to G1, one after the other.
  REQUIRE(e.add(blocks_req(4, 100, 4)));
  auto t = run_all(e, 4);
  const double staged = 4e6 / 7e6, up = 4e6 / 14e6;
  CHECK(t[4].cached == 64);
  CHECK(e.stats().g3_tokens == 64);
  CHECK(t[4].ttft == doctest::Approx(staged + up + decode_time_ms(static_cast<double>(5) / 8)));
  // Its G1 slot is stored when reserved, its G2 copy when the G3 -> G2 leg lands.
  // (Later offloads may push it out of the small G2 again.)
  const auto h4 = history(e.take_kv_events(), 100);
  REQUIRE(h4.size() >= 2);
  CHECK(h4[0] == "S1");
  CHECK(h4[1] == "S2");
}

TEST_CASE("tiers: G4 is one pool for the engines that share it; a hit there stages G4 -> G2 -> G1") {
  EngineConfig c = tiered(8, 4, 0);
  c.tiers.g4_blocks = 16;
  c.shared_g4 = std::make_shared<SharedTier>(c.tiers);
  Engine a(c), b(c);
  REQUIRE(a.add(blocks_req(1, 100, 4)));
  run_all(a, 1);
  REQUIRE(a.add(blocks_req(2, 200, 7, 16)));  // request 1's blocks -> A's G2 -> the shared G4
  run_all(a, 2);
  auto ev = a.take_kv_events();
  CHECK(history(ev, 100) == std::vector<std::string>{"S1", "S2", "R1", "S4"});
  CHECK(b.stats().tiers.used[4] == 4);  // B sees the pool A wrote
  // Engine B never saw the prompt: it onboards it from G4 (4 MB at 4 GB/s, then 14 GB/s to G1).
  REQUIRE(b.add(blocks_req(3, 100, 4)));
  const double t0 = 1000;  // after everything A started (the shared links' clock)
  double now = t0, ttft = -1;
  uint64_t cached = 0;
  StepResult r;
  while (b.has_work()) {
    b.step(r, now);
    now += r.duration_ms;
    for (auto& o : r.outputs)
      if (o.generated == 1) {
        ttft = now - t0;
        cached = o.cached_tokens;
        CHECK(o.g4_tokens == 64);
      }
  }
  CHECK(cached == 64);
  CHECK(ttft == doctest::Approx(4e6 / 4e6 + 4e6 / 14e6 + decode_time_ms(5.0 / 8)).epsilon(1e-6));
}

TEST_CASE("tiers: priority eviction picks the victim, the tiers offload that victim") {
  EngineConfig c = tiered(8, 4, 0);
  c.kv_eviction = KvEviction::kPriority;
  Engine e(c);
  RequestSpec hi = blocks_req(1, 100, 2);
  hi.priority = 0;  // vLLM polarity: lower values first, so more important
  RequestSpec lo = blocks_req(2, 300, 2);
  lo.priority = 9;
  REQUIRE(e.add(hi));
  REQUIRE(e.add(lo));
  run_all(e, 2);
  // Two more blocks are needed than are free: the less important request's blocks go (to G2).
  REQUIRE(e.add(blocks_req(3, 500, 5, 16)));
  run_all(e, 3);
  auto ev = e.take_kv_events();
  CHECK(history(ev, 300) == std::vector<std::string>{"S1", "S2", "R1"});
  CHECK(history(ev, 100) == std::vector<std::string>{"S1"});
}

TEST_CASE("tiers: onboarded requests that hold G1 slots never block the one in front of them (issue 48 livelock)") {
  // Two requests continue prompts now on G2 only: each reserves 3 of the 8 G1 slots for its
  // onboard, both land together, and the first then needs 3 more blocks for the rest of its
  // prompt while only 2 are free: the second, waiting behind it, holds the other 3. The engine
  // used to release the first's blocks and retry it every step for ever (the WEKA replay with
  // G1+G2 and soft affinity never ended); the waiting holder must give its slots back instead.
  Engine e(tiered(8, 16, 0));
  REQUIRE(e.add(blocks_req(1, 100, 3)));
  REQUIRE(e.add(blocks_req(2, 200, 3)));
  run_all(e, 2);
  REQUIRE(e.add(blocks_req(3, 300, 7, 16)));  // pushes requests 1 and 2's blocks down to G2
  run_all(e, 3);
  REQUIRE(e.stats().tiers.used[2] == 6);
  REQUIRE(e.add(blocks_req(4, 100, 6)));  // 100..102 on G2, 103..105 new
  REQUIRE(e.add(blocks_req(5, 200, 6)));  // 200..202 on G2, 203..205 new
  StepResult r;
  std::vector<uint64_t> done;
  for (int steps = 0; e.has_work() && steps < 1000; ++steps) {
    e.step(r);
    for (const TokenOutput& o : r.outputs)
      if (o.finished) {
        done.push_back(o.id);
        // Whichever goes first keeps its onboarded blocks; the other onboards again or finds
        // them still on G1: either way its 3 blocks are a hit.
        CHECK(o.cached_tokens == 48);
      }
  }
  CHECK_FALSE(e.has_work());
  std::sort(done.begin(), done.end());
  CHECK(done == std::vector<uint64_t>{4, 5});
}
