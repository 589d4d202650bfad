// Unit tests for lib/dyn/kvevents: vLLM's msgpack batch layout, decoding of every form engines
// send, engine-id -> router-hash translation, and the ZMQ publisher/subscriber with replay.
#include <doctest/doctest.h>

// g++ 12 -O2 reports std::variant temporaries of aggregates as "may be used uninitialized"
// (a false positive of the same family as GCC bug 105562).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <chrono>
#include <mutex>
#include <thread>

#include "dyn/kvevents/codec.h"
#include "dyn/kvevents/pubsub.h"
#include "dyn/kvevents/translate.h"
#include "dyn/base/clock.h"
#include "dyn/route/router.h"
#include "dyn/tokens/hash.h"

using namespace dyn::kvevents;

namespace {
std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) {
    o += d[c >> 4];
    o += d[c & 15];
  }
  return o;
}
std::string unhex(std::string_view h) {
  std::string o;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    o += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return o;
}
std::string ascii_hex(std::string_view s) { return hex(std::string(s)); }
}  // namespace

TEST_CASE("encode_batch writes msgspec's array_like tagged layout byte for byte") {
  EventBatch b;
  b.ts = 1.5;
  b.events.push_back(BlockStored{{1}, std::nullopt, {1, 2}, 2, std::nullopt, std::string("GPU")});
  b.events.push_back(BlockRemoved{{300}, std::nullopt});
  b.events.push_back(AllBlocksCleared{});
  // Hand-assembled from the msgpack spec: fixarray(2), float64 1.5, fixarray(3), then each event as
  // [tag, fields...] with ints in their smallest form (300 -> uint16) and None as nil.
  std::string want =
      "92"
      "cb3ff8000000000000"
      "93"
      "97ab" +
      ascii_hex("BlockStored") +
      "9101"
      "c0"
      "920102"
      "02"
      "c0"
      "a3" +
      ascii_hex("GPU") + "93ac" + ascii_hex("BlockRemoved") +
      "91cd012c"
      "c0" +
      "91b0" + ascii_hex("AllBlocksCleared");
  CHECK(hex(encode_batch(b)) == want);
  b.data_parallel_rank = 1;
  CHECK(hex(encode_batch(b)).substr(0, 2) == "93");
  CHECK(hex(encode_batch(b)).substr(want.size()) == "01");
}

TEST_CASE("decode_batch round-trips and takes newer and map-encoded forms") {
  EventBatch b;
  b.ts = 1700000000.25;
  b.events.push_back(BlockStored{{0xffffffffffffffffULL, 7}, 42, {1, 2, 3, 4}, 2, 3, std::nullopt});
  auto d = decode_batch(encode_batch(b));
  REQUIRE(d);
  CHECK(d->ts == 1700000000.25);
  const auto& s = std::get<BlockStored>(d->events.at(0));
  CHECK(s.block_hashes == std::vector<uint64_t>{0xffffffffffffffffULL, 7});
  CHECK(s.parent_block_hash == 42u);
  CHECK(s.token_ids == std::vector<uint32_t>{1, 2, 3, 4});
  CHECK(s.block_size == 2);
  CHECK(s.lora_id == 3);

  // Newer vLLM: bytes block hashes, extra trailing fields (lora_name, extra_keys, group_idx).
  // [ts, [["BlockStored", [bin8 of 9 bytes], nil, [5], 1, nil, "GPU", "lora", nil, 0]], 0]
  std::string newer = unhex(
                          "93cb3ff0000000000000"
                          "91"
                          "9a"
                          "ab") +
                      "BlockStored" +
                      unhex(
                          "91c409ff0102030405060708"
                          "c0"
                          "9105"
                          "01"
                          "c0"
                          "a3") +
                      "GPU" + unhex("a4") + "lora" +
                      unhex(
                          "c0"
                          "00"
                          "00");
  auto n = decode_batch(newer);
  REQUIRE_MESSAGE(n.ok(), (n.ok() ? std::string() : n.error().message));
  CHECK(std::get<BlockStored>(n->events.at(0)).block_hashes.at(0) == 0x0102030405060708ULL);  // last 8 bytes
  CHECK(n->data_parallel_rank == 0);

  // Older vLLM: BlockRemoved without medium; map-encoded structs.
  std::string older = unhex(
                          "92cb3ff0000000000000"
                          "91"
                          "92ac") +
                      "BlockRemoved" + unhex("9105");
  auto o = decode_batch(older);
  REQUIRE(o);
  CHECK(std::get<BlockRemoved>(o->events.at(0)).block_hashes == std::vector<uint64_t>{5});
  std::string map = unhex("82a2") + "ts" + unhex("01a6") + "events" + unhex("9182a4") + "type" + unhex("b0") +
                    "AllBlocksCleared" + unhex("a2") + "xx" + unhex("c0");
  auto m = decode_batch(map);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : m.error().message));
  CHECK(std::holds_alternative<AllBlocksCleared>(m->events.at(0)));
}

