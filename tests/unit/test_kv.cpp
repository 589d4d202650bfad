// Unit tests for lib/dyn/kv: prefix overlaps, TTL, LRU budget pruning, KV events, the flat map and set.
#include <doctest/doctest.h>

#include <algorithm>
#include <list>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "dyn/kv/block_event.h"
#include "dyn/kv/flat_map.h"
#include "dyn/kv/prefix_index.h"

using namespace dyn::kv;

TEST_CASE("flat map matches std::unordered_map under random insert/find_or_insert/erase/erase_at") {
  FlatMap m;
  std::unordered_map<uint64_t, uint32_t> ref;
  std::mt19937_64 g(7);
  for (int i = 0; i < 200000; ++i) {
    uint64_t k = g() % 5000;  // small key space: many collisions and erasures
    if (g() % 3 == 0) {
      // erase, or erase_at through the value's cell when present (the prefix index's path)
      if (uint32_t* v = m.find_ptr(k); v && g() % 2 == 0) m.erase_at(v);
      else m.erase(k);
      ref.erase(k);
    } else if (g() % 2 == 0) {
      // find_or_insert: the present value, or kEmpty after inserting.
      auto it = ref.find(k);
      const uint32_t was = m.find_or_insert(k, static_cast<uint32_t>(i));
      CHECK(was == (it == ref.end() ? FlatMap::kEmpty : it->second));
      if (it == ref.end()) ref[k] = static_cast<uint32_t>(i);
    } else if (!ref.count(k)) {
      m.insert(k, static_cast<uint32_t>(i));
      ref[k] = static_cast<uint32_t>(i);
    }
  }
  CHECK(m.size() == ref.size());
  for (uint64_t k = 0; k < 5000; ++k) CHECK(m.find(k) == (ref.count(k) ? ref[k] : FlatMap::kEmpty));
}

TEST_CASE("holder map matches a map of (key, worker) pairs under random find_or_insert/erase") {
  HolderMap m;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> ref;  // (key, worker) -> entry
  std::mt19937_64 g(11);
  for (uint32_t i = 0; i < 200000; ++i) {
    const uint64_t k = g() % 3000;                   // few keys: long runs of one key's holders
    const auto w = static_cast<uint32_t>(g() % 12);  // several holders a key
    if (g() % 3 == 0) {
      m.erase(k, w);
      ref.erase({k, w});
      continue;
    }
    bool inserted = false;
    const HolderMap::Cell* c = m.find_or_insert(k, w, i, &inserted);
    auto it = ref.find({k, w});
    CHECK(inserted == (it == ref.end()));
    CHECK(c->entry == (it == ref.end() ? i : it->second));
    if (inserted) ref[{k, w}] = i;
  }
  CHECK(m.size() == ref.size());
  std::set<uint64_t> keys;
  for (const auto& [kw, e] : ref) keys.insert(kw.first);
  CHECK(m.distinct() == keys.size());
  for (uint64_t k = 0; k < 3000; ++k) {
    std::map<uint32_t, uint32_t> got;  // worker -> entry, as for_each gives them
    m.for_each(k, [&](const HolderMap::Cell& c) { CHECK(got.emplace(c.worker, c.entry).second); });
    for (uint32_t w = 0; w < 12; ++w) {
      auto it = ref.find({k, w});
      const HolderMap::Cell* c = m.find(k, w);
      REQUIRE((c != nullptr) == (it != ref.end()));
      if (c) {
        CHECK(c->entry == it->second);
        CHECK(got[w] == it->second);
      }
    }
    CHECK(got.size() ==
          static_cast<size_t>(std::count_if(ref.begin(), ref.end(), [&](auto& x) { return x.first.first == k; })));
  }
}

TEST_CASE("mask map: update_all clears a bit everywhere and erases the cells it empties") {
  FlatMaskMap m;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 g(5);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = g() % 3000, bit = uint64_t{1} << (g() % 4);
    bool inserted = false;
    uint64_t* v = m.find_or_insert_ptr(k, bit, &inserted);
    if (!inserted) *v |= bit;
    ref[k] |= bit;
  }
  for (uint64_t bit = 1; bit < 16; bit <<= 1) {  // down to an empty table, through every wrap
    m.update_all([&](uint64_t, uint64_t& v) { v &= ~bit; });
    for (auto it = ref.begin(); it != ref.end();) {
      it->second &= ~bit;
      it = it->second ? std::next(it) : ref.erase(it);
    }
    CHECK(m.size() == ref.size());
    for (const auto& [k, v] : ref) CHECK(m.find(k) == v);
  }
  CHECK(m.size() == 0);
}

