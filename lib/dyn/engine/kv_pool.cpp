// KV block pool: refcounts, hashed-block cache with an intrusive LRU list, KV events.
#include "dyn/engine/kv_pool.h"

#include <cassert>

namespace dyn::engine {

KvPool::KvPool(uint64_t capacity, bool record_events)
    : capacity_(capacity), record_events_(record_events) {
  map_.reserve(static_cast<size_t>(capacity < (1u << 20) ? capacity : (1u << 20)));
}

KvPool::~KvPool() = default;

size_t KvPool::match_prefix(std::span<const uint64_t> hashes) const {
  size_t n = 0;
  for (uint64_t h : hashes) {
    if (!map_.count(h)) break;
    ++n;
  }
  return n;
}

bool KvPool::is_inactive(uint64_t hash) const {
  auto it = map_.find(hash);
  return it != map_.end() && it->second.refs == 0;
}

bool KvPool::acquire(uint64_t hash) {
  auto it = map_.find(hash);
  if (it == map_.end()) return false;
  Entry& e = it->second;
  if (e.refs == 0) {
    lru_unlink(&e);
    --inactive_count_;
    ++active_hashed_;
  }
  ++e.refs;
  return true;
}

bool KvPool::make_room(uint64_t n) {
  if (available() < n) return false;
  while (free() < n) evict_one();
  return true;
}

void KvPool::insert(uint64_t hash, std::optional<uint64_t> parent) {
  assert(free() > 0);
  auto [it, fresh] = map_.try_emplace(hash);
  assert(fresh);
  (void)fresh;
  it->second.hash = hash;
  it->second.refs = 1;
  ++active_hashed_;
  event_stored(hash, parent);
}

void KvPool::release(uint64_t hash, bool cache) {
  auto it = map_.find(hash);
  if (it == map_.end() || it->second.refs == 0) return;
  Entry& e = it->second;
  if (--e.refs > 0) return;
  --active_hashed_;
  if (!cache) {
    event_removed(hash);
    map_.erase(it);
    return;
  }
  lru_push(&e);
  ++inactive_count_;
}

void KvPool::evict_one() {
  Entry* e = lru_head_;
  assert(e);
  lru_unlink(e);
  --inactive_count_;
  ++evictions_;
  uint64_t h = e->hash;
  event_removed(h);
  map_.erase(h);
}

void KvPool::lru_push(Entry* e) {
  e->next = nullptr;
  e->prev = lru_tail_;
  if (lru_tail_) lru_tail_->next = e;
  else lru_head_ = e;
  lru_tail_ = e;
}

void KvPool::lru_unlink(Entry* e) {
  if (e->prev) e->prev->next = e->next;
  else lru_head_ = e->next;
  if (e->next) e->next->prev = e->prev;
  else lru_tail_ = e->prev;
  e->prev = e->next = nullptr;
}

void KvPool::event_stored(uint64_t hash, std::optional<uint64_t> parent) {
  if (!record_events_) return;
  // Coalesce a chain of stores into one event, as a router applies them in order.
  if (!events_.empty() && events_.back().kind == KvEvent::Kind::kStored && parent &&
      events_.back().block_hashes.back() == *parent) {
    events_.back().block_hashes.push_back(hash);
    return;
  }
  events_.push_back({KvEvent::Kind::kStored, {hash}, parent});
}

void KvPool::event_removed(uint64_t hash) {
  if (!record_events_) return;
  if (!events_.empty() && events_.back().kind == KvEvent::Kind::kRemoved) {
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
