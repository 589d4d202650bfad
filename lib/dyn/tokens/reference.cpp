// Pooled reference caches (LRU and Belady's MIN) for prefix-cache hit-rate yardsticks.
#include "dyn/tokens/reference.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>

#include "dyn/kv/flat_map.h"

namespace dyn::tokens {

uint64_t reference_hit_tokens(std::span<const ReferenceRequest> requests, uint64_t capacity_blocks, uint32_t block_size,
                              ReferencePolicy policy) {
  const size_t n = requests.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return requests[a].start_ms < requests[b].start_ms; });
  const bool belady = policy == ReferencePolicy::kBelady;
  constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();
  // Belady: for every request (by rank in start order) and block position, the rank of the next
  // request that uses the block again (kNever: none), from one backward pass.
  std::vector<size_t> first(n + 1, 0);  // rank -> offset of its blocks in next_use
  std::vector<uint32_t> next_use;
  if (belady) {
    for (uint32_t rank = 0; rank < n; ++rank) first[rank + 1] = first[rank] + requests[order[rank]].blocks.size();
    next_use.assign(first[n], kNever);
    kv::FlatMap later;  // block -> the latest rank seen so far going backwards
    for (uint32_t rank = static_cast<uint32_t>(n); rank-- > 0;) {
      const auto& blocks = requests[order[rank]].blocks;
      for (size_t j = 0; j < blocks.size(); ++j) {
        const uint32_t seen = later.find(blocks[j]);
        next_use[first[rank] + j] = seen == kv::FlatMap::kEmpty ? kNever : seen;
        if (seen != kv::FlatMap::kEmpty) later.erase(blocks[j]);
        later.insert(blocks[j], rank);
      }
    }
  }

  struct Block {
    uint64_t hash = 0;
    uint32_t refs = 0;
    uint32_t depth = 0;
    uint32_t next = kNever;  // Belady: rank of its next use after the latest one
    double prio = 0;         // while unpinned: evicted smallest first
  };
  std::vector<Block> slab;  // grows to capacity_blocks; an evicted block's slot takes the new one
  kv::FlatMap where;        // block hash -> slab slot
  // Unpinned blocks by (prio, deeper first, slot): LRU prio = the time it was last released;
  // Belady prio = -(rank of its next use), so the furthest next use (or none) goes first.
  using Key = std::tuple<double, int64_t, uint32_t>;
  std::set<Key> evictable;
  auto key = [&](uint32_t slot) {
    const Block& b = slab[slot];
    return Key{b.prio, -static_cast<int64_t>(b.depth), slot};
  };

  std::vector<uint32_t> held(n, 0);  // leading blocks each request (by index) holds
  using End = std::pair<double, uint32_t>;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  auto release = [&](uint32_t i) {
    const ReferenceRequest& r = requests[i];
    for (uint32_t j = 0; j < held[i]; ++j) {
      const uint32_t slot = where.find(r.blocks[j]);
      Block& b = slab[slot];
      if (--b.refs) continue;
      b.prio = belady ? (b.next == kNever ? -std::numeric_limits<double>::infinity() : -static_cast<double>(b.next))
                      : r.end_ms;
      evictable.insert(key(slot));
    }
  };

  uint64_t hit_tokens = 0;
  for (uint32_t rank = 0; rank < n; ++rank) {
    const uint32_t i = order[rank];
    const ReferenceRequest& r = requests[i];
    while (!ends.empty() && ends.top().first <= r.start_ms) {
      release(ends.top().second);
      ends.pop();
    }
    uint64_t hit = 0;
    bool leading = true;
    uint32_t j = 0;
    for (; j < r.blocks.size(); ++j) {
      const uint64_t h = r.blocks[j];
      const uint32_t next = belady ? next_use[first[rank] + j] : kNever;
      if (uint32_t slot = where.find(h); slot != kv::FlatMap::kEmpty) {
        if (leading) ++hit;
        if (slab[slot].refs++ == 0) evictable.erase(key(slot));
        slab[slot].next = next;
        continue;
      }
      leading = false;
      uint32_t slot;
      if (where.size() >= capacity_blocks) {
        if (evictable.empty()) break;  // every block is pinned: the rest of this prompt is not cached
        slot = std::get<2>(*evictable.begin());
        evictable.erase(evictable.begin());
        where.erase(slab[slot].hash);
      } else {
        slot = static_cast<uint32_t>(slab.size());
        slab.emplace_back();
      }
      slab[slot] = Block{h, 1, j, next, 0};
      where.insert(h, slot);
    }
    held[i] = j;
    hit_tokens += std::min<uint64_t>(hit * block_size, r.input_tokens);
    ends.emplace(std::max(r.end_ms, r.start_ms), i);
  }
  return hit_tokens;
}

}  // namespace dyn::tokens