TEST_CASE("mask map: batches inserted after reserve() match std::unordered_map, growth included") {
  // The event-fed index's store path: reserve room for an event's blocks, then insert each with
  // no growth check; the batches cross several doublings, with erasures between them.
  FlatMaskMap m;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 g(11);
  for (int batch = 0; batch < 2000; ++batch) {
    const size_t n = 1 + g() % 40;
    m.reserve(m.size() + n);
    for (size_t j = 0; j < n; ++j) {
      const uint64_t k = g() % 20000, bit = uint64_t{1} << (g() % 64);
      bool inserted = false;
      uint64_t* v = m.find_or_insert_reserved(k, bit, &inserted);
      CHECK(inserted == (ref.count(k) == 0));
      if (!inserted) *v |= bit;
      ref[k] |= bit;
    }
    for (size_t j = 0; j < n / 3; ++j) {
      const uint64_t k = g() % 20000;
      if (uint64_t* v = m.find_ptr(k)) m.erase_at(v);
      ref.erase(k);
    }
  }
  CHECK(m.size() == ref.size());
  for (uint64_t k = 0; k < 20000; ++k) CHECK(m.find(k) == (ref.count(k) ? ref[k] : 0));
}

TEST_CASE("flat set matches std::unordered_set, key 0 and growth included") {
  FlatSet s;
  std::unordered_set<uint64_t> ref;
  std::mt19937_64 g(11);
  for (int i = 0; i < 100000; ++i) {
    // Mostly a small key space (repeats), some full-width keys, and 0 (kept outside the table).
    uint64_t k = i % 97 == 0 ? 0 : (g() % 4 == 0 ? g() : g() % 20000);
    CHECK(s.insert(k) == ref.insert(k).second);
  }
  CHECK(s.size() == ref.size());
  for (uint64_t k : ref) CHECK_FALSE(s.insert(k));
}

TEST_CASE("overlap counts leading blocks per worker, stopping at the first miss") {
  PrefixIndex ix(IndexConfig{0, 0, 0.8});
  ix.set_worker_count(3);
  std::vector<uint64_t> a = {11, 12, 13, 14};
  ix.insert(0, a, 0);
  ix.insert(1, std::vector<uint64_t>{11, 12}, 0);
  ix.insert(2, std::vector<uint64_t>{12, 13, 14}, 0);  // no block 0: no prefix match
  std::vector<uint32_t> out(3);
  CHECK(ix.overlaps(a, 0, out) == 4);
  CHECK(out == std::vector<uint32_t>{4, 2, 0});
  std::vector<uint64_t> other = {99, 12};
  CHECK(ix.overlaps(other, 0, out) == 0);
  CHECK(out == std::vector<uint32_t>{0, 0, 0});
  CHECK(ix.blocks(0) == 4);
  CHECK(ix.distinct_blocks() == 4);
}

TEST_CASE("TTL: idle blocks stop counting and are dropped; reuse refreshes them") {
  PrefixIndex ix(IndexConfig{1000, 0, 0.8});
  ix.set_worker_count(1);
  std::vector<uint64_t> a = {1, 2, 3};
  ix.insert(0, a, 0);
  std::vector<uint32_t> out(1);
  ix.overlaps(a, 999, out);
  CHECK(out[0] == 3);
  ix.insert(0, std::vector<uint64_t>{1}, 600);  // block 1 refreshed at 600
  ix.overlaps(a, 1200, out);
  CHECK(out[0] == 1);  // blocks 2, 3 expired at 1000
  ix.expire(1200);
  CHECK(ix.blocks(0) == 1);
  ix.expire(1600);
  CHECK(ix.blocks(0) == 0);
  CHECK(ix.distinct_blocks() == 0);
}

TEST_CASE("budget: prune least recently used to 80 %, leaves before prefixes") {
  PrefixIndex ix(IndexConfig{0, 10, 0.8});
  ix.set_worker_count(1);
  std::vector<uint64_t> a = {1, 2, 3, 4, 5, 6};
  ix.insert(0, a, 0);
  std::vector<uint64_t> b = {1, 2, 30, 40, 50};  // shares 1, 2; total 9 blocks
  ix.insert(0, b, 1);
  CHECK(ix.blocks(0) == 9);
  std::vector<uint64_t> c = {100, 200};  // 11 > 10: prune to 8
  ix.insert(0, c, 2);
  CHECK(ix.blocks(0) == 8);
  std::vector<uint32_t> out(1);
  ix.overlaps(a, 2, out);
  CHECK(out[0] == 3);  // a's deepest leaves 4..6 went first (oldest), its prefix 1, 2, 3 stayed
  ix.overlaps(b, 2, out);
  CHECK(out[0] == 5);
  ix.overlaps(c, 2, out);
  CHECK(out[0] == 2);
}

