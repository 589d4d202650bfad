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

TEST_CASE("decode_batch rejects bad payloads with a message naming the problem") {
  CHECK(decode_batch("").error().message.find("not valid msgpack") != std::string::npos);
  CHECK(decode_batch(unhex("c0")).error().message.find("[ts, events") != std::string::npos);
  std::string unknown = unhex(
                            "92cb3ff0000000000000"
                            "91"
                            "91a4") +
                        "Nope";
  CHECK(decode_batch(unknown).error().message == "KV event 0: unknown event tag \"Nope\"");
  std::string neg_token = unhex(
                              "92cb3ff0000000000000"
                              "91"
                              "97ab") +
                          "BlockStored" + unhex("9101c091ff01c0c0");
  CHECK(decode_batch(neg_token).error().message.find("token_ids[0]") != std::string::npos);
  CHECK(decode_batch(unhex("9201") + unhex("90") + unhex("00")).error().message.find("trailing") != std::string::npos);
  // An array header claiming 2^32-1 elements is refused without allocating them.
  CHECK(!decode_batch(unhex("92cb3ff0000000000000ddffffffff")));
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
  CHECK(e->message.find("never stored") != std::string::npos);
  // Token count must match the blocks.
  CHECK(t.translate(BlockStored{{201}, std::nullopt, {1, 2, 3}, 16, {}, {}}, out));
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
