// The KV block pool of one engine (SPEC 8): reference-counted blocks, full blocks keyed by
// sequence hash and reusable after their request ends, LRU eviction of inactive blocks.
#pragma once

#include <cassert>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "dyn/base/reserved_array.h"

namespace dyn::engine {

/// Where a KV block lives. The numbers are the KVBM tier names (G1 = GPU ... G4 = shared pool).
enum class Tier : uint8_t { kG1 = 1, kG2 = 2, kG3 = 3, kG4 = 4 };

/// One KV event for a router's prefix index (SPEC 3.3): `stored` blocks (sequence hashes, in
/// prefix order, the first one's parent is `parent_hash`), `removed` blocks, or `cleared`, on
/// `tier` (SPEC 8.7: a block stored on a lower tier before it leaves the upper one).
struct KvEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_hash;
  Tier tier = Tier::kG1;
};

/// A fixed pool of `capacity` blocks. Two kinds of blocks use it:
/// - hashed blocks: full prompt blocks keyed by their sequence hash, shared by every request
///   with that prefix (refcount = holders). At refcount 0 a hashed block stays cached
///   ("inactive") until evicted; eviction takes the least recently released one first. Callers
///   release a request's blocks from its last block to its first, so a leaf is always older in
///   the LRU than its prefix and is evicted before it (SPEC 8). A block released "first out"
///   (a finished session's, KvEviction::kSession) joins a second LRU list that is emptied
///   before the main one. With `by_rank` (KvEviction::kPriority) the main LRU is one LRU per
///   block rank, the lowest rank's emptied first: the one eviction order of SPEC 8.6 is the
///   first-out list, then rank (lowest first), then least recently released. Pinned blocks (a
///   KV hint's lease, pin()) wait on a last list: evicted only when no unpinned block is left.
/// - private blocks: partial and generated blocks, counted but never shared nor cached.
/// Not thread-safe (the owning Engine serialises access).
class KvPool {
 public:
  /// `track_owners`: keep owner() per block (KvEviction::kSession). `by_rank`: keep a rank per
  /// block (see claim()) and evict lower ranks first (KvEviction::kPriority).
  explicit KvPool(uint64_t capacity, bool record_events = false, bool track_owners = false, bool by_rank = false);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  uint64_t capacity() const { return capacity_; }
  /// Blocks in use: hashed (active + inactive) + private.
  uint64_t used() const { return hashed_ + private_; }
  uint64_t free() const { return capacity_ - used(); }
  /// Blocks held by at least one request (hashed refcount > 0, plus private).
  uint64_t active() const { return active_hashed_ + private_; }
  uint64_t inactive() const { return inactive_count_; }
  /// Blocks that could be handed out now: free + evictable inactive.
  uint64_t available() const { return free() + inactive_count_; }

  /// Number of leading `hashes` present in the pool (active or inactive), stopping at the
  /// first miss (SPEC 3.2 overlap). Does not touch LRU order.
  size_t match_prefix(std::span<const uint64_t> hashes) const;
  bool contains(uint64_t hash) const { return find_slot(hash) != kNil; }
  /// True when `hash` is cached with refcount 0 (counted in inactive()).
  bool is_inactive(uint64_t hash) const;