TEST_CASE("budget: a worker's own budget (its engine's KV size) replaces the index's, 0 restores it") {
  PrefixIndex ix(IndexConfig{0, 10, 0.8});
  ix.set_worker_count(2);
  ix.set_worker_budget(1, 100);
  std::vector<uint64_t> seq;
  for (uint64_t h = 1; h <= 50; ++h) seq.push_back(h);
  ix.insert(0, seq, 0);
  ix.insert(1, seq, 0);
  CHECK(ix.blocks(0) == 8);   // the index's budget 10, pruned to 80 %
  CHECK(ix.blocks(1) == 50);  // its own 100: nothing pruned
  ix.set_worker_budget(1, 20);
  std::vector<uint64_t> more = {1000};
  ix.insert(1, more, 1);
  CHECK(ix.blocks(1) == 16);  // 51 > 20: pruned to 80 % of 20 at the next insert
  ix.set_worker_budget(1, 0);
  ix.insert(1, more, 2);
  CHECK(ix.blocks(1) == 8);  // the index's 10 again: pruned to 8
}

TEST_CASE("events: stored, removed, cleared") {
  PrefixIndex ix(IndexConfig{0, 0, 0.8});
  ix.set_worker_count(2);
  std::vector<uint64_t> s = {5, 6, 7};
  ix.apply_stored(1, s, std::nullopt, 0);
  std::vector<uint32_t> out(2);
  ix.overlaps(s, 1e12, out);  // no TTL in event mode
  CHECK(out == std::vector<uint32_t>{0, 3});
  ix.apply_removed(1, std::vector<uint64_t>{6, 12345});
  ix.overlaps(s, 0, out);
  CHECK(out[1] == 1);
  ix.apply_stored(0, s, std::nullopt, 0);
  ix.clear_worker(1);
  ix.overlaps(s, 0, out);
  CHECK(out == std::vector<uint32_t>{3, 0});
  CHECK(ix.blocks(1) == 0);
}

TEST_CASE("lower tier: tier-exclusive continuation from where the tier above stopped") {
  PrefixIndex host(IndexConfig{0, 0, 0.8});
  host.set_worker_count(3);
  std::vector<uint64_t> s = {1, 2, 3, 4, 5, 6};
  std::vector<uint32_t> out(3, 99);
  // An empty tier: nothing continues, whatever the device runs.
  std::vector<uint32_t> dev = {0, 2, 6};
  host.continue_overlaps(s, 0, dev, out);
  CHECK(out == std::vector<uint32_t>{0, 0, 0});
  // Worker 0 holds 1..3 on host; worker 1 holds 1..5 (blocks 1, 2 also on its GPU: counted once,
  // as device); worker 2 holds all but its device run covers the request.
  host.apply_stored(0, std::vector<uint64_t>{1, 2, 3}, std::nullopt, 0);
  host.apply_stored(1, std::vector<uint64_t>{1, 2, 3, 4, 5}, std::nullopt, 0);
  host.apply_stored(2, s, std::nullopt, 0);
  host.continue_overlaps(s, 0, dev, out);
  CHECK(out == std::vector<uint32_t>{3, 3, 0});
  // A host run starts at the device stop even where the host lacks earlier blocks: worker 0 with a
  // device run of 4 and host blocks 5, 6 only.
  host.apply_removed(0, std::vector<uint64_t>{1, 2, 3});
  host.apply_stored(0, std::vector<uint64_t>{5, 6}, std::nullopt, 0);
  dev = {4, 0, 0};
  host.continue_overlaps(s, 0, dev, out);
  CHECK(out == std::vector<uint32_t>{2, 5, 6});
  // A gap ends a run: worker 1 loses block 3.
  host.apply_removed(1, std::vector<uint64_t>{3});
  host.continue_overlaps(s, 0, dev, out);
  CHECK(out == std::vector<uint32_t>{2, 2, 6});
  host.clear_worker(2);
  host.continue_overlaps(s, 0, dev, out);
  CHECK(out == std::vector<uint32_t>{2, 2, 0});
  // TTL applies as on the device tier (approximate mode): expired blocks do not continue a run.
  PrefixIndex timed(IndexConfig{1000, 0, 0.8});
  timed.set_worker_count(1);
  timed.insert(0, s, 0);
  std::vector<uint32_t> one(1), zero(1, 0);
  timed.continue_overlaps(s, 999, zero, one);
  CHECK(one[0] == 6);
  timed.continue_overlaps(s, 1000, zero, one);
  CHECK(one[0] == 0);
}