TEST_CASE("decode_batch rejects payloads without a batch, and only the bad events of a batch") {
  CHECK(decode_batch("").error().message.find("not valid msgpack") != std::string::npos);
  CHECK(decode_batch(unhex("c0")).error().message.find("[ts, events") != std::string::npos);
  CHECK(decode_batch(unhex("9201") + unhex("90") + unhex("00")).error().message.find("trailing") != std::string::npos);
  // An array header claiming 2^32-1 elements is refused without allocating them.
  CHECK(!decode_batch(unhex("92cb3ff0000000000000ddffffffff")));
  // [ts, [["Nope"], ["BlockStored", [1], nil, [-1], 1, nil, nil], ["BlockRemoved", [5]]]]: the
  // unknown tag and the negative token id cost their own events, not the BlockRemoved beside them.
  std::string mixed = unhex(
                          "92cb3ff0000000000000"
                          "93"
                          "91a4") +
                      "Nope" + unhex("97ab") + "BlockStored" + unhex("9101c091ff01c0c0") + unhex("92ac") +
                      "BlockRemoved" + unhex("9105");
  auto m = decode_batch(mixed);
  REQUIRE(m);
  REQUIRE(m->events.size() == 1);
  CHECK(std::get<BlockRemoved>(m->events[0]).block_hashes == std::vector<uint64_t>{5});
  REQUIRE(m->rejected.size() == 2);
  CHECK(m->rejected[0].index == 0);
  CHECK(m->rejected[0].reason == "KV event 0: unknown event tag \"Nope\"");
  CHECK(m->rejected[1].index == 1);
  CHECK(m->rejected[1].reason.find("token_ids[0]") != std::string::npos);
}

