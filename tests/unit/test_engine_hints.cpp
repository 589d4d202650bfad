// Unit tests for KV hints (lib/dyn/engine/hints, SPEC 8.6): the KvHint v0.1 codec, pins in the
// KV pool's eviction order, and the engine's leases (cap, TTL, evict, request-tied hints).
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "dyn/engine/engine.h"
#include "dyn/engine/hints.h"

using namespace dyn::engine;
using dyn::Json;

namespace {

KvHint hint_of(const char* text) {
  auto h = parse_kv_hint(Json::parse(text));
  REQUIRE(h);
  return *h;
}

// A retain of `hashes` (decimal strings, as Dynamo's policy writes them) for `ttl_s` seconds.
KvHint retain(std::vector<uint64_t> hashes, double ttl_s, int64_t priority = 0) {
  Json hs = Json::array();
  for (uint64_t h : hashes) hs.push_back(std::to_string(h));
  const Json a{{"action_id", "a1"},
               {"action_type", "kv.retain"},
               {"action_version", "1.0"},
               {"payload", {{"priority", priority}, {"ttl_seconds", ttl_s}, {"block_hashes", hs}}}};
  return hint_of(Json{{"protocol_version", "0.1"}, {"message_id", "m"}, {"actions", Json::array({a})}}.dump().c_str());
}

RequestSpec req(uint64_t id, uint64_t first_hash, size_t blocks, uint32_t bs = 16) {
  RequestSpec r;
  r.id = id;
  r.prompt_tokens = blocks * bs;
  r.max_output_tokens = 1;
  for (uint64_t i = 0; i < blocks; ++i) r.block_hashes.push_back(first_hash + i);
  return r;
}

// Runs `e` until idle on a virtual clock starting at `now`; returns the clock then. `cached`:
// the cached prompt blocks (16 tokens) of the last request that finished.
double drain(Engine& e, double now, uint64_t* cached = nullptr) {
  StepResult r;
  while (e.has_work()) {
    e.step(r, now);
    now += r.duration_ms;
    for (const TokenOutput& o : r.outputs)
      if (o.finished && cached) *cached = o.cached_tokens / 16;
  }
  return now;
}

// Request 1 caches blocks 100..103 at t = 0; `between` runs then (hints); two other 4-block
// requests follow (14 blocks through a 10-block pool) at `later_ms`; returns the blocks request
// 4, asking for 100..103 again, finds cached.
template <class F>
uint64_t reuse_after_pressure(Engine& e, F between, double later_ms = 0) {
  e.add(req(1, 100, 4));
  double now = drain(e, 0);
  between(now);
  now = std::max(now, later_ms);
  e.add(req(2, 200, 4));
  now = drain(e, now);
  e.add(req(3, 300, 6));
  now = drain(e, now);
  e.add(req(4, 100, 4));
  uint64_t cached = 0;
  drain(e, now, &cached);
  return cached;
}

EngineConfig small_pool(uint64_t blocks = 10, double fraction = 0.4) {
  EngineConfig c;
  c.block_size = 16;
  c.num_blocks = blocks;
  c.kv_hints.enabled = true;
  c.kv_hints.max_pinned_fraction = fraction;
  return c;
}

// small_pool() with a G2 of 8 blocks (16 KiB blocks: their copies take microseconds).
EngineConfig tiered_pool() {
  EngineConfig c = small_pool();
  c.kv_bytes_per_token = 1024;
  c.tiers.g2_blocks = 8;
  return c;
}

}  // namespace

TEST_CASE("KvHint codec: Dynamo's v0.1 envelope round-trips, unknown actions untouched") {
  const Json wire = Json::parse(R"({"protocol_version":"0.1","message_id":"s-9-0","actions":[
    {"action_id":"a1","action_type":"kv.fetch","action_version":"1.0",
     "payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}},
    {"action_id":"a2","action_type":"kv.future_action","action_version":"7.3",
     "payload":{"nested":{"enabled":true},"items":[1,2,3]}}]})");
  auto h = parse_kv_hint(wire);
  REQUIRE(h);
  CHECK(h->message_id == "s-9-0");
  REQUIRE(h->actions.size() == 2);
  CHECK(h->actions[1].action_type == "kv.future_action");
  CHECK(to_json(*h) == wire);
}

