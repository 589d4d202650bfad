// Fuzz target: the KV event decoder and translation (kvevents::decode_batch, Translator,
// WorkerFeed), with batches that mix usable events and unusable ones, as engines send them.
// Input: a byte stream that drives a generator: router block size, wire layout (kArrays,
// kMapEvents, kMaps), then batches of events. Usable events store chains (group 0 or a second
// full-attention group, under no adapter or a named one, continuing stored blocks), remove stored
// blocks, clear. Unusable ones are mixed in at any position: undecodable events (unknown tag,
// wrong field types), copies on a medium the router has no tier for (stores, placeholders, removals of
// the same engine ids), device placeholders, sliding-window group events, adapters known only by
// id, token counts that do not match, unknown parents.
// Properties checked: every batch decodes; its undecodable events, and only those, are rejected
// with their index; the decoded usable events equal the generated ones in every layout; the
// translator and the router's index end up exactly where the usable events alone take them (a
// batch's usable events are applied whatever else it holds, the others change nothing), and the
// feed counts every unusable event as skipped. Nothing is caught and ignored wholesale.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/kvevents/codec.h"
#include "dyn/kvevents/translate.h"
#include "dyn/route/router.h"
#include "fuzz_util.h"

using namespace dyn::kvevents;

namespace {

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  bool done() const { return n == 0; }
};

/// One generated event: its wire bytes (in the run's layout) and, when decodable, the event.
struct Gen {
  std::string wire;
  std::optional<Event> event;
  bool usable = false;
};

std::string single(const Event& e, Layout layout) {
  EventBatch b;
  b.events.push_back(e);
  std::string whole = encode_batch(b, layout);
  // [ts(f64), [event]] or {"ts": f64, "events": [event]}: the event follows the one-element array header.
  return whole.substr(layout == Layout::kMaps ? 21 : 11);
}

std::string str(std::string_view s) { return std::string(1, static_cast<char>(0xa0 | s.size())) + std::string(s); }

class Generator {
 public:
  Generator(Bytes& in, Layout layout) : in_(in), layout_(layout) {}

  Gen next() {
    const uint8_t k = in_.u8() % 16;
    if (k <= 2 || stored_[0].empty()) return store();
    if (k <= 4) return remove();
    if (k == 5) return in_.u8() % 4 == 0 ? clear() : remove();
    return unusable(k);
  }

 private:
  std::vector<uint32_t> tokens(size_t n) {
    std::vector<uint32_t> t(n);
    for (auto& x : t) x = in_.u8() % 8;  // few values: blocks repeat across chains
    return t;
  }
  std::vector<uint64_t> some_stored(size_t g, size_t max) {
    std::vector<uint64_t> ids;
    std::vector<uint64_t> all(stored_[g].begin(), stored_[g].end());
    for (size_t i = 0, n = in_.u8() % (max + 1); i < n && !all.empty(); ++i) ids.push_back(all[in_.u8() % all.size()]);
    return ids;
  }
  Gen usable(Event e, Layout l) { return Gen{single(e, l), std::move(e), true}; }

  Gen store() {
    const size_t g = in_.u8() % 2;  // group 0 (unnamed), or group 2 named full_attention
    BlockStored s;
    const size_t blocks = 1 + in_.u8() % 3;
    if (!stored_[g].empty() && in_.u8() % 2) {
      auto p = some_stored(g, 1);
      s.parent_block_hash = p.empty() ? *stored_[g].begin() : p[0];
    }
    for (size_t b = 0; b < blocks; ++b)
      s.block_hashes.push_back(in_.u8() % 5 == 0 && !stored_[g].empty() ? *stored_[g].begin() : next_id_++);
    s.token_ids = tokens(blocks * 16);
    s.block_size = 16;
    s.medium = in_.u8() % 3 ? std::optional<std::string>("GPU") : std::nullopt;
    if (const uint8_t a = in_.u8() % 3) {
      s.lora_name = a == 1 ? "a" : "b";
      s.lora_id = a;
    }
    if (g == 1) {
      s.group_idx = 2;
      s.kv_cache_spec_kind = "full_attention";
      group2_named_ = true;
    }
    for (uint64_t id : s.block_hashes) stored_[g].insert(id);
    return usable(std::move(s), layout_);
  }
  Gen remove() {
    const size_t g = group2_named_ ? in_.u8() % 2 : 0;  // a group not yet named would be skipped
    BlockRemoved r{some_stored(g, 3), std::string("GPU"), g ? std::optional<uint32_t>(2) : std::nullopt};
    if (in_.u8() % 4 == 0) r.block_hashes.push_back(777777);  // never stored
    for (uint64_t id : r.block_hashes) stored_[g].erase(id);
    return usable(std::move(r), layout_);
  }
  Gen clear() {
    stored_[0].clear();
    stored_[1].clear();
    return usable(AllBlocksCleared{}, layout_);
  }