TEST_CASE("every layout vLLM published round-trips, with the fields of hybrid models and adapters") {
  EventBatch b;
  b.ts = 12.5;
  BlockStored s{{0xfedcba9876543210ULL, 2}, 9, {1, 2, 3, 4}, 2, 7, std::string("GPU")};
  s.lora_name = "sql-adapter";
  s.group_idx = 1;
  s.kv_cache_spec_kind = "sliding_window";
  s.kv_cache_spec_sliding_window = 128;
  b.events.push_back(s);
  // A KV-offload placeholder: no tokens, block size 0, another medium.
  b.events.push_back(BlockStored{{4401, 4402}, std::nullopt, {}, 0, std::nullopt, std::string("CPU")});
  b.events.push_back(BlockRemoved{{2}, std::string("GPU"), 1});
  b.events.push_back(AllBlocksCleared{});
  b.data_parallel_rank = 3;
  for (Layout l : {Layout::kArrays, Layout::kMapEvents, Layout::kMaps}) {
    CAPTURE(static_cast<int>(l));
    std::string bytes = encode_batch(b, l);
    CHECK(static_cast<unsigned char>(bytes[0]) == (l == Layout::kMaps ? 0x83 : 0x93));
    auto d = decode_batch(bytes);
    REQUIRE(d);
    CHECK(d->rejected.empty());
    CHECK(d->ts == 12.5);
    CHECK(d->data_parallel_rank == 3);
    REQUIRE(d->events.size() == 4);
    const auto& g = std::get<BlockStored>(d->events[0]);
    CHECK(g.block_hashes == s.block_hashes);
    CHECK(g.parent_block_hash == 9u);
    CHECK(g.lora_id == 7);
    CHECK(g.lora_name == "sql-adapter");
    CHECK(g.group_idx == 1u);
    CHECK(g.kv_cache_spec_kind == "sliding_window");
    CHECK(g.kv_cache_spec_sliding_window == 128u);
    const auto& p = std::get<BlockStored>(d->events[1]);
    CHECK(p.block_size == 0);
    CHECK(p.token_ids.empty());
    CHECK(p.medium == "CPU");
    CHECK(!p.lora_name);
    CHECK(!p.group_idx);
    CHECK(std::get<BlockRemoved>(d->events[2]).group_idx == 1u);
    CHECK(std::holds_alternative<AllBlocksCleared>(d->events[3]));
  }
  // Map events follow omit_defaults: fields with a default (group_idx) are left out when unset,
  // those without one (lora_id, medium, lora_name) are written as nil. Hand-assembled:
  // [1.0, [{"type": "BlockRemoved", "block_hashes": [5], "medium": nil}]]
  EventBatch r;
  r.ts = 1;
  r.events.push_back(BlockRemoved{{5}, std::nullopt});
  CHECK(hex(encode_batch(r, Layout::kMapEvents)) ==
        "92cb3ff0000000000000"
        "91"
        "83a4" +
            ascii_hex("type") + "ac" + ascii_hex("BlockRemoved") + "ac" + ascii_hex("block_hashes") +
            "9105"
            "a6" +
            ascii_hex("medium") + "c0");
}

TEST_CASE("translator yields the router's own sequence hashes for the same tokens") {
  std::vector<uint32_t> toks(4 * 16);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint32_t>(i * 7 + 1);
  auto want = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16));
  Translator t(16);
  std::vector<IndexUpdate> out;
  // The engine stores blocks 0-1, then 2-3 continuing block 1 (engine ids are arbitrary).
  REQUIRE(!t.translate(BlockStored{{100, 101}, std::nullopt, {toks.begin(), toks.begin() + 32}, 16, {}, {}}, out));
  REQUIRE(!t.translate(BlockStored{{102, 103}, 101, {toks.begin() + 32, toks.end()}, 16, {}, {}}, out));
  REQUIRE(out.size() == 2);
  std::vector<uint64_t> got = out[0].sequence_hashes;
  got.insert(got.end(), out[1].sequence_hashes.begin(), out[1].sequence_hashes.end());
  CHECK(got == want);
  out.clear();
  REQUIRE(!t.translate(BlockRemoved{{103, 999}, {}}, out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == IndexUpdate::Kind::kRemoved);
  CHECK(out[0].sequence_hashes == std::vector<uint64_t>{want[3]});
  CHECK(t.known_blocks() == 3);
  // A parent it never saw: missed events.
  auto e = t.translate(BlockStored{{200}, 555, {toks.begin(), toks.begin() + 16}, 16, {}, {}}, out);
  REQUIRE(e);
  CHECK(e->why == Skip::kUnknownParent);
  CHECK(e->detail.find("never stored") != std::string::npos);
  // Token count must match the blocks.
  CHECK(t.translate(BlockStored{{201}, std::nullopt, {1, 2, 3}, 16, {}, {}}, out)->why == Skip::kTokenCount);
  out.clear();
  REQUIRE(!t.translate(AllBlocksCleared{}, out));
  CHECK(t.known_blocks() == 0);
  CHECK(out.at(0).kind == IndexUpdate::Kind::kCleared);
}