TEST_CASE("KvHint codec: malformed envelopes name the field") {
  auto err = [](const char* text) {
    auto h = parse_kv_hint(Json::parse(text));
    REQUIRE_FALSE(h);
    CHECK(h.error().exit_code == dyn::kExitBadData);
    return h.error().message;
  };
  CHECK(err("[]").find("not a JSON object") != std::string::npos);
  CHECK(err(R"({"message_id":"m","actions":[]})").find("protocol_version: missing") != std::string::npos);
  CHECK(err(R"({"protocol_version":"2.0","message_id":"m","actions":[]})").find("not supported") != std::string::npos);
  CHECK(err(R"({"protocol_version":"0.1","message_id":"m"})").find("actions") != std::string::npos);
  CHECK(err(R"({"protocol_version":"0.1","message_id":"m","actions":[{"action_type":"kv.evict"}]})")
            .find("actions[0].action_version: missing") != std::string::npos);
  CHECK(err(R"({"protocol_version":"0.1","message_id":"m","actions":[{"action_type":"kv.evict",
                "action_version":"1.0","payload":[1]}]})")
            .find("actions[0].payload: not an object") != std::string::npos);
}

TEST_CASE("KvPool pins: a pinned block goes after every unpinned one, and back to the front when unpinned") {
  KvPool pool(4);
  for (uint64_t h = 1; h <= 4; ++h) pool.release_slot(pool.insert(h, std::nullopt));  // LRU: 1 2 3 4
  pool.pin(1);
  CHECK(pool.pinned() == 1);
  REQUIRE(pool.make_room(3));  // 2, 3, 4 go; the pinned 1, least recently used, stays
  CHECK(pool.contains(1));
  CHECK_FALSE(pool.contains(2));
  REQUIRE(pool.make_room(4));  // nothing unpinned is left: the pinned block is reused
  CHECK_FALSE(pool.contains(1));
  CHECK(pool.pinned_evictions() == 1);
  CHECK(pool.pinned() == 1);  // the lease still holds the hash: inserted again, it is pinned
  pool.release_slot(pool.insert(1, std::nullopt));
  pool.release_slot(pool.insert(9, std::nullopt));
  REQUIRE(pool.make_room(3));
  CHECK(pool.contains(1));
  CHECK_FALSE(pool.contains(9));
  pool.unpin(1);  // drops back as the oldest block
  pool.release_slot(pool.insert(10, std::nullopt));
  REQUIRE(pool.make_room(3));
  CHECK_FALSE(pool.contains(1));
  CHECK(pool.contains(10));
}

TEST_CASE("Leases: a retained prefix survives pressure that evicts it without the hint") {
  Engine plain(small_pool());
  CHECK(reuse_after_pressure(plain, [](double) {}) == 0);
  Engine hinted(small_pool());
  const uint64_t hit = reuse_after_pressure(hinted, [&](double now) {
    auto res = hinted.apply_hint(retain({100, 101, 102, 103}, 60), now);
    REQUIRE(res.size() == 1);
    CHECK(res[0].outcome == HintOutcome::kAccepted);  // 4 blocks, cap 40 % of 10 = 4
    CHECK(res[0].blocks == 4);
    CHECK(hinted.stats().pinned_blocks == 4);
  });
  CHECK(hit == 4);
  CHECK(hinted.stats().hint_actions[0][0] == 1);  // kv.retain accepted
}

TEST_CASE("Leases: an expired lease's blocks are evictable again (virtual clock)") {
  Engine e(small_pool());
  const uint64_t hit = reuse_after_pressure(
      e,
      [&](double now) {
        CHECK(e.apply_hint(retain({100, 101, 102, 103}, 1), now)[0].outcome == HintOutcome::kAccepted);
      },
      5000);  // the pressure comes 5 s later, the 1 s lease has run out
  CHECK(hit == 0);
  CHECK(e.stats().hint_leases == 0);
  CHECK(e.stats().pinned_blocks == 0);
}

