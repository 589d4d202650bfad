// PrefixIndex: a flat map from sequence hash to pooled per-worker holder entries, LRU by touch records.
#include "dyn/kv/prefix_index.h"

#include "dyn/kv/block_event.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <stdexcept>

namespace dyn::kv {

PrefixIndex::PrefixIndex(IndexConfig config) : cfg_(config), lru_(config.ttl_ms > 0 || config.budget_blocks > 0) {}

void PrefixIndex::set_worker_count(uint32_t n) {
  for (uint32_t w = n; w < workers_.size(); ++w) clear_worker(w);
  workers_.resize(n);
  if (!lru_) groups_.resize((n + kGroupWorkers - 1) / kGroupWorkers);
}

uint64_t PrefixIndex::distinct_blocks() const {
  uint64_t n = map_.distinct();
  for (const FlatMaskMap& g : groups_) n += g.size();
  return n;
}

void PrefixIndex::record(uint32_t e) {
  Entry& x = entries_[e];
  Worker& wk = workers_[x.worker];
  wk.order.push_back(Touch{e, ++x.gen});
  // Drop what is behind `front`, and the stale records of entries touched again, once they are
  // most of the buffer: memory stays within about twice the live entries.
  if (wk.order.size() >= 1024 && wk.order.size() >= 4 * (wk.count + 1)) {
    size_t k = 0;
    for (size_t i = wk.front; i < wk.order.size(); ++i) {
      const Touch t = wk.order[i];
      if (entries_[t.entry].gen == t.gen) wk.order[k++] = t;
    }
    wk.order.resize(k);
    wk.front = 0;
  }
}

uint32_t PrefixIndex::oldest(uint32_t w) {
  Worker& wk = workers_[w];
  while (wk.front < wk.order.size()) {
    const Touch t = wk.order[wk.front];
    if (entries_[t.entry].gen == t.gen) return t.entry;
    ++wk.front;
  }
  return kNil;
}

void PrefixIndex::remove_entry(uint32_t e) {
  Entry& x = entries_[e];
  map_.erase(x.hash, x.worker);
  --workers_[x.worker].count;
  x.worker = kNil;
  ++x.gen;  // its touch records are stale now
  free_entries_.push_back(e);
}

void PrefixIndex::expire_worker(uint32_t w, double now_ms) {
  if (cfg_.ttl_ms <= 0) return;
  Worker& wk = workers_[w];
  for (uint32_t e; (e = oldest(w)) != kNil && !live(entries_[e], now_ms);) {
    // Expiry walks the records in memory order: the entry 8 records on and the map cell of the
    // one 4 on (its entry asked for 4 rounds ago) start loading now. Stale records only cost a
    // useless prefetch.
    if (wk.front + 8 < wk.order.size()) __builtin_prefetch(&entries_[wk.order[wk.front + 8].entry]);
    if (wk.front + 4 < wk.order.size()) map_.prefetch(entries_[wk.order[wk.front + 4].entry].hash);
    remove_entry(e);
    ++wk.front;
  }
}

void PrefixIndex::prune(uint32_t w) {
  Worker& wk = workers_[w];
  const uint64_t budget = wk.budget ? wk.budget : cfg_.budget_blocks;
  if (budget == 0 || wk.count <= budget) return;
  auto target = static_cast<uint64_t>(static_cast<double>(budget) * cfg_.prune_target_ratio);
  for (uint32_t e; wk.count > target && (e = oldest(w)) != kNil;) {
    remove_entry(e);
    ++wk.front;
  }
}

// Most events and lookups are a few dozen blocks at most: their first kAhead cells start loading
// together, not one after the other, and each step of the loops then asks for the one kAhead on.
// The index is one cache miss per block touched, so the fewer rounds of misses an operation
// waits for, the faster it is (issue 54: 8 -> 32 ahead, about +10 % ops per CPU-second).
constexpr size_t kAhead = 32;
template <class Map>
inline __attribute__((always_inline)) void prefetch_cells(const Map& m, std::span<const uint64_t> seq) {
  for (size_t i = 0; i < seq.size() && i < kAhead; ++i) m.prefetch(seq[i]);
}

void PrefixIndex::apply_bits(std::span<const IndexEvent> events) {
  using Kind = BlockEvent::Kind;
  // One growth check per group and batch, not per block: room for every block the batch stores.
  pending_.assign(groups_.size(), 0);
  for (const IndexEvent& e : events)
    if (e.kind == Kind::kStored) pending_[e.worker / kGroupWorkers] += e.block_hashes.size();
  for (size_t g = 0; g < groups_.size(); ++g)
    if (pending_[g]) groups_[g].reserve(groups_[g].size() + pending_[g]);
  // The prefetch cursor: block *ph of map pm is the next cell to start loading. It runs kAhead
  // blocks ahead of the one applied, across events, so an event's first cells are on their way
  // while the one before it is applied (issue 54: events waited for their own first cell). Its
  // step is one compare while inside an event (it was half of apply_bits' instructions when it
  // looked at the event on every block).
  const size_t n_workers = workers_.size();
  const uint64_t* ph = nullptr;
  const uint64_t* pend = nullptr;
  const FlatMaskMap* pm = nullptr;
  size_t pe = 0;
  auto ahead = [&] {
    while (ph == pend) {  // on to the next event with blocks
      if (pe == events.size()) return false;
      const IndexEvent& e = events[pe++];
      if (e.kind == Kind::kCleared || e.worker >= n_workers) continue;
      ph = e.block_hashes.data();
      pend = ph + e.block_hashes.size();
      pm = &groups_[e.worker / kGroupWorkers];
    }
    pm->prefetch(*ph++);
    return true;
  };
  for (size_t i = 0; i < kAhead && ahead(); ++i) {
  }
  for (const IndexEvent& e : events) {
    if (e.worker >= n_workers) continue;
    if (e.kind == Kind::kCleared) {
      clear_worker(e.worker);
      continue;
    }
    FlatMaskMap& m = groups_[e.worker / kGroupWorkers];
    const uint64_t bit = uint64_t{1} << (e.worker % kGroupWorkers);
    uint64_t changed = 0;  // blocks the worker gained or lost
    if (e.kind == Kind::kStored) {
      for (const uint64_t h : e.block_hashes) {
        ahead();
        bool inserted = false;
        uint64_t* c = m.find_or_insert_reserved(h, bit, &inserted);
        changed += inserted || !(*c & bit);
        *c |= bit;
      }
      workers_[e.worker].count += changed;
      continue;
    }
    for (const uint64_t h : e.block_hashes) {
      ahead();
      uint64_t* c = m.find_ptr(h);
      if (!c || !(*c & bit)) continue;
      ++changed;
      if (*c == bit) m.erase_at(c);  // its last holder: the block leaves the map
      else *c &= ~bit;
    }
    workers_[e.worker].count -= changed;
  }
}

void PrefixIndex::store_blocks(uint32_t w, std::span<const uint64_t> seq, double now_ms) {
  if (!lru_) {
    const IndexEvent e{BlockEvent::Kind::kStored, w, seq};
    apply_bits({&e, 1});
    return;
  }
  // Deepest block first, so block 0 ends up most recent and leaves are evicted before prefixes.
  // Two passes, each one cache miss a block at a known address, so each prefetches kStoreAhead
  // blocks on (issue 54: one pass found the cell, then waited on its entry): the first finds or
  // files each block's map cell and notes its entry; the second refreshes the entries (a new one
  // is filled in there) and appends the touch records, in the same order.
  constexpr size_t kStoreAhead = 16;
  constexpr uint32_t kNew = 0x80000000u;  // touched_ flag: the entry is w's new holder
  const size_t n = seq.size();
  touched_.resize(n);
  for (size_t i = n; i-- > 0;) {
    if (i >= kStoreAhead) map_.prefetch(seq[i - kStoreAhead]);
    const uint32_t fresh = free_entries_.empty() ? static_cast<uint32_t>(entries_.size()) : free_entries_.back();
    if (fresh & kNew) throw std::length_error("PrefixIndex: over 2^31 holder entries");
    bool inserted = false;
    const HolderMap::Cell* c = map_.find_or_insert(seq[i], w, fresh, &inserted);
    if (!inserted) {
      touched_[i] = c->entry;
      continue;
    }
    if (free_entries_.empty()) entries_.push_back(Entry{seq[i], kNil, 0, now_ms});
    else free_entries_.pop_back();
    touched_[i] = fresh | kNew;
  }
  for (size_t i = n; i-- > 0;) {
    if (i >= kStoreAhead) __builtin_prefetch(&entries_[touched_[i - kStoreAhead] & ~kNew]);
    const uint32_t e = touched_[i] & ~kNew;
    Entry& x = entries_[e];
    if (touched_[i] & kNew) {
      x.hash = seq[i];
      x.worker = w;  // gen carries on: records of the entry's last use stay stale
      ++workers_[w].count;
    }
    x.last_used_ms = now_ms;
    record(e);
  }
}

void PrefixIndex::insert(uint32_t w, std::span<const uint64_t> seq, double now_ms) {
  if (w >= workers_.size()) throw std::out_of_range("PrefixIndex::insert: worker out of range");
  if (now_ms < last_insert_ms_) prefix_closed_ = false;
  last_insert_ms_ = std::max(last_insert_ms_, now_ms);
  store_blocks(w, seq, now_ms);
  expire_worker(w, now_ms);
  prune(w);
}

void PrefixIndex::apply_stored(uint32_t w, std::span<const uint64_t> block_hashes, std::optional<uint64_t>,
                               double now_ms) {
  if (w >= workers_.size()) throw std::out_of_range("PrefixIndex::apply_stored: worker out of range");
  prefix_closed_ = false;  // an engine's event need not store a whole prefix
  store_blocks(w, block_hashes, now_ms);
  prune(w);
}

void PrefixIndex::apply_removed(uint32_t w, std::span<const uint64_t> block_hashes) {
  if (w >= workers_.size()) return;
  if (!lru_) {
    const IndexEvent e{BlockEvent::Kind::kRemoved, w, block_hashes};
    apply_bits({&e, 1});
    return;
  }
  prefix_closed_ = false;  // a removal may take a prefix's block and leave its extension
  for (uint64_t h : block_hashes)
    if (const HolderMap::Cell* c = map_.find(h, w)) remove_entry(c->entry);
}

void PrefixIndex::apply_events(std::span<const IndexEvent> events, double now_ms) {
  for (const IndexEvent& e : events)
    if (e.kind == BlockEvent::Kind::kStored && e.worker >= workers_.size())
      throw std::out_of_range("PrefixIndex::apply_events: worker out of range");
  if (!lru_) {
    apply_bits(events);
    return;
  }
  for (const IndexEvent& e : events) {
    switch (e.kind) {
      case BlockEvent::Kind::kStored: apply_stored(e.worker, e.block_hashes, std::nullopt, now_ms); break;
      case BlockEvent::Kind::kRemoved: apply_removed(e.worker, e.block_hashes); break;
      case BlockEvent::Kind::kCleared: clear_worker(e.worker); break;
    }
  }
}

void PrefixIndex::clear_worker(uint32_t w) {
  if (w >= workers_.size()) return;
  // Without LRU records there is no list of w's blocks: a scan of the table (a worker's restart
  // or departure, rare next to stores and removals).
  if (!lru_) {
    const uint64_t bit = uint64_t{1} << (w % kGroupWorkers);
    groups_[w / kGroupWorkers].update_all([&](uint64_t, uint64_t& m) { m &= ~bit; });
    workers_[w].count = 0;
    return;
  }
  for (uint32_t e; (e = oldest(w)) != kNil;) {
    remove_entry(e);
    ++workers_[w].front;
  }
  workers_[w].order.clear();
  workers_[w].front = 0;
}

void PrefixIndex::expire(double now_ms) {
  for (uint32_t w = 0; w < workers_.size(); ++w) expire_worker(w, now_ms);
}

uint32_t PrefixIndex::overlaps(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const {
  std::fill(out.begin(), out.end(), 0u);
  if (!lru_) return overlaps_bits(seq, out);
  // Jumping pays on long prompts; on short ones (a Mooncake request's ~23 blocks) the binary
  // searches of the workers that stop early cost more than the scan that drops them as it goes.
  return prefix_closed_ && seq.size() >= kJumpFrom ? overlaps_jump(seq, now_ms, out)
                                                   : overlaps_entries(seq, now_ms, out);
}

uint32_t PrefixIndex::overlaps_bits(std::span<const uint64_t> seq, std::span<uint32_t> out) const {
  // Per group, the bits of its workers still matching: each block narrows a group's set to its
  // holders, and a worker that drops out stops at that block. Only groups with a worker still
  // matching are read (`live`, compacted as groups drop out): past block 0, usually one or two.
  const size_t groups = std::min(groups_.size(), (out.size() + kGroupWorkers - 1) / kGroupWorkers);
  constexpr size_t kSmall = 32;  // 2,048 workers without an allocation
  uint64_t small_active[kSmall];
  uint32_t small_live[kSmall];
  std::vector<uint64_t> big_active;
  std::vector<uint32_t> big_live;
  uint64_t* active = small_active;
  uint32_t* live = small_live;
  if (groups > kSmall) {
    big_active.resize(groups);
    big_live.resize(groups);
    active = big_active.data();
    live = big_live.data();
  }
  size_t n_live = 0;
  for (size_t g = 0; g < groups; ++g) {
    if (groups_[g].size() == 0) continue;
    const size_t n = std::min<size_t>(out.size() - g * kGroupWorkers, kGroupWorkers);
    active[g] = n == kGroupWorkers ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    live[n_live++] = static_cast<uint32_t>(g);
  }
  if (n_live == 1) return overlaps_group(live[0], active[live[0]], seq, out);
  // Block 0's cell of every group, then the next kAhead of the groups still matching after it.
  for (size_t k = 0; k < n_live && !seq.empty(); ++k) groups_[live[k]].prefetch(seq[0]);
  const bool several = n_live > 1;
  size_t i = 0;
  for (; i < seq.size() && n_live > 0; ++i) {
    size_t kept = 0;
    for (size_t k = 0; k < n_live; ++k) {
      const uint32_t g = live[k];
      const FlatMaskMap& m = groups_[g];
      if (i + kAhead < seq.size()) m.prefetch(seq[i + kAhead]);
      const uint64_t held = m.find(seq[i]);
      for (uint64_t gone = active[g] & ~held; gone; gone &= gone - 1)
        out[g * kGroupWorkers + std::countr_zero(gone)] = static_cast<uint32_t>(i);
      active[g] &= held;
      if (active[g]) live[kept++] = g;
    }
    n_live = kept;
    if (i == 0 && several)
      for (size_t k = 0; k < n_live; ++k) prefetch_cells(groups_[live[k]], seq.subspan(1));
  }
  // Workers still matching at the end hold the whole sequence.
  for (size_t k = 0; k < n_live; ++k)
    for (uint64_t a = active[live[k]]; a; a &= a - 1)
      out[live[k] * kGroupWorkers + std::countr_zero(a)] = static_cast<uint32_t>(i);
  // i is one past the last block some worker matched (or 0): the largest overlap.
  return n_live > 0 ? static_cast<uint32_t>(i) : static_cast<uint32_t>(i == 0 ? 0 : i - 1);
}
uint32_t PrefixIndex::overlaps_group(size_t g, uint64_t active, std::span<const uint64_t> seq,
                                     std::span<uint32_t> out) const {
  const FlatMaskMap& m = groups_[g];
  uint32_t* o = out.data() + g * kGroupWorkers;
  // Every hash is known before the first probe: the first kAhead cells load together, then each
  // step asks for the one kAhead on (a lookup's blocks were one miss after the other).
  prefetch_cells(m, seq);
  size_t i = 0;
  for (; i < seq.size() && active; ++i) {
    if (i + kAhead < seq.size()) m.prefetch(seq[i + kAhead]);
    const uint64_t held = m.find(seq[i]);
    for (uint64_t gone = active & ~held; gone; gone &= gone - 1) o[std::countr_zero(gone)] = static_cast<uint32_t>(i);
    active &= held;
  }
  if (!active) return static_cast<uint32_t>(i == 0 ? 0 : i - 1);  // block i - 1 matched by none
  for (; active; active &= active - 1) o[std::countr_zero(active)] = static_cast<uint32_t>(i);
  return static_cast<uint32_t>(i);
}

bool PrefixIndex::advance_entries(uint64_t h, size_t i, double now_ms, std::span<uint32_t> out, bool check_live) const {
  bool advanced = false;
  map_.for_each(h, [&](const HolderMap::Cell& c) {
    if (out[c.worker] == i && (!check_live || live(entries_[c.entry], now_ms))) {
      out[c.worker] = static_cast<uint32_t>(i + 1);
      advanced = true;
    }
  });
  return advanced;
}

uint32_t PrefixIndex::last_held(uint32_t w, std::span<const uint64_t> seq, size_t good, size_t bad, double now_ms,
                                bool check_live) const {
  while (bad - good > 1) {
    const size_t m = good + (bad - good) / 2;
    const bool held = check_live ? holds(w, seq[m - 1], now_ms) : map_.find(seq[m - 1], w) != nullptr;
    (held ? good : bad) = m;
  }
  return static_cast<uint32_t>(good);
}

uint32_t PrefixIndex::settle_live(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const {
  // Every worker counted holds block 0; its run's ends, deepest first, each block read once for
  // all the workers whose run ends there.
  std::vector<uint32_t>& ends = matching_;
  ends.clear();
  map_.for_each(seq[0], [&](const HolderMap::Cell& c) {
    if (out[c.worker] > 0) ends.push_back(out[c.worker]);
  });
  std::sort(ends.begin(), ends.end(), std::greater<>());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  for (const uint32_t r : ends) map_.prefetch(seq[r - 1]);
  uint32_t best = 0;
  for (const uint32_t r : ends) {
    map_.for_each(seq[r - 1], [&](const HolderMap::Cell& c) {
      if (out[c.worker] != r) return;
      if (!live(entries_[c.entry], now_ms)) {
        // Its last block outlived the TTL: its live run is shorter (a binary search, as rare as
        // a worker whose idle time crossed the TTL since its last expiry). A worker it lowers to
        // a shallower end met later is checked again there, live by then.
        out[c.worker] = last_held(c.worker, seq, 0, r, now_ms, true);
      }
      best = std::max(best, out[c.worker]);
    });
  }
  return best;
}

uint32_t PrefixIndex::overlaps_entries(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const {
  if (map_.size() == 0) return 0;
  prefetch_cells(map_, seq);
  // Prefix-closed, the scan counts held blocks, live or not, and settle_live() checks each
  // worker's last one once (as overlaps_jump). Otherwise each holder's TTL is checked as the scan
  // reaches it, which reads its entry, one cache miss each (about 10 holders a block at 1,000
  // simulated workers, issue 54): the entries of block i + kEntriesAhead's holders still matching
  // start loading at block i (their cells loaded by then), the first blocks' at once.
  const bool settle = prefix_closed_ && cfg_.ttl_ms > 0;
  const bool aged = cfg_.ttl_ms > 0 && !settle;
  constexpr size_t kEntriesAhead = 4;
  auto prefetch_entries = [&](size_t b, uint32_t at) {
    map_.for_each(seq[b], [&](const HolderMap::Cell& c) {
      if (out[c.worker] == at) __builtin_prefetch(&entries_[c.entry]);
    });
  };
  for (size_t b = 0; aged && b < kEntriesAhead && b < seq.size(); ++b) prefetch_entries(b, 0);
  uint32_t best = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (i + kAhead < seq.size()) map_.prefetch(seq[i + kAhead]);
    if (aged && i + kEntriesAhead < seq.size()) prefetch_entries(i + kEntriesAhead, static_cast<uint32_t>(i));
    if (!advance_entries(seq[i], i, now_ms, out, !settle)) break;
    best = static_cast<uint32_t>(i + 1);
  }
  return settle && best > 0 ? settle_live(seq, now_ms, out) : best;
}

uint32_t PrefixIndex::overlaps_jump(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const {
  // Prefix-closed, "w holds block k" answers for blocks 0..k too, so a lookup need not read every
  // block: it checks every kJump-th block (a checkpoint) for the workers still matching, and only
  // the workers that fail a checkpoint are searched between the checkpoints for their last
  // block. An agent's 2,000-block prompt continuing on its worker is ~2,000 / kJump cells, not
  // 2,000 (issue 54: the lookup was a third of the approximate index's cost in the router).
  // Holding is prefix-closed as holding live is (expiry and pruning take leaves first), so the
  // search counts held blocks and settle_live() checks the TTL once a worker, at its run's end:
  // a TTL check reads the holder's entry, a cache miss, and checking every worker still matching
  // at every checkpoint and scanned block was three quarters of the lookups' time at 1,000
  // simulated workers (issue 54).
  const size_t n = seq.size();
  if (n == 0 || map_.size() == 0) return 0;
  std::vector<uint32_t>& matching = matching_;
  matching.clear();
  map_.for_each(seq[0], [&](const HolderMap::Cell& c) {
    out[c.worker] = 1;
    matching.push_back(c.worker);
  });
  uint32_t best = matching.empty() ? 0 : 1;
  // Every worker in `matching` holds the first `done` blocks (out[w] == done).
  for (size_t done = 1; !matching.empty() && done < n;) {
    const size_t p = std::min(done + kJump, n) - 1;  // the checkpoint
    for (size_t ahead = p + kJump; ahead < n && ahead <= p + 2 * kJump; ahead += kJump) map_.prefetch(seq[ahead]);
    const auto next = static_cast<uint32_t>(p + 1);
    map_.for_each(seq[p], [&](const HolderMap::Cell& c) {
      if (out[c.worker] == done) out[c.worker] = next;
    });
    // The workers that failed the checkpoint (out[w] still `done`) ended between `done` and it.
    // Each is binary-searched, or, when many failed, all advance together in one scan of the
    // blocks from `done`, which stops at the first block none of them holds. A holds() reads a
    // block's run of holder cells up to w's (half the run on average), the scan each block's
    // whole run: the searches cost about failed x log2(kJump) / 2 = 2.5 x failed runs, the scan
    // at most kJump = 32. For a prefix shared by hundreds of workers, a search per worker read
    // its runs hundreds of times per lookup (issue 54: holds() was 15 % of a 1,000-worker
    // simulation; from 12 and from 32 failing workers measured alike, from 4 worse).
    size_t failed = 0;
    for (const uint32_t w : matching) failed += out[w] != next;
    const bool scan = failed >= kScanFailing;
    for (size_t b = done; scan && b < p && advance_entries(seq[b], b, now_ms, out, false); ++b) {
    }
    size_t kept = 0;
    for (const uint32_t w : matching) {
      if (out[w] == next) {
        matching[kept++] = w;
        continue;
      }
      if (!scan) out[w] = last_held(w, seq, done, p + 1, now_ms, false);
      best = std::max(best, out[w]);
    }
    matching.resize(kept);
    if (kept) best = next;
    done = p + 1;
  }
  return cfg_.ttl_ms > 0 && best > 0 ? settle_live(seq, now_ms, out) : best;
}

void PrefixIndex::continue_overlaps(std::span<const uint64_t> seq, double now_ms, std::span<const uint32_t> start,
                                    std::span<uint32_t> out) const {
  // out[w] is the position w has matched up to while scanning, then the run's length.
  std::copy(start.begin(), start.end(), out.begin());
  if (distinct_blocks() == 0 || start.empty()) {
    std::fill(out.begin(), out.end(), 0u);
    return;
  }
  const uint32_t lo = *std::min_element(start.begin(), start.end());
  const uint32_t hi = *std::max_element(start.begin(), start.end());
  for (size_t i = lo; i < seq.size(); ++i) {
    bool advanced = false;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const FlatMaskMap& m = groups_[g];
      if (m.size() == 0) continue;
      if (i + 4 < seq.size()) m.prefetch(seq[i + 4]);
      for (uint64_t held = m.find(seq[i]); held; held &= held - 1) {
        const size_t w = g * kGroupWorkers + static_cast<size_t>(std::countr_zero(held));
        if (w < out.size() && out[w] == i) {
          out[w] = static_cast<uint32_t>(i + 1);
          advanced = true;
        }
      }
    }
    if (lru_) {
      if (i + 4 < seq.size()) map_.prefetch(seq[i + 4]);
      advanced = advance_entries(seq[i], i, now_ms, out, true) || advanced;
    }
    // Past every worker's start, a block nobody continued on ends every run.
    if (!advanced && i >= hi) break;
  }
  for (size_t w = 0; w < out.size(); ++w) out[w] -= start[w];
}

bool PrefixIndex::holds(uint32_t w, uint64_t hash, double now_ms) const {
  if (!lru_) return w < workers_.size() && (groups_[w / kGroupWorkers].find(hash) >> (w % kGroupWorkers)) & 1;
  const HolderMap::Cell* c = map_.find(hash, w);
  return c && live(entries_[c->entry], now_ms);
}

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::kDevice: return "GPU";
    case Tier::kHost: return "CPU_PINNED";
    case Tier::kDisk: return "DISK";
    case Tier::kShared: return "EXTERNAL";
  }
  return "GPU";
}

std::optional<Tier> tier_of_medium(std::optional<std::string_view> medium) {
  if (!medium) return Tier::kDevice;  // older vLLM: every event was a device block
  const std::string_view m = *medium;
  if (m == "GPU" || m == "DEVICE") return Tier::kDevice;
  if (m == "CPU" || m == "CPU_PINNED" || m == "CPU_TIER1") return Tier::kHost;
  if (m == "CPU_TIER2" || m == "DISK" || m == "NVME" || m == "STORAGE") return Tier::kDisk;
  if (m == "EXTERNAL" || m == "NETWORK" || m == "REMOTE" || m == "SHARED") return Tier::kShared;
  return std::nullopt;
}

}  // namespace dyn::kv