  /// Takes one more reference on a present block (reactivating an inactive one). False when
  /// the hash is absent.
  bool acquire(uint64_t hash);
  /// One lookup instead of contains() + is_inactive() + acquire() on a hot path: the block's
  /// slot (kAbsent when not present), whether that slot is inactive, and acquire() by slot. A
  /// slot stays valid until the pool is next changed (insert, release, eviction).
  static constexpr uint32_t kAbsent = UINT32_MAX;
  uint32_t slot_of(uint64_t hash) const { return find_slot(hash); }
  bool slot_inactive(uint32_t slot) const { return slab_[slot].refs == 0; }
  void acquire_slot(uint32_t slot);
  /// Starts loading the table cell where a lookup of `hash` begins (a hint, no effect on the
  /// pool): loops over a request's blocks call it a few blocks ahead so their cache misses
  /// overlap.
  void prefetch(uint64_t hash) const { __builtin_prefetch(&table_[bucket(hash)]); }
  /// Starts loading a held block's slab entry (a loop releasing a request's blocks, ahead).
  void prefetch_slot(uint32_t slot) const { __builtin_prefetch(&slab_[slot]); }
  /// The second stage, once prefetch(hash) has loaded the cell (a few blocks later): starts
  /// loading the slab entry the cell names, which the lookup compares (with a thousand pools
  /// the entry was a second miss per block, issue 54). Reads the cell, so a call on a cell not
  /// yet loaded waits for it.
  void prefetch_entry(uint64_t hash) const {
    if (const Cell& c = table_[bucket(hash)]; c.slot1 != 0) __builtin_prefetch(&slab_[c.slot1 - 1]);
  }
  /// Evicts inactive blocks (LRU first) until free() >= n. False, evicting nothing, when
  /// available() < n.
  bool make_room(uint64_t n);
  /// Inserts a new hashed block with refcount 1 under `parent` (nullopt for a first block).
  /// Requires !contains(hash) and free() > 0 (call make_room first). Returns its slot, which
  /// stays the block's while any reference is held (for release_slot()).
  uint32_t insert(uint64_t hash, std::optional<uint64_t> parent);
  /// Records that a request holds `slot`, after insert() or acquire_slot(). With track_owners:
  /// the request's `session` (a caller's nonzero tag); a block belongs to the first session that
  /// holds it until another session holds it too, from then on it is shared (owner 0). With
  /// by_rank: the request's `rank` (higher = kept longer); a block keeps the highest rank of the
  /// requests that held it since it was inserted (SGLang's radix node priority: the max over
  /// the requests that reached it).
  void claim(uint32_t slot, uint64_t session, int64_t rank = 0) {
    // inline: the engine calls it for every block it takes
    if (track_owners_) {
      if (owners_[slot] == kUnclaimed) owners_[slot] = session;
      else if (owners_[slot] != session) owners_[slot] = 0;
    }
    if (by_rank_ && rank > ranks_[slot]) ranks_[slot] = rank;
  }
  /// The block's rank (see claim()); 0 when ranks are not kept.
  int64_t rank(uint32_t slot) const { return by_rank_ ? ranks_[slot] : 0; }
  /// The block's session (see claim()); 0 when shared, unclaimed, or owners are not tracked.
  uint64_t owner(uint32_t slot) const { return !track_owners_ || owners_[slot] == kUnclaimed ? 0 : owners_[slot]; }
  /// Drops one reference; at 0 the block becomes the most recently used inactive block, or is
  /// dropped at once when prefix caching is off (`cache` false). Unknown or inactive: no-op.
  void release(uint64_t hash, bool cache = true);
  /// release() by the slot a held block got from insert() or slot_of() + acquire_slot(): the
  /// same effect without the hash lookup (a held block's slot never moves). Requires a slot
  /// whose block has refcount > 0.
  /// `first_out`: at refcount 0 the block joins the list evicted before the LRU (a finished
  /// session's block, which no later turn will ask for).
  void release_slot(uint32_t slot, bool cache = true, bool first_out = false);
  /// Private blocks: requires free() >= n for alloc (call make_room first).
  void alloc_private(uint64_t n) { private_ += n; }
  void free_private(uint64_t n) { private_ -= n; }

  /// Moves out the events recorded since the last call (empty unless record_events).
  std::vector<KvEvent> take_events();
  /// Appends another tier's event to the same stream (SPEC 8.7: the order of stores and removes
  /// across tiers is the order they happened in). No-op unless record_events.
  void push_event(KvEvent e) {
    if (record_events_) events_.push_back(std::move(e));
  }
  /// Called with each evicted block (sequence hash, parent) before its remove event: the tier
  /// below stores it first (SPEC 8.7 offload). Whatever picks the victim, this sees it.
  using EvictHook = std::function<void(uint64_t hash, std::optional<uint64_t> parent)>;
  /// Set before the first insert(): only then are parents kept (see parents_).
  void set_evict_hook(EvictHook hook) {
    assert(hashed_ == 0);
    evict_hook_ = std::move(hook);
  }
  /// Total blocks evicted so far.
  uint64_t evictions() const { return evictions_; }

  /// KV hint leases (SPEC 8.6): one more lease on the block with sequence hash `hash`, present
  /// or not. While any lease holds a hash, its block (now, or when inserted again) is evicted
  /// only after every unpinned inactive block, least recently released first among pinned ones
  /// (the "forced reuse" of a retained block, counted by pinned_evictions()).
  void pin(uint64_t hash);
  /// Drops one lease on `hash` (no-op when none). At the last one an inactive block rejoins the
  /// eviction order as its oldest block (it outlived its release by the lease), or first out
  /// with `first_out` (kv.evict).
  void unpin(uint64_t hash, bool first_out = false);
  /// Hashes held by at least one lease, present or not.
  uint64_t pinned() const { return pins_.size(); }
  bool is_pinned(uint64_t hash) const { return pins_.count(hash) != 0; }
  /// Pinned blocks evicted because nothing unpinned was left.
  uint64_t pinned_evictions() const { return pinned_evictions_; }
  /// Moves an inactive, unpinned block to the first-out list (kv.evict of a block no lease
  /// holds). False when absent, held by a request, or pinned.
  bool evict_first(uint64_t hash);
  /// Evicts an inactive, unpinned block now, through the evict hook (kv.demote: with KV tiers
  /// it is offloaded to G2). False when absent, held by a request, or pinned.
  bool evict_now(uint64_t hash);