TEST_CASE("translator cuts router blocks from engine blocks of another size") {
  std::vector<uint32_t> toks(64);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint32_t>(i + 3);
  auto want = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 32));
  Translator t(32);
  std::vector<IndexUpdate> out;
  for (uint64_t b = 0; b < 4; ++b) {  // engine blocks of 16, one per event
    std::optional<uint64_t> parent;
    if (b > 0) parent = b - 1;
    REQUIRE(
        !t.translate(BlockStored{{b}, parent, {toks.begin() + b * 16, toks.begin() + (b + 1) * 16}, 16, {}, {}}, out));
  }
  REQUIRE(out.size() == 2);
  CHECK(out[0].sequence_hashes == std::vector<uint64_t>{want[0]});
  CHECK(out[1].sequence_hashes == std::vector<uint64_t>{want[1]});
  CHECK(t.engine_block_size() == 16);
}

namespace {
std::vector<uint32_t> tokens_from(uint32_t first, size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = first + static_cast<uint32_t>(i);
  return t;
}
std::vector<uint64_t> hashes_of(const std::vector<IndexUpdate>& out, IndexUpdate::Kind k) {
  std::vector<uint64_t> h;
  for (const auto& u : out)
    if (u.kind == k) h.insert(h.end(), u.sequence_hashes.begin(), u.sequence_hashes.end());
  return h;
}
}  // namespace

TEST_CASE("an offloaded block continues its parent's chain wherever the parent is") {
  // Engines offload the leaves of a prefix first, so a host-tier store often continues a parent
  // still on the GPU only (dyn-mocker's G2, SPEC 8.7): it gets the router's own hash for its tokens
  // instead of being skipped as continuing a block never stored.
  Translator t(16, {"GPU", "CPU"});
  auto toks = tokens_from(3, 32);
  const auto want = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16));
  std::vector<IndexUpdate> out;
  REQUIRE(
      !t.translate(BlockStored{{7}, std::nullopt, {toks.begin(), toks.begin() + 16}, 16, {}, std::string("GPU")}, out));
  REQUIRE(!t.translate(BlockStored{{8}, 7, {toks.begin() + 16, toks.end()}, 16, {}, std::string("CPU")}, out));
  REQUIRE(out.size() == 2);
  CHECK(out[1].medium == "CPU");
  CHECK(out[1].sequence_hashes == std::vector<uint64_t>{want[1]});
  // A parent on no medium is still missed events.
  CHECK(t.translate(BlockStored{{9}, 555, {toks.begin(), toks.begin() + 16}, 16, {}, std::string("CPU")}, out)->why ==
        Skip::kUnknownParent);
}

TEST_CASE("a block's identity is its medium: an offloaded copy never stores or removes a device block") {
  auto toks = tokens_from(10, 32);
  auto want = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16));
  Translator t(16);
  std::vector<IndexUpdate> out;
  REQUIRE(!t.translate(BlockStored{{1, 2}, std::nullopt, toks, 16, {}, std::string("GPU")}, out));
  // vLLM's KV-offload placeholder for the same ids, then the CPU copy's eviction.
  auto p = t.translate(BlockStored{{1, 2}, std::nullopt, {}, 0, {}, std::string("CPU")}, out);
  REQUIRE(p);
  CHECK(p->why == Skip::kOtherMedium);
  CHECK(t.translate(BlockRemoved{{1}, std::string("CPU")}, out)->why == Skip::kOtherMedium);
  CHECK(hashes_of(out, IndexUpdate::Kind::kRemoved).empty());
  CHECK(t.known_blocks() == 2);
  // The same placeholder on the device medium (block size 0, no tokens): skipped as a placeholder.
  CHECK(t.translate(BlockStored{{3}, std::nullopt, {}, 0, {}, {}}, out)->why == Skip::kPlaceholder);

  // A translator asked for the CPU tier too keeps its blocks apart: a CPU removal names CPU blocks.
  Translator tiers(16, {"GPU", "CPU"});
  out.clear();
  REQUIRE(!tiers.translate(BlockStored{{1, 2}, std::nullopt, toks, 16, {}, std::string("GPU")}, out));
  REQUIRE(!tiers.translate(BlockStored{{1, 2}, std::nullopt, toks, 16, {}, std::string("CPU")}, out));
  REQUIRE(!tiers.translate(BlockRemoved{{2}, std::string("CPU")}, out));
  REQUIRE(out.size() == 3);
  CHECK(out[2].kind == IndexUpdate::Kind::kRemoved);
  CHECK(out[2].medium == "CPU");
  CHECK(out[2].sequence_hashes == std::vector<uint64_t>{want[1]});
  CHECK(tiers.known_blocks() == 3);
}