TEST_CASE("medium names map to tiers as Dynamo's StorageTier::from_kv_medium") {
  CHECK(tier_of_medium(std::nullopt) == Tier::kDevice);
  CHECK(tier_of_medium("GPU") == Tier::kDevice);
  CHECK(tier_of_medium("CPU") == Tier::kHost);
  CHECK(tier_of_medium("CPU_PINNED") == Tier::kHost);
  CHECK(tier_of_medium("CPU_TIER1") == Tier::kHost);
  CHECK(tier_of_medium("CPU_TIER2") == Tier::kDisk);
  CHECK(tier_of_medium("DISK") == Tier::kDisk);
  CHECK(tier_of_medium("NVME") == Tier::kDisk);
  CHECK(tier_of_medium("EXTERNAL") == Tier::kShared);
  CHECK(!tier_of_medium("TAPE"));
  CHECK(!tier_of_medium("gpu"));
  CHECK(std::string(tier_name(Tier::kHost)) == "CPU_PINNED");
}

// A plain LRU list per worker, as SPEC 3.3 words it: the index must match it exactly (which blocks
// a worker holds after every insert, expiry, prune and removal), also once its touch records have
// been compacted (thousands of refreshes of a few blocks).
TEST_CASE("event-fed index (a bit holder set per block and 64-worker group) matches per-worker sets") {
  // No TTL and no budget: each group of 64 workers keeps bits in one cell per block; a block may be
  // held in several groups, and distinct_blocks() counts it once per group. A second index gets the
  // same events in batches (apply_events, with removals of workers out of range mixed in) and
  // must give the same overlaps. 40 workers: one group; 150: three.
  for (const uint32_t n : {40u, 150u}) {
    PrefixIndex ix(IndexConfig{0, 0, 0.8}), batched(IndexConfig{0, 0, 0.8});
    ix.set_worker_count(n);
    batched.set_worker_count(n);
    std::vector<IndexEvent> batch;
    std::vector<std::vector<uint64_t>> batch_hashes;
    std::vector<std::unordered_set<uint64_t>> ref(n);
    std::mt19937_64 g(21);
    auto chain = [&](size_t len) {
      std::vector<uint64_t> s;
      const uint64_t root = g() % 40;  // few roots: shared prefixes across workers
      for (size_t i = 0; i < len; ++i) s.push_back(root * 1000 + i * 7 + (i > 3 ? g() % 3 : 0));
      return s;
    };
    std::vector<uint32_t> out(n), start(n), cont(n), out_batched(n);
    for (int step = 0; step < 20000; ++step) {
      const uint32_t w = g() % 8 == 0 && n > 70 ? 64 + g() % 6 : g() % n;
      const std::vector<uint64_t> s = chain(1 + g() % 48);  // past the 32 cells prefetched up front
      const uint64_t op = g() % 100;
      batch_hashes.push_back(s);
      if (op < 45) {
        ix.apply_stored(w, s, std::nullopt, step);
        ref[w].insert(s.begin(), s.end());
        batch.push_back(IndexEvent{BlockEvent::Kind::kStored, w, batch_hashes.back()});
      } else if (op < 85) {
        const auto tail = std::span(s).subspan(g() % s.size());
        ix.apply_removed(w, tail);
        for (uint64_t h : tail) ref[w].erase(h);
        batch.push_back(
            IndexEvent{BlockEvent::Kind::kRemoved, w, std::span(batch_hashes.back()).subspan(s.size() - tail.size())});
        if (op % 7 == 0) batch.push_back(IndexEvent{BlockEvent::Kind::kRemoved, n + 3, batch_hashes.back()});
      } else if (op < 86) {
        ix.clear_worker(w);
        ref[w].clear();
        batch.push_back(IndexEvent{BlockEvent::Kind::kCleared, w, {}});
      }
      if (g() % 4 == 0) {  // batches of about four events
        batched.apply_events(batch, step);
        batch.clear();
        batch_hashes.clear();
        batched.overlaps(s, step, out_batched);
        ix.overlaps(s, step, out);
        CHECK(out_batched == out);
        for (uint32_t x = 0; x < n; ++x) CHECK(batched.blocks(x) == ix.blocks(x));
      }
      const uint32_t best = ix.overlaps(s, step, out);
      CHECK(best == *std::max_element(out.begin(), out.end()));
      for (uint32_t x = 0; x < n; ++x) {
        uint32_t k = 0;
        while (k < s.size() && ref[x].count(s[k])) ++k;
        CHECK(out[x] == k);
        start[x] = k;
        CHECK(ix.holds(x, s[0], step) == (ref[x].count(s[0]) > 0));
        CHECK(ix.blocks(x) == ref[x].size());
      }
      // Continued from where it stopped, the same index matches nothing more; from block 0, all.
      ix.continue_overlaps(s, step, start, cont);
      for (uint32_t x = 0; x < n; ++x) CHECK(cont[x] == 0);
      std::fill(start.begin(), start.end(), 0u);
      ix.continue_overlaps(s, step, start, cont);
      CHECK(cont == out);
    }
    size_t per_group = 0;
    for (uint32_t g0 = 0; g0 < n; g0 += 64) {
      std::unordered_set<uint64_t> group;
      for (uint32_t x = g0; x < std::min(n, g0 + 64); ++x) group.insert(ref[x].begin(), ref[x].end());
      per_group += group.size();
    }
    CHECK(ix.distinct_blocks() == per_group);
    for (uint32_t x = 0; x < n; ++x) ix.clear_worker(x);
    CHECK(ix.distinct_blocks() == 0);
  }
}