 private:
  // Hashed blocks live in a slab of `capacity` entries indexed by an open-addressing table
  // (linear probing, backward-shift deletion): no allocation per block, few cache misses. Each
  // cell keeps the top 32 bits of the block's scrambled hash beside its slot: a probe compares
  // those before touching the slab, and deletion finds a cell's home bucket from them alone
  // (issue 17: table_erase reading the slab for every cell it shifted was 12 % of a simulation).
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Cell {
    uint32_t slot1 = 0;  // slot + 1; 0 = empty
    uint32_t tag = 0;    // scrambled hash >> 32
  };
  // Inactive lists an entry can be on: the LRU, the first-out list, the pinned list, the LRU of
  // its rank.
  static constexpr uint8_t kLruList = 0, kFirstOutList = 1, kPinnedList = 2, kRankList = 3;
  struct Entry {
    uint64_t hash = 0;
    uint32_t refs = 0;
    uint32_t prev = kNil;  // LRU links, valid while refs == 0
    uint32_t next = kNil;
    uint8_t list = kLruList;  // while refs == 0
    bool has_parent = false;  // parents_[slot] is its parent's hash (with an evict hook)
    bool pinned = false;      // a lease holds its hash (pins_)
  };
  struct Ends {
    uint32_t head = kNil;  // oldest
    uint32_t tail = kNil;  // newest
  };
  uint32_t find_slot(uint64_t hash) const;
  static uint64_t scramble(uint64_t hash) { return hash * 0x9E3779B97F4A7C15ULL; }
  size_t bucket(uint64_t hash) const { return static_cast<size_t>(scramble(hash) >> shift_); }
  // The home bucket of an occupied cell (what bucket() gave its hash).
  size_t home(const Cell& c) const {
    return shift_ >= 32 ? static_cast<size_t>(c.tag >> (shift_ - 32)) : bucket(slab_[c.slot1 - 1].hash);
  }
  void table_erase(uint64_t hash, uint32_t slot);               // the cell of `slot`, which holds `hash`
  void lru_push(uint32_t e, uint8_t list, bool front = false);  // front: as the list's oldest
  void lru_unlink(uint32_t e);
  void unlink_from(Ends& l, uint32_t e);
  Ends& rank_list(uint32_t e);  // with by_rank: the LRU of e's rank, made when missing
  void rank_unlink(uint32_t e);
  // The next block eviction takes (kNil when none is inactive): the one eviction order.
  uint32_t victim() const {
    if (lists_[kFirstOutList].head != kNil) return lists_[kFirstOutList].head;
    if (lists_[kLruList].head != kNil) return lists_[kLruList].head;  // empty with by_rank
    if (!ranked_.empty()) return ranked_.begin()->second.head;
    return lists_[kPinnedList].head;
  }
  // The list an inactive block joins: pinned ones wait last whatever the caller asked.
  uint8_t list_for(uint32_t e, bool first_out) const {
    return slab_[e].pinned ? kPinnedList : first_out ? kFirstOutList : by_rank_ ? kRankList : kLruList;
  }
  void evict_one(uint32_t e);  // e = victim()
  void event_stored(uint64_t hash, std::optional<uint64_t> parent);
  void event_removed(uint64_t hash);

  uint64_t capacity_;
  bool record_events_;
  bool track_owners_;
  bool by_rank_;
  ReservedArray<Entry> slab_;  // `capacity` entries reserved, resident as blocks arrive
  std::vector<uint32_t> free_slots_;
  ReservedArray<Cell> table_;  // 2 x capacity cells or more (a power of two), resident as they fill
  size_t mask_ = 0;
  int shift_ = 0;
  Ends lists_[3];  // [kLruList], [kFirstOutList], [kPinnedList]
  // With by_rank: the LRU of each rank that has inactive blocks (no empty lists), lowest first.
  // Ranks are few (a workload's priority classes), so a map lookup per release is cheap.
  std::map<int64_t, Ends> ranked_;
  static constexpr uint64_t kUnclaimed = UINT64_MAX;
  std::vector<uint64_t> owners_;  // per slot, with track_owners: the session, 0 = shared
  std::vector<int64_t> ranks_;    // per slot, with by_rank
  // Per slot, with an evict hook (KV tiers): the parent hash the hook is given. Apart from the
  // slab, which only the hook needs it for: 24 bytes an entry instead of 32 (with a thousand
  // simulated workers, 131 MB fewer pages to fault in, issue 54). Reserved whole, resident only
  // where written.
  ReservedArray<uint64_t> parents_;
  uint64_t hashed_ = 0;
  uint64_t inactive_count_ = 0;
  uint64_t active_hashed_ = 0;
  uint64_t private_ = 0;
  uint64_t evictions_ = 0;
  // Leases per pinned hash (KV hints; empty without them, and then the hot paths never look).
  std::unordered_map<uint64_t, uint32_t> pins_;
  uint64_t pinned_evictions_ = 0;
  std::vector<KvEvent> events_;
  EvictHook evict_hook_;

 public:
  /// Bytes the pool keeps per block when full: its slab entry and two table cells (the table is
  /// at most half full). The simulator's configured KV state (issue 54) counts these.
  static constexpr size_t kBytesPerBlock = sizeof(Entry) + 2 * sizeof(Cell);
};

}  // namespace dyn::engine