  Gen unusable(uint8_t k) {
    auto ids = some_stored(0, 3);
    if (ids.empty()) ids.push_back(1);
    const bool map = layout_ != Layout::kArrays;
    switch (k) {
      case 6: {  // undecodable: unknown tag
        std::string w = map ? "\x81" + str("type") + str("BlockMigrated") : "\x91" + str("BlockMigrated");
        return Gen{w, std::nullopt, false};
      }
      case 7: {  // undecodable: a token id that is not one (-1), or hashes that are a string
        std::string w;
        if (in_.u8() % 2)
          w = map ? "\x87" + str("type") + str("BlockStored") + str("block_hashes") + "\x91\x01" +
                        str("parent_block_hash") + "\xc0" + str("token_ids") + "\x91\xff" + str("block_size") + "\x10" +
                        str("lora_id") + "\xc0" + str("medium") + "\xc0"
                  : "\x97" + str("BlockStored") + "\x91\x01\xc0\x91\xff\x10\xc0\xc0";
        else
          w = map ? "\x82" + str("type") + str("BlockRemoved") + str("block_hashes") + str("nope")
                  : "\x92" + str("BlockRemoved") + str("nope");
        return Gen{w, std::nullopt, false};
      }
      case 8: {  // a copy on a medium the router has no tier for: a store (with tokens, or a placeholder) or a removal
        Event e;
        const uint8_t f = in_.u8() % 3;
        if (f == 0) e = BlockStored{ids, std::nullopt, {}, 0, {}, std::string("OBJECT_STORE")};
        else if (f == 1)
          e = BlockStored{ids, std::nullopt, tokens(ids.size() * 16), 16, {}, std::string("OBJECT_STORE")};
        else e = BlockRemoved{ids, std::string("OBJECT_STORE")};
        return Gen{single(e, layout_), e, false};
      }
      case 9: {  // a device placeholder for stored ids
        Event e =
            BlockStored{ids, std::nullopt, {}, static_cast<uint32_t>(in_.u8() % 2 ? 0 : 16), {}, std::string("GPU")};
        return Gen{single(e, layout_), e, false};
      }
      case 10: {  // the sliding-window group stores and evicts the same engine ids
        BlockStored s{ids, std::nullopt, tokens(ids.size() * 16), 16, {}, std::string("GPU")};
        s.group_idx = 1;
        s.kv_cache_spec_kind = "sliding_window";
        s.kv_cache_spec_sliding_window = 128;
        Event e = s;
        if (in_.u8() % 2) e = BlockRemoved{ids, std::string("GPU"), in_.u8() % 2 ? 1u : 9u};  // learned, or never named
        return Gen{single(e, layout_), e, false};
      }
      case 11: {  // an adapter known only by id
        Event e = BlockStored{ids, std::nullopt, tokens(ids.size() * 16), 16, 4, std::string("GPU")};
        return Gen{single(e, layout_), e, false};
      }
      case 12: {  // token ids that do not make the blocks
        Event e =
            BlockStored{ids, std::nullopt, tokens(ids.size() * 16 - 1 - in_.u8() % 15), 16, {}, std::string("GPU")};
        return Gen{single(e, layout_), e, false};
      }
      default: {  // continues a block never stored
        Event e = BlockStored{ids, 900000 + in_.u8(), tokens(ids.size() * 16), 16, {}, std::string("GPU")};
        return Gen{single(e, layout_), e, false};
      }
    }
  }

  Bytes& in_;
  Layout layout_;
  uint64_t next_id_ = 100;
  std::set<uint64_t> stored_[2];  // group 0, group 2: ids the usable events stored and did not remove
  bool group2_named_ = false;     // a usable store named group 2's kind
};