TEST_CASE("hybrid models: only the main attention groups are indexed, a block held by one group stays") {
  auto toks = tokens_from(100, 32);
  auto want = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16));
  Translator t(16);
  std::vector<IndexUpdate> out;
  auto stored = [&](uint32_t group, std::optional<std::string> kind) {
    BlockStored s{{7, 8}, std::nullopt, toks, 16, {}, std::string("GPU")};
    s.group_idx = group;
    s.kv_cache_spec_kind = std::move(kind);
    return s;
  };
  REQUIRE(!t.translate(stored(0, "full_attention"), out));
  // The sliding-window group stores and evicts the same engine ids: neither reaches the index.
  CHECK(t.translate(stored(1, "sliding_window"), out)->why == Skip::kOtherGroup);
  CHECK(t.translate(BlockRemoved{{7, 8}, std::string("GPU"), 1}, out)->why == Skip::kOtherGroup);  // kind learned
  CHECK(hashes_of(out, IndexUpdate::Kind::kRemoved).empty());
  // A group never described is not taken for the main one (group 0 is).
  CHECK(t.translate(BlockRemoved{{7}, std::string("GPU"), 5}, out)->why == Skip::kOtherGroup);
  // Two full-attention groups hold the same router blocks: a removal in one keeps them indexed.
  REQUIRE(!t.translate(stored(2, "full_attention"), out));
  REQUIRE(!t.translate(BlockRemoved{{7, 8}, std::string("GPU"), 2}, out));
  CHECK(hashes_of(out, IndexUpdate::Kind::kRemoved).empty());
  REQUIRE(!t.translate(BlockRemoved{{7, 8}, std::string("GPU"), 0}, out));
  CHECK(hashes_of(out, IndexUpdate::Kind::kRemoved) == want);
}

TEST_CASE("blocks stored under a LoRA adapter are hashed under it, as a request to the adapter is") {
  auto toks = tokens_from(7, 16);
  Adapters adapters;
  Translator t(16, {"GPU"}, &adapters);
  std::vector<IndexUpdate> out;
  BlockStored s{{1}, std::nullopt, toks, 16, 3, std::string("GPU")};
  s.lora_name = "sql";
  REQUIRE(!t.translate(s, out));
  auto base = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16));
  auto sql = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(toks, 16, false, adapters.seed_for("sql")));
  CHECK(adapters.seed_for("sql") == dyn::tokens::adapter_seed("sql"));
  CHECK(adapters.seed_for("base-model") == dyn::tokens::kHashSeed);
  CHECK(out.at(0).sequence_hashes == sql);
  CHECK(sql != base);
  // Dynamo's seed: 1337 + XXH3-64 of the name (seed 0), wrapping; "" is the base model.
  CHECK(dyn::tokens::adapter_seed("") == dyn::tokens::kHashSeed);
  // Older vLLM named the adapter by id only: no request can be matched to those blocks.
  CHECK(t.translate(BlockStored{{2}, std::nullopt, toks, 16, 4, std::string("GPU")}, out)->why ==
        Skip::kUnnamedAdapter);
}

