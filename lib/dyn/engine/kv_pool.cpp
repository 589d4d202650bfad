// KV block pool: refcounts, hashed-block cache with an intrusive LRU list, KV events.
#include "dyn/engine/kv_pool.h"

#include <sys/mman.h>

#include <cassert>
#include <utility>

namespace dyn::engine {

KvPool::KvPool(uint64_t capacity, bool record_events, bool track_owners, bool by_rank)
    : capacity_(capacity),
      record_events_(record_events),
      track_owners_(track_owners),
      by_rank_(by_rank),
      slab_(capacity),
      parents_(capacity) {
  // The slab is reserved whole and becomes resident as blocks arrive (a pool of millions of
  // blocks should not cost memory up front, nor should a thousand simulated workers' pools before
  // their blocks arrive: issue 54). The table has its final size at once, at most half full when
  // the pool is: it never rehashes (growing it by doubling was 13 % of a 1,000-worker
  // simulation's page faults and each worker's table was filed again 11 times).
  size_t buckets = 16;
  while (buckets < 2 * capacity) buckets <<= 1;
  table_ = ReservedArray<Cell>(buckets);
  table_.grow_zeroed(buckets);
  // Lookups read cells before inserts write them: on an untouched page that is a fault mapping
  // the zero page, then a second one at the first write (a thousand lazily mapped tables took 29k
  // more faults than tables grown on the heap). A table of at most 1 MiB (65,536 blocks) is made
  // resident at once, in one call without a trap per page; a larger one stays lazy. Best effort:
  // a kernel without MADV_POPULATE_WRITE (Linux 5.14) leaves it lazy.
  if (buckets * sizeof(Cell) <= (size_t{1} << 20)) ::madvise(&table_[0], buckets * sizeof(Cell), MADV_POPULATE_WRITE);
  parents_.grow_zeroed(capacity);
  mask_ = buckets - 1;
  shift_ = 64;
  for (size_t b = buckets; b > 1; b >>= 1) --shift_;
}

KvPool::~KvPool() = default;

uint32_t KvPool::find_slot(uint64_t hash) const {
  const auto tag = static_cast<uint32_t>(scramble(hash) >> 32);
  for (size_t i = bucket(hash);; i = (i + 1) & mask_) {
    const Cell& c = table_[i];
    if (c.slot1 == 0) return kNil;
    if (c.tag == tag && slab_[c.slot1 - 1].hash == hash) return c.slot1 - 1;
  }
}

void KvPool::table_erase(uint64_t hash, uint32_t slot) {
  size_t i = bucket(hash);
  while (table_[i].slot1 != slot + 1) i = (i + 1) & mask_;
  // Backward-shift deletion keeps probe chains intact without tombstones.
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (table_[j].slot1 == 0) break;
    size_t h = home(table_[j]);
    // Move j into the hole at i when its home is not in (i, j] (cyclically).
    bool in_range = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (!in_range) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i] = Cell{};
}

size_t KvPool::match_prefix(std::span<const uint64_t> hashes) const {
  size_t n = 0;
  for (; n < hashes.size(); ++n) {
    if (n + 8 < hashes.size()) prefetch(hashes[n + 8]);
    if (n + 4 < hashes.size()) prefetch_entry(hashes[n + 4]);
    if (find_slot(hashes[n]) == kNil) break;
  }
  return n;
}

bool KvPool::is_inactive(uint64_t hash) const {
  uint32_t e = find_slot(hash);
  return e != kNil && slab_[e].refs == 0;
}

bool KvPool::acquire(uint64_t hash) {
  uint32_t e = find_slot(hash);
  if (e == kNil) return false;
  acquire_slot(e);
  return true;
}

void KvPool::acquire_slot(uint32_t e) {
  if (slab_[e].refs == 0) {
    lru_unlink(e);
    --inactive_count_;
    ++active_hashed_;
  }
  ++slab_[e].refs;
}