std::string array_header(size_t n) {
  if (n < 16) return std::string(1, static_cast<char>(0x90 | n));
  return std::string{static_cast<char>(0xdc), static_cast<char>(n >> 8), static_cast<char>(n & 0xff)};
}

std::string batch_bytes(const std::vector<Gen>& events, Layout layout) {
  std::string out;
  const std::string ts = std::string("\xcb") + std::string(8, '\0');  // 0.0 as float64
  if (layout == Layout::kMaps) out = "\x82" + str("ts") + ts + str("events");
  else out = "\x92" + ts;
  out += array_header(events.size());
  for (const Gen& g : events) out += g.wire;
  return out;
}

std::string canonical(const Event& e) { return single(e, Layout::kArrays); }

dyn::route::RouterConfig router_config(uint32_t bs) {
  dyn::route::RouterConfig c;
  c.block_size = bs;
  c.mode = dyn::route::Mode::kKv;
  c.kv_events = true;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  const uint32_t router_bs = in.u8() % 2 ? 16 : 8;
  const Layout layout = static_cast<Layout>(in.u8() % 3);
  Generator gen(in, layout);
  dyn::FakeClock clock;
  dyn::route::Router mixed_router(router_config(router_bs), clock), clean_router(router_config(router_bs), clock);
  FUZZ_CHECK(!mixed_router.add_worker({0, 0, 0}) && !clean_router.add_worker({0, 0, 0}));
  Adapters adapters_m, adapters_c;
  WorkerFeed mixed(router_bs, &adapters_m), clean(router_bs, &adapters_c);
  Translator tm(router_bs), tc(router_bs);
  uint64_t unusable = 0;
  const auto accept = [](uint32_t) { return true; };
  const auto ignore = [](const std::string&) {};
  while (!in.done()) {
    std::vector<Gen> events(in.u8() % 20);
    for (auto& g : events) g = gen.next();
    auto d = decode_batch(batch_bytes(events, layout));
    FUZZ_CHECK(d.ok());
    // Exactly the undecodable events are rejected, with their index; the others decode as generated.
    size_t e = 0, r = 0;
    EventBatch usable_only;
    for (size_t i = 0; i < events.size(); ++i) {
      if (!events[i].event) {
        FUZZ_CHECK(r < d->rejected.size() && d->rejected[r].index == i && !d->rejected[r].reason.empty());
        ++r;
        continue;
      }
      FUZZ_CHECK(e < d->events.size() && canonical(d->events[e]) == canonical(*events[i].event));
      ++e;
      if (events[i].usable) usable_only.events.push_back(*events[i].event);
    }
    FUZZ_CHECK(e == d->events.size() && r == d->rejected.size());
    for (const Gen& g : events) unusable += !g.usable;
    // The usable events alone, never encoded, in a translator of their own.
    std::vector<IndexUpdate> um, uc;
    for (const Event& ev : d->events) tm.translate(ev, um);
    for (const Event& ev : usable_only.events) FUZZ_CHECK(!tc.translate(ev, uc));
    FUZZ_CHECK(um.size() == uc.size());
    for (size_t i = 0; i < um.size(); ++i)
      FUZZ_CHECK(um[i].kind == uc[i].kind && um[i].medium == uc[i].medium &&
                 um[i].sequence_hashes == uc[i].sequence_hashes);
    FUZZ_CHECK(tm.known_blocks() == tc.known_blocks());
    mixed.apply(
        *d, [&](std::span<const dyn::route::KvEvent> evs) { mixed_router.apply_kv_events(0, evs); }, accept, ignore);
    clean.apply(
        usable_only, [&](std::span<const dyn::route::KvEvent> evs) { clean_router.apply_kv_events(0, evs); }, accept,
        ignore);
  }
  uint64_t skipped = 0;
  for (const auto& n : mixed.counts().skipped) skipped += n;
  FUZZ_CHECK(skipped == unusable);
  for (const auto& n : clean.counts().skipped) FUZZ_CHECK(n == 0);
  FUZZ_CHECK(mixed.counts().engine_blocks == clean.counts().engine_blocks);
  FUZZ_CHECK(mixed_router.loads().at(0).cached_blocks == clean_router.loads().at(0).cached_blocks);
  // The adapters learned are those of usable stores only.
  for (std::string_view a : {"a", "b"}) FUZZ_CHECK(adapters_m.seed_for(a) == adapters_c.seed_for(a));
  return 0;
}