TEST_CASE("an engine id stored again with other content drops what only the old content held") {
  auto a = tokens_from(1, 16), b = tokens_from(500, 16);
  Translator t(16);
  std::vector<IndexUpdate> out;
  REQUIRE(!t.translate(BlockStored{{1}, std::nullopt, a, 16, {}, {}}, out));
  REQUIRE(!t.translate(BlockStored{{1}, std::nullopt, a, 16, {}, {}}, out));  // the same again: nothing dropped
  CHECK(hashes_of(out, IndexUpdate::Kind::kRemoved).empty());
  out.clear();
  REQUIRE(!t.translate(BlockStored{{1}, std::nullopt, b, 16, {}, {}}, out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == IndexUpdate::Kind::kRemoved);
  CHECK(out[0].sequence_hashes == dyn::tokens::block_hashes(a, 16));
  CHECK(out[1].sequence_hashes == dyn::tokens::block_hashes(b, 16));
}

TEST_CASE("case 44: a step batch mixing GPU blocks and KV-offload placeholders keeps its GPU blocks") {
  // tests/fixtures/cases/44-kv-offload-placeholder-batch in unit form: the batch of worker 1
  // holds a GPU BlockStored of prompt A and a CPU placeholder for two of its ids; a later batch
  // evicts the CPU copy of block 4401. A is still fully cached on worker 1's GPU.
  dyn::FakeClock clock;
  dyn::route::RouterConfig cfg;
  cfg.block_size = 16;
  cfg.mode = dyn::route::Mode::kKv;
  cfg.kv_events = true;
  dyn::route::Router router(cfg, clock);
  REQUIRE(!router.add_worker({0, 0, 0}));
  REQUIRE(!router.add_worker({1, 0, 0}));
  auto a = tokens_from(40, 64);
  EventBatch step;
  step.events.push_back(BlockStored{{4401, 4402, 4403, 4404}, std::nullopt, a, 16, {}, std::string("GPU")});
  step.events.push_back(BlockStored{{4401, 4402}, std::nullopt, {}, 0, {}, std::string("CPU")});
  EventBatch evict;
  evict.events.push_back(BlockRemoved{{4401}, std::string("CPU")});
  Adapters adapters;
  WorkerFeed feed(16, &adapters);
  std::vector<std::string> problems;
  auto accept = [](uint32_t bs) { return bs == 16; };
  auto note = [&](const std::string& m) { problems.push_back(m); };
  auto index = [&](std::span<const dyn::route::KvEvent> es) { router.apply_kv_events(1, es); };
  for (const EventBatch& b : {step, evict}) feed.apply(*decode_batch(encode_batch(b)), index, accept, note);
  CHECK(problems.empty());  // an offloaded copy is traffic, not a problem
  // The host tier is indexed now: the placeholder is skipped as one (no tokens to hash), and the
  // CPU eviction names a block the host tier never held, so it changes nothing.
  CHECK(feed.counts().skipped[static_cast<size_t>(Skip::kPlaceholder)] == 1);
  CHECK(feed.counts().skipped[static_cast<size_t>(Skip::kOtherMedium)] == 0);
  CHECK(router.loads().at(1).cached_blocks == 4);
  auto seq = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(a, 16));
  dyn::route::RouteRequest q;
  q.sequence_hashes = seq;
  q.tokens = 64;
  auto p = router.place(q);
  REQUIRE(p);
  CHECK(p->worker() == 1);
  CHECK(p->overlap_blocks() == 4);
}