TEST_CASE("Leases: the cap clips a lease root first, and rejects one when full") {
  Engine e(small_pool(10, 0.3));  // cap 3 blocks
  e.add(req(1, 100, 4));
  double now = drain(e, 0);
  auto r = e.apply_hint(retain({100, 101, 102, 103}, 600), now);
  CHECK(r[0].outcome == HintOutcome::kClipped);
  CHECK(r[0].blocks == 3);
  CHECK(r[0].ttl_s == 300);  // max TTL
  CHECK(r[0].reason.find("3 of 4 blocks fit the pinned cap") != std::string::npos);
  CHECK(r[0].reason.find("ttl_seconds 600 clipped to 300") != std::string::npos);
  CHECK(e.pool().is_pinned(100));
  CHECK_FALSE(e.pool().is_pinned(103));
  // Full: another session's blocks are refused; a block already pinned costs nothing.
  e.add(req(2, 200, 2));
  now = drain(e, now);
  r = e.apply_hint(retain({200}, 10), now);
  CHECK(r[0].outcome == HintOutcome::kRejected);
  CHECK(r[0].reason.find("pinned cap is full") != std::string::npos);
  CHECK(e.apply_hint(retain({100}, 10), now)[0].outcome == HintOutcome::kAccepted);
  // A more important lease displaces less important ones.
  r = e.apply_hint(retain({200, 201}, 10, 5), now);
  CHECK(r[0].outcome == HintOutcome::kAccepted);
  CHECK(e.pool().is_pinned(200));
  CHECK_FALSE(e.pool().is_pinned(101));
}

TEST_CASE("Leases: rejections say why; unknown actions pass through; kv.fetch has no source here") {
  Engine e(small_pool());
  e.add(req(1, 100, 2));
  const double now = drain(e, 0);
  const KvHint h = hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"n","action_type":"kv.retain","action_version":"1.0","payload":{"block_hashes":["100"]}},
    {"action_id":"c","action_type":"kv.retain","action_version":"1.0","payload":{"ttl_seconds":5,"block_hashes":["999"]}},
    {"action_id":"v","action_type":"kv.retain","action_version":"2.0","payload":{}},
    {"action_id":"i","action_type":"kv.retain","action_version":"1.0","payload":{"ttl_seconds":5,"include_current_request":true}},
    {"action_id":"f","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://h:1","block_hashes":[1]}},
    {"action_id":"u","action_type":"kv.future","action_version":"9","payload":{"x":1}},
    {"action_id":"b","action_type":"kv.retain","action_version":"1.0","payload":{"ttl_seconds":5,"block_hashes":["-1"]}}]})");
  auto r = e.apply_hint(h, now);
  REQUIRE(r.size() == 7);
  CHECK(r[0].reason.find("ttl_seconds") != std::string::npos);
  CHECK(r[1].reason == "none of its 1 blocks is cached");
  CHECK(r[2].reason.find("action_version") != std::string::npos);
  CHECK(r[3].reason.find("not tied to a request") != std::string::npos);
  CHECK(r[4].reason.find("no KV transfer") != std::string::npos);
  CHECK(r[5].outcome == HintOutcome::kPassedThrough);
  CHECK(r[6].reason.find("not an unsigned 64-bit hash") != std::string::npos);
  for (size_t i : {0, 1, 2, 3, 4, 6}) CHECK(r[i].outcome == HintOutcome::kRejected);
  const EngineStats st = e.stats();
  CHECK(st.hint_actions[0][2] == 5);  // kv.retain rejected
  CHECK(st.hint_actions[2][2] == 1);  // kv.fetch rejected
  CHECK(st.hint_actions[5][3] == 1);  // other passed through
  CHECK(st.pinned_blocks == 0);
}

TEST_CASE("Leases: a hint tied to a request takes effect at its completion; kv.evict and the last turn end it") {
  Engine e(small_pool());
  RequestSpec r1 = req(1, 100, 4);
  r1.session = session_tag("s1");
  r1.hint = std::make_shared<KvHint>(hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"r","action_type":"kv.retain","action_version":"1.0",
     "payload":{"ttl_seconds":30,"include_current_request":true,"execute_at":"request_completion"}}]})"));
  e.add(r1);
  double now = drain(e, 0);
  CHECK(e.stats().pinned_blocks == 4);
  // kv.evict by session_id: the session's leases end, its blocks go first out.
  const KvHint ev = hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"e","action_type":"kv.evict","action_version":"1.0","payload":{"session_id":"s1"}}]})");
  auto r = e.apply_hint(ev, now);
  CHECK(r[0].outcome == HintOutcome::kAccepted);
  CHECK(r[0].blocks == 4);
  CHECK(e.stats().pinned_blocks == 0);
  e.add(req(2, 200, 7));  // needs 1 block more than the free 6: it takes s1's leaf first
  now = drain(e, now);
  CHECK(e.cached_prefix_blocks({100, 101, 102, 103}) == 3);
  // A final turn ends its session's lease at completion.
  RequestSpec r3 = req(3, 300, 2);
  r3.session = session_tag("s3");
  r3.hint = r1.hint;
  e.add(r3);
  now = drain(e, now);
  CHECK(e.stats().hint_leases == 1);
  RequestSpec r4 = req(4, 300, 2);
  r4.session = session_tag("s3");
  r4.session_final = true;
  e.add(r4);
  drain(e, now);
  CHECK(e.stats().hint_leases == 0);
}