// Random inserts of prefixes of a few chains (seq[i] identifies chain c's first i + 1 blocks, as a
// sequence hash does) on 3 workers, with removal events when `removals`; after every step w's
// block count, and every 50 steps each chain's overlaps, equal a list-based LRU model's.
static void check_against_lru_model(bool removals, uint64_t max_len, uint64_t budget) {
  const double ttl = 500;
  PrefixIndex ix(IndexConfig{ttl, budget, 0.8});
  ix.set_worker_count(3);
  struct Model {
    std::list<std::pair<uint64_t, double>> lru;  // (hash, last used), most recent first
    std::unordered_map<uint64_t, std::list<std::pair<uint64_t, double>>::iterator> at;
    void drop_oldest() {
      at.erase(lru.back().first);
      lru.pop_back();
    }
  };
  std::vector<Model> model(3);
  std::mt19937_64 g(5);
  double now = 0;
  for (int step = 0; step < 20000; ++step) {
    now += static_cast<double>(g() % 7);
    const auto w = static_cast<uint32_t>(g() % 3);
    Model& m = model[w];
    // Prefixes of a few chains: seq[i] identifies chain c's first i + 1 blocks.
    const uint64_t chain = g() % 6, len = 1 + g() % max_len;
    std::vector<uint64_t> seq;
    for (uint64_t i = 0; i < len; ++i) seq.push_back(chain * 1000 + i + 1);
    if (removals && g() % 10 == 0) {
      ix.apply_removed(w, std::span<const uint64_t>(seq).subspan(len / 2));
      for (size_t i = len / 2; i < len; ++i)
        if (auto it = m.at.find(seq[i]); it != m.at.end()) {
          m.lru.erase(it->second);
          m.at.erase(it);
        }
    } else {
      ix.insert(w, seq, now);
      for (size_t i = len; i-- > 0;) {
        if (auto it = m.at.find(seq[i]); it != m.at.end()) m.lru.erase(it->second);
        m.lru.emplace_front(seq[i], now);
        m.at[seq[i]] = m.lru.begin();
      }
      while (!m.lru.empty() && m.lru.back().second + ttl <= now) m.drop_oldest();
      if (m.lru.size() > budget)
        while (m.lru.size() > static_cast<size_t>(static_cast<double>(budget) * 0.8)) m.drop_oldest();
    }
    REQUIRE(ix.blocks(w) == m.lru.size());
    if (step % 50 == 0) {
      for (uint64_t c = 0; c < 6; ++c) {
        std::vector<uint64_t> q;
        for (uint64_t i = 0; i < max_len; ++i) q.push_back(c * 1000 + i + 1);
        std::vector<uint32_t> out(3);
        ix.overlaps(q, now, out);
        for (uint32_t v = 0; v < 3; ++v) {
          uint32_t want = 0;
          while (want < q.size()) {
            auto it = model[v].at.find(q[want]);
            if (it == model[v].at.end() || it->second->second + ttl <= now) break;
            ++want;
          }
          CHECK(out[v] == want);
        }
      }
    }
  }
}