TEST_CASE("the feed keeps each tier's blocks apart: GPU, CPU, DISK, EXTERNAL events reach the index by tier") {
  auto a = tokens_from(50, 48);
  auto seq = dyn::tokens::sequence_hashes(dyn::tokens::block_hashes(a, 16));
  EventBatch b;
  b.events.push_back(BlockStored{{1, 2, 3}, std::nullopt, a, 16, {}, std::string("GPU")});
  b.events.push_back(BlockStored{{1, 2, 3}, std::nullopt, a, 16, {}, std::string("CPU_PINNED")});
  // Demotion to disk: store on the new tier before removing from the old (both of one engine id).
  b.events.push_back(BlockStored{{7}, std::nullopt, {a.begin(), a.begin() + 16}, 16, {}, std::string("DISK")});
  b.events.push_back(BlockRemoved{{1}, std::string("CPU")});  // "CPU" is the host tier too
  b.events.push_back(BlockStored{{9}, std::nullopt, {a.begin(), a.begin() + 16}, 16, {}, std::string("EXTERNAL")});
  b.events.push_back(BlockStored{{9}, std::nullopt, {a.begin(), a.begin() + 16}, 16, {}, std::string("TAPE")});
  WorkerFeed feed(16, nullptr);
  std::vector<std::pair<dyn::kv::Tier, dyn::kv::BlockEvent::Kind>> got;
  std::vector<uint64_t> host_removed;
  size_t calls = 0;
  auto index = [&](std::span<const dyn::kv::BlockEvent> es) {
    ++calls;
    for (const dyn::kv::BlockEvent& e : es) {
      got.emplace_back(e.tier, e.kind);
      if (e.tier == dyn::kv::Tier::kHost && e.kind == dyn::kv::BlockEvent::Kind::kRemoved)
        host_removed = e.block_hashes;
    }
  };
  feed.apply(
      *decode_batch(encode_batch(b)), index, [](uint32_t) { return true; }, nullptr);
  using K = dyn::kv::BlockEvent::Kind;
  using T = dyn::kv::Tier;
  CHECK(got == decltype(got){{T::kDevice, K::kStored},
                             {T::kHost, K::kStored},
                             {T::kDisk, K::kStored},
                             {T::kHost, K::kRemoved},
                             {T::kShared, K::kStored}});
  CHECK(host_removed == std::vector<uint64_t>{seq[0]});
  CHECK(calls == 1);  // the batch's changes in one call: the router takes its lock once
  CHECK(feed.counts().skipped[static_cast<size_t>(Skip::kOtherMedium)] == 1);  // TAPE
  // A reset (missed events) clears every tier of the worker.
  got.clear();
  feed.reset(index);
  CHECK(got ==
        decltype(got){
            {T::kDevice, K::kCleared}, {T::kHost, K::kCleared}, {T::kDisk, K::kCleared}, {T::kShared, K::kCleared}});
}

TEST_CASE("publisher and subscriber: ordered delivery, join replay, gap replay") {
  Publisher pub(PublisherOptions{"tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "kv", 100});
  CHECK(pub.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  auto batch = [](uint64_t h) {
    EventBatch b;
    b.ts = 1;
    b.events.push_back(BlockRemoved{{h}, std::nullopt});
    return b;
  };
  // Published before anyone listens: the subscriber must get them from the replay socket.
  for (uint64_t i = 0; i < 3; ++i) pub.publish(batch(i));
  while (pub.published() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));

  std::mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (seq, hash)
  int resets = 0;
  Subscriber::Handler h;
  h.batch = [&](uint64_t seq, const EventBatch& b, bool) {
    std::lock_guard lk(mu);
    got.emplace_back(seq, std::get<BlockRemoved>(b.events.at(0)).block_hashes.at(0));
  };
  h.reset = [&](const std::string&) {
    std::lock_guard lk(mu);
    resets++;
  };
  Subscriber sub(SubscriberOptions{pub.endpoint(), pub.replay_endpoint(), "kv", "test", 2000}, h);
  sub.start();
  // PUB drops messages until the subscription has propagated: keep publishing until one lands.
  uint64_t next = 3;
  for (int i = 0; i < 400; ++i) {
    pub.publish(batch(next++));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard lk(mu);
    if (got.size() >= 5) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sub.stop();
  std::lock_guard lk(mu);
  REQUIRE(got.size() >= 5);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].first == i);  // every batch from 0, in order, none twice
    CHECK(got[i].second == i);
  }
  CHECK(resets == 0);
  CHECK(sub.stats().replayed_batches.load() >= 3);
}