TEST_CASE("Leases: without kv_hints the engine keeps nothing") {
  EngineConfig c = small_pool();
  c.kv_hints.enabled = false;
  Engine e(c);
  e.add(req(1, 100, 2));
  const double now = drain(e, 0);
  CHECK(e.apply_hint(retain({100}, 5), now).empty());
  CHECK(e.stats().pinned_blocks == 0);
}

TEST_CASE("Leases: kv.demote offloads the named blocks to G2 now, and needs a tier below G1") {
  const KvHint demote = hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"d","action_type":"kv.demote","action_version":"1.0","payload":{"block_hashes":["100","101"]}}]})");
  Engine flat(small_pool());
  flat.add(req(1, 100, 2));
  auto r = flat.apply_hint(demote, drain(flat, 0));
  CHECK(r[0].outcome == HintOutcome::kRejected);
  CHECK(r[0].reason.find("no KV tier below G1") != std::string::npos);

  Engine e(tiered_pool());
  e.add(req(1, 100, 2));
  const double now = drain(e, 0);
  r = e.apply_hint(demote, now);
  CHECK(r[0].outcome == HintOutcome::kAccepted);
  CHECK(r[0].blocks == 2);
  CHECK(e.cached_prefix_blocks({100, 101}) == 0);  // off G1
  e.add(req(2, 100, 2));
  uint64_t cached = 0;
  drain(e, now + 1000, &cached);  // the copies have landed: onboarded from G2
  CHECK(cached == 2);
  CHECK(e.stats().g2_tokens == 32);
}

TEST_CASE("Leases: kv.prefetch brings a session's demoted blocks back to G1 before its return") {
  const KvHint prefetch = hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"p","action_type":"kv.prefetch","action_version":"1.0","payload":{"session_id":"s1"}}]})");
  Engine flat(small_pool());
  auto r = flat.apply_hint(prefetch, 0);
  CHECK(r[0].outcome == HintOutcome::kRejected);
  CHECK(r[0].reason.find("no KV tier below G1") != std::string::npos);

  Engine e(tiered_pool());
  RequestSpec r1 = req(1, 100, 4);
  r1.session = session_tag("s1");
  e.add(r1);
  double now = drain(e, 0);
  r = e.apply_hint(hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"d","action_type":"kv.demote","action_version":"1.0","payload":{"session_id":"s1"}}]})"),
                   now);
  REQUIRE(r[0].outcome == HintOutcome::kAccepted);
  CHECK(e.cached_prefix_blocks({100, 101, 102, 103}) == 0);
  now += 1000;  // the demote's copies have landed on G2
  StepResult idle;
  e.step(idle, now);
  r = e.apply_hint(prefetch, now);
  CHECK(r[0].outcome == HintOutcome::kAccepted);
  CHECK(r[0].blocks == 4);
  CHECK(e.cached_prefix_blocks({100, 101, 102, 103}) == 0);  // on G1 only once the copy lands
  now += 1000;
  e.step(idle, now);
  CHECK(e.cached_prefix_blocks({100, 101, 102, 103}) == 4);
  // The return finds them on G1: nothing onboarded for it.
  RequestSpec r2 = req(2, 100, 4);
  r2.session = session_tag("s1");
  e.add(r2);
  uint64_t cached = 0;
  now = drain(e, now, &cached);
  CHECK(cached == 4);
  CHECK(e.stats().g2_tokens == 0);
  // All on G1 already: nothing to move. Blocks on no tier: nothing to move either.
  r = e.apply_hint(prefetch, now);
  CHECK(r[0].outcome == HintOutcome::kAccepted);
  CHECK(r[0].blocks == 0);
  r = e.apply_hint(hint_of(R"({"protocol_version":"0.1","message_id":"m","actions":[
    {"action_id":"q","action_type":"kv.prefetch","action_version":"1.0","payload":{"block_hashes":["999"]}}]})"),
                   now);
  CHECK(r[0].outcome == HintOutcome::kRejected);
  CHECK(r[0].reason.find("ready on a lower tier") != std::string::npos);
  const EngineStats st = e.stats();
  CHECK(st.hint_actions[3][0] == 2);  // kv.prefetch accepted
  CHECK(st.hint_actions[3][2] == 1);  // kv.prefetch rejected
}