TEST_CASE("index matches a list-based LRU model under random inserts, TTL, budget and removals") {
  check_against_lru_model(true, 12, 40);  // removals: lookups scan block by block
}

TEST_CASE("jump search: an insert earlier than the last one makes lookups scan every block again") {
  // Block 2's refresh at 500 (before the last insert, 1,600) leaves it expired at 1,700 between a
  // live block 1 and live blocks 3..200: only a block-by-block scan stops at block 2.
  PrefixIndex ix(IndexConfig{1000, 0, 0.8});
  ix.set_worker_count(1);
  std::vector<uint64_t> a(200);
  std::iota(a.begin(), a.end(), uint64_t{1});
  ix.insert(0, a, 1000);
  ix.insert(0, std::vector<uint64_t>{1}, 1600);
  ix.insert(0, std::vector<uint64_t>{1, 2}, 500);
  ix.insert(0, std::vector<uint64_t>{1}, 1600);
  std::vector<uint32_t> out(1);
  CHECK(ix.overlaps(a, 1700, out) == 1);
  CHECK(out[0] == 1);
}

TEST_CASE("jump search: prefix-closed lookups (inserts, TTL, budget only) match the LRU model") {
  // Chains of up to 200 blocks: lookups jump 32 blocks at a time and binary-search a worker's
  // last block between checkpoints; the budget prunes mid-chain.
  check_against_lru_model(false, 200, 400);
}

TEST_CASE("TTL: a held run whose deepest blocks outlived the TTL counts only its live part") {
  // Lookups count held blocks and check the TTL once a worker, at its run's end (issue 54): a
  // worker whose last block expired (not yet dropped: expiry runs at its inserts) is cut back to
  // its refreshed prefix, one whose every block expired to nothing. 200 blocks take the jump
  // search, 40 the block-by-block scan.
  for (const uint32_t n : {200u, 40u}) {
    CAPTURE(n);
    PrefixIndex ix(IndexConfig{1000, 0, 0.8});
    ix.set_worker_count(3);
    std::vector<uint64_t> chain(n);
    std::iota(chain.begin(), chain.end(), uint64_t{1});
    ix.insert(0, chain, 0);
    ix.insert(2, std::span(chain).first(n * 3 / 4), 0);
    ix.insert(0, std::span(chain).first(n / 2 + 1), 500);  // refreshed: blocks 0..n/2 live at 1,200
    ix.insert(1, chain, 500);
    std::vector<uint32_t> out(3);
    CHECK(ix.overlaps(chain, 1200, out) == n);
    CHECK(out == std::vector<uint32_t>{n / 2 + 1, n, 0});
    ix.insert(1, std::vector<uint64_t>{999}, 1600);  // worker 1's chain expires as well
    CHECK(ix.overlaps(chain, 1600, out) == 0);
    CHECK(out == std::vector<uint32_t>{0, 0, 0});
    CHECK(ix.overlaps(std::span(chain).first(n / 2 + 1), 1400, out) == n / 2 + 1);
    CHECK(out == std::vector<uint32_t>{n / 2 + 1, 0, 0});
  }
}

TEST_CASE("jump search: many workers ending between two checkpoints are found by one scan") {
  // 64 workers hold 40..50 blocks of one 200-block chain, worker 64 holds 70 and worker 65 holds
  // 120: all but those two fail the checkpoint at block 64 together (one scan of blocks 33..),
  // each of those two fails a later checkpoint alone (a binary search).
  PrefixIndex ix(IndexConfig{0, 100'000, 0.8});
  ix.set_worker_count(66);
  std::vector<uint64_t> chain(200);
  std::iota(chain.begin(), chain.end(), uint64_t{1});
  auto held = [](uint32_t w) -> uint32_t { return w < 64 ? 40 + w % 11 : w == 64 ? 70 : 120; };
  for (uint32_t w = 0; w < 66; ++w) ix.insert(w, std::span(chain).first(held(w)), w);
  std::vector<uint32_t> out(66);
  CHECK(ix.overlaps(chain, 100, out) == 120);
  for (uint32_t w = 0; w < 66; ++w) CHECK(out[w] == held(w));
}