bool KvPool::make_room(uint64_t n) {
  if (available() < n) return false;
  // Evictions walk the eviction order from its head, each victim's table cell a likely cache
  // miss (a thousand simulated pools do not fit in any cache; table_erase stalled on it for 62 %
  // of its samples with the cell loaded one victim ahead, issue 54): a second walker runs
  // kAhead victims ahead along the same list and loads their cells. It only reads links (an
  // evicted entry's are kNil), so where it strays (the list ends, the next one begins) it merely
  // stops helping.
  constexpr uint64_t kAhead = 8;
  uint32_t ahead = victim();
  for (uint64_t d = 0; d < kAhead && d + free() < n && ahead != kNil; ++d) {
    prefetch(slab_[ahead].hash);
    ahead = slab_[ahead].next;
  }
  while (free() < n) {
    if (ahead != kNil) {
      prefetch(slab_[ahead].hash);
      ahead = slab_[ahead].next;
      if (ahead != kNil) __builtin_prefetch(&slab_[ahead]);  // read next round
    }
    evict_one(victim());
  }
  return true;
}

uint32_t KvPool::insert(uint64_t hash, std::optional<uint64_t> parent) {
  assert(free() > 0 && find_slot(hash) == kNil);
  uint32_t e;
  if (!free_slots_.empty()) {
    e = free_slots_.back();
    free_slots_.pop_back();
  } else {
    e = static_cast<uint32_t>(slab_.size());
    slab_.push_back(Entry{});
  }
  slab_[e] = Entry{hash, 1, kNil, kNil, 0, parent.has_value()};
  if (evict_hook_ && parent) parents_[e] = *parent;
  if (!pins_.empty()) slab_[e].pinned = pins_.count(hash) != 0;  // a lease outlives an eviction
  if (track_owners_) {
    if (owners_.size() <= e) owners_.resize(e + 1);
    owners_[e] = kUnclaimed;
  }
  if (by_rank_) {
    if (ranks_.size() <= e) ranks_.resize(e + 1);
    ranks_[e] = INT64_MIN;  // the inserting request's claim() sets it
  }
  size_t i = bucket(hash);
  while (table_[i].slot1 != 0) i = (i + 1) & mask_;
  table_[i] = Cell{e + 1, static_cast<uint32_t>(scramble(hash) >> 32)};
  ++hashed_;
  ++active_hashed_;
  event_stored(hash, parent);
  return e;
}

void KvPool::release(uint64_t hash, bool cache) {
  uint32_t e = find_slot(hash);
  if (e == kNil || slab_[e].refs == 0) return;
  release_slot(e, cache);
}

void KvPool::release_slot(uint32_t e, bool cache, bool first_out) {
  assert(slab_[e].refs > 0);
  if (--slab_[e].refs > 0) return;
  --active_hashed_;
  if (!cache) {
    event_removed(slab_[e].hash);
    table_erase(slab_[e].hash, e);
    free_slots_.push_back(e);
    --hashed_;
    return;
  }
  lru_push(e, list_for(e, first_out));
  ++inactive_count_;
}

void KvPool::pin(uint64_t hash) {
  if (pins_[hash]++ > 0) return;
  const uint32_t e = find_slot(hash);
  if (e == kNil) return;
  slab_[e].pinned = true;
  if (slab_[e].refs == 0) {
    lru_unlink(e);
    lru_push(e, kPinnedList);
  }
}

void KvPool::unpin(uint64_t hash, bool first_out) {
  auto it = pins_.find(hash);
  if (it == pins_.end() || --it->second > 0) return;
  pins_.erase(it);
  const uint32_t e = find_slot(hash);
  if (e == kNil) return;
  slab_[e].pinned = false;
  if (slab_[e].refs == 0) {
    lru_unlink(e);
    lru_push(e, list_for(e, first_out), /*front=*/true);
  }
}

bool KvPool::evict_first(uint64_t hash) {
  const uint32_t e = find_slot(hash);
  if (e == kNil || slab_[e].refs > 0 || slab_[e].pinned) return false;
  lru_unlink(e);
  lru_push(e, kFirstOutList);
  return true;
}

bool KvPool::evict_now(uint64_t hash) {
  const uint32_t e = find_slot(hash);
  if (e == kNil || slab_[e].refs > 0 || slab_[e].pinned) return false;
  lru_unlink(e);
  lru_push(e, kFirstOutList, /*front=*/true);  // the victim
  evict_one(e);
  return true;
}

void KvPool::evict_one(uint32_t e) {
  assert(e != kNil && e == victim());
  lru_unlink(e);
  --inactive_count_;
  ++evictions_;
  if (slab_[e].pinned) ++pinned_evictions_;
  const uint64_t h = slab_[e].hash;
  if (evict_hook_) evict_hook_(h, slab_[e].has_parent ? std::optional<uint64_t>(parents_[e]) : std::nullopt);
  event_removed(h);
  table_erase(h, e);
  free_slots_.push_back(e);
  --hashed_;
}

// Inlined into their callers: a call per released block was 1 % of a --sim run's instructions.
__attribute__((always_inline)) inline void KvPool::lru_push(uint32_t e, uint8_t list, bool front) {
  Ends& l = list == kRankList ? rank_list(e) : lists_[list];
  slab_[e].list = list;
  if (front) {  // as the oldest block of its list
    slab_[e].prev = kNil;
    slab_[e].next = std::exchange(l.head, e);
    (slab_[e].next != kNil ? slab_[slab_[e].next].prev : l.tail) = e;
    return;
  }
  slab_[e].next = kNil;
  slab_[e].prev = l.tail;
  if (l.tail != kNil) slab_[l.tail].next = e;
  else l.head = e;
  l.tail = e;
}

__attribute__((always_inline)) inline void KvPool::lru_unlink(uint32_t e) {
  if (slab_[e].list == kRankList) return rank_unlink(e);
  unlink_from(lists_[slab_[e].list], e);
}

// Out of line, as is rank_unlink(): the LRU-only pool's hot path stays as small as it was
// (inlined, a map lookup cost 2 % of a --sim run's instructions with by_rank off).
__attribute__((noinline)) KvPool::Ends& KvPool::rank_list(uint32_t e) { return ranked_[ranks_[e]]; }

__attribute__((noinline)) void KvPool::rank_unlink(uint32_t e) {
  auto it = ranked_.find(ranks_[e]);
  unlink_from(it->second, e);
  if (it->second.head == kNil) ranked_.erase(it);  // victim() wants no empty list
}

__attribute__((always_inline)) inline void KvPool::unlink_from(Ends& l, uint32_t e) {
  Entry& x = slab_[e];
  if (x.prev != kNil) slab_[x.prev].next = x.next;
  else l.head = x.next;
  if (x.next != kNil) slab_[x.next].prev = x.prev;
  else l.tail = x.prev;
  x.prev = x.next = kNil;
}

void KvPool::event_stored(uint64_t hash, std::optional<uint64_t> parent) {
  if (!record_events_) return;
  // Coalesce a chain of stores into one event, as a router applies them in order.
  if (!events_.empty() && events_.back().kind == KvEvent::Kind::kStored && events_.back().tier == Tier::kG1 && parent &&
      events_.back().block_hashes.back() == *parent) {
    events_.back().block_hashes.push_back(hash);
    return;
  }
  events_.push_back({KvEvent::Kind::kStored, {hash}, parent});
}

void KvPool::event_removed(uint64_t hash) {
  if (!record_events_) return;
  if (!events_.empty() && events_.back().kind == KvEvent::Kind::kRemoved && events_.back().tier == Tier::kG1) {
    events_.back().block_hashes.push_back(hash);
    return;
  }
  events_.push_back({KvEvent::Kind::kRemoved, {hash}, std::nullopt});
}

std::vector<KvEvent> KvPool::take_events() {
  std::vector<KvEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace dyn::engine
