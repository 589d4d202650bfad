// Per-worker KV prefix index (SPEC 3.3): which worker holds which sequence-hash blocks, approximate
// (routed blocks with TTL and budget) or fed by the workers' KV events.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dyn/kv/block_event.h"
#include "dyn/kv/flat_map.h"

namespace dyn::kv {

struct IndexConfig {
  /// Idle lifetime of a recorded block in ms (--router-ttl-secs × 1000, SPEC 3.3); 0 = blocks never
  /// expire (event-fed mode: the worker says when it evicts).
  double ttl_ms = 120'000;
  /// Per-worker block budget; 0 = unlimited. When a worker's count exceeds it, its least recently
  /// used blocks are pruned down to prune_target_ratio × budget (SPEC 3.3: 80 %).
  uint64_t budget_blocks = 0;
  double prune_target_ratio = 0.8;
};

/// One event of a batch for PrefixIndex::apply_events(): worker `worker` stored or removed these
/// blocks (sequence hashes, in order), or cleared all of its blocks. A view: the hashes stay the
/// caller's.
struct IndexEvent {
  BlockEvent::Kind kind = BlockEvent::Kind::kStored;
  uint32_t worker = 0;
  std::span<const uint64_t> block_hashes;
};

/// Which of a request's leading blocks each worker holds. Blocks are identified by sequence hashes
/// (SPEC 4.1: the i-th sequence hash identifies the whole prefix 0..i), so "worker w holds the first
/// k blocks" = w holds seq[0..k-1]. Workers are dense indices 0..worker_count()-1.
///
/// Two shapes, by mode. With a TTL or a budget (approximate mode) each (block, worker) is an entry
/// with its last use, and LRU order is kept per worker; a query is one hash lookup per matched block
/// plus a scan of that block's holders, an insert one lookup per block. Eviction order within a
/// worker is least-recently-used, and inserting a request's blocks deepest-first makes a prefix
/// younger than its extensions, so leaves go first. Without either (event-fed: the worker says
/// when a block goes) nothing is aged: each group of 64 workers (0..63, 64..127, ...) keeps its
/// blocks as bits of one 64-bit holder set per block, in a flat map of its own keyed by sequence
/// hash (Dynamo's Flash Indexer's shape), so a stored or removed block is one map cell, and a
/// lookup reads one cell per block of each group with a worker still matching and stops at the
/// first block no worker still matching holds.
///
/// Thread safety: none; the router serializes access under its own lock.
class PrefixIndex {
 public:
  explicit PrefixIndex(IndexConfig config = {});

  /// Grows or shrinks the worker slots; removed slots are cleared.
  void set_worker_count(uint32_t n);
  uint32_t worker_count() const { return static_cast<uint32_t>(workers_.size()); }
  const IndexConfig& config() const { return cfg_; }
  /// Worker w's own block budget (the engine's KV size, learned at run time), in place of
  /// IndexConfig::budget_blocks; 0 = that one again. Pruning to it happens at w's next insert.
  /// Only an index that keeps LRU order (a TTL or a budget in its config) prunes at all.
  void set_worker_budget(uint32_t w, uint64_t blocks) { workers_.at(w).budget = blocks; }

  /// Approximate mode: records `seq` (a request's full-block sequence hashes, block 0 first) as
  /// cached on worker w at time now_ms, refreshing blocks it already holds; then drops w's blocks
  /// idle longer than the TTL and prunes w to its budget.
  void insert(uint32_t w, std::span<const uint64_t> seq, double now_ms);

  /// Event-fed mode, a `stored` event: w now holds these blocks (sequence hashes, in order).
  /// `parent_hash` names the block before the first one; it is accepted for Dynamo compatibility
  /// and not needed, since a sequence hash already identifies its whole prefix.
  void apply_stored(uint32_t w, std::span<const uint64_t> block_hashes, std::optional<uint64_t> parent_hash,
                    double now_ms);
  /// A `removed` event: w evicted these blocks. Unknown hashes are ignored.
  void apply_removed(uint32_t w, std::span<const uint64_t> block_hashes);
  /// A batch of events (e.g. one engine step's, as a worker's KV event batch delivers them),
  /// applied in order: the same as apply_stored / apply_removed / clear_worker one by one, but
  /// event-fed, the cells of the next blocks load while a block is applied across the events'
  /// boundaries, so an event does not wait for its own first cell. Throws std::out_of_range when a
  /// stored event names a worker >= worker_count() (nothing applied); removed and cleared events
  /// of such workers are ignored, as apply_removed's.
  void apply_events(std::span<const IndexEvent> events, double now_ms);
  /// A `cleared` event (or the worker left): w holds nothing.
  void clear_worker(uint32_t w);
  /// Drops every block idle longer than the TTL, on every worker (the router's periodic sweep).
  void expire(double now_ms);

  /// out[w] = number of leading blocks of `seq` that worker w holds (matched from block 0, stopping
  /// at w's first miss; expired blocks do not count). `out` must have worker_count() entries.
  /// Returns the largest overlap.
  uint32_t overlaps(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const;
  /// A lower tier's overlap, tier-exclusive (Dynamo's lower-tier indexer, SPEC 3.3): out[w] = number
  /// of consecutive blocks of `seq` that w holds here, counted from block start[w] (where the tier
  /// above stopped matching for w; start[w] <= seq.size()). `start` and `out` have
  /// worker_count() entries. Costs nothing when this index is empty.
  void continue_overlaps(std::span<const uint64_t> seq, double now_ms, std::span<const uint32_t> start,
                         std::span<uint32_t> out) const;

  /// Whether worker w holds the block `hash` (unexpired).
  bool holds(uint32_t w, uint64_t hash, double now_ms) const;

  /// Blocks held by worker w / distinct blocks held by anyone (event-fed with more than 64 workers:
  /// counted once per 64-worker group that holds the block; 0 exactly when nobody holds a block).
  uint64_t blocks(uint32_t w) const { return workers_.at(w).count; }
  uint64_t distinct_blocks() const;

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  // One holder of one block: its map cell (hash, worker) names it, and it keeps the hash, so
  // removing it finds that cell again. A block's holders are the map's cells of its hash (no
  // list through the entries: issue 54).
  struct Entry {
    uint64_t hash;
    uint32_t worker;  // kNil while free
    uint32_t gen;     // bumped by every touch and removal: which Touch record is current
    double last_used_ms;
  };
  // A worker's LRU order is the sequence of its touches: each touch appends {entry, gen}, and a
  // record whose gen is no longer the entry's (touched again since, or removed) is skipped. The
  // least recently used entry is the first current record. Unlike a linked list this costs no
  // neighbour updates per refresh, and expiry reads records in memory order, so the entries
  // and map cells it removes next can be prefetched (issue 17: the LRU tail walk's cache misses
  // were 12 % of a simulation).
  struct Touch {
    uint32_t entry, gen;
  };
  struct Worker {
    std::vector<Touch> order;  // oldest first, from `front`
    size_t front = 0;
    uint64_t count = 0;
    uint64_t budget = 0;  // set_worker_budget (0 = cfg_.budget_blocks)
  };

  // Event-fed, worker w is bit w % 64 of the cells of group w / 64's map.
  static constexpr uint32_t kGroupWorkers = 64;
  void store_blocks(uint32_t w, std::span<const uint64_t> seq, double now_ms);
  // An event-fed batch, in order (events checked by apply_events).
  void apply_bits(std::span<const IndexEvent> events);
  uint32_t overlaps_bits(std::span<const uint64_t> seq, std::span<uint32_t> out) const;
  // overlaps_bits() when only group g has blocks (`active`: its workers in `out`), the common case.
  uint32_t overlaps_group(size_t g, uint64_t active, std::span<const uint64_t> seq, std::span<uint32_t> out) const;
  uint32_t overlaps_entries(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const;
  /// overlaps_entries() by jump search (Dynamo's Flash Indexer's): valid while prefix_closed_;
  /// checks every kJump-th block, for sequences of kJumpFrom blocks or more.
  static constexpr size_t kJump = 32;
  static constexpr size_t kJumpFrom = 4 * kJump;
  /// overlaps_jump() scans the blocks after a checkpoint for the workers that failed it when this
  /// many or more did, and binary-searches each one when fewer did.
  static constexpr size_t kScanFailing = 16;
  uint32_t overlaps_jump(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const;
  /// The entry path's step at block `i` (hash `h`) of a scan: each worker holding h (live, with
  /// check_live) whose run reached i (out[w] == i) advances to i + 1. True if any did.
  bool advance_entries(uint64_t h, size_t i, double now_ms, std::span<uint32_t> out, bool check_live) const;
  /// A prefix-closed lookup's last step: out[w] counted the blocks of `seq` each worker holds,
  /// live or not; each worker's last counted block is checked live, and a worker whose is not is
  /// binary-searched for its live run. Returns the largest overlap.
  uint32_t settle_live(std::span<const uint64_t> seq, double now_ms, std::span<uint32_t> out) const;
  /// Binary search for how many blocks of `seq` worker w holds (live, with check_live), knowing it
  /// holds the first `good` and not the first `bad`: a prefix-closed lookup's last block of w.
  uint32_t last_held(uint32_t w, std::span<const uint64_t> seq, size_t good, size_t bad, double now_ms,
                     bool check_live) const;
  void record(uint32_t e);      // appends e's touch to its worker's order
  uint32_t oldest(uint32_t w);  // least recently used entry, or kNil
  void remove_entry(uint32_t e);
  void expire_worker(uint32_t w, double now_ms);
  void prune(uint32_t w);
  bool live(const Entry& e, double now_ms) const { return cfg_.ttl_ms <= 0 || e.last_used_ms + cfg_.ttl_ms > now_ms; }

  IndexConfig cfg_;
  bool lru_;                         // blocks age (TTL) or are pruned (budget): touch records are kept
  std::vector<FlatMaskMap> groups_;  // without lru_: per 64 workers, sequence hash -> holder bits
  std::vector<size_t> pending_;      // apply_bits' scratch: blocks stored per group
  HolderMap map_;                    // with lru_: sequence hash -> its holders (worker, Entry index)
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_entries_;
  std::vector<Worker> workers_;
  // Approximate mode, while only insert() (at non-decreasing times), expiry, pruning and clearing
  // have changed the index: a worker holding block k live holds blocks 0..k-1 live too. insert()
  // stores deepest-first at one time, so a block's prefix is always touched after it and at least
  // as recently, and expiry and pruning take the least recently touched first (leaves before
  // prefixes). Lookups may then jump (overlaps_jump). A removal event, or an insert earlier than
  // the one before it, ends it for good: lookups scan every block from then on.
  bool prefix_closed_ = true;
  double last_insert_ms_ = -1e300;
  mutable std::vector<uint32_t> matching_;  // overlaps_jump's workers still matching, then settle_live's run ends
  std::vector<uint32_t> touched_;           // store_blocks' scratch: each block's entry

 public:
  /// Bytes kept per block a worker holds: its holder entry, one LRU record and two of the map's
  /// 16-byte cells (a cell per holder; the map is at most half full). The simulator's configured
  /// KV state counts these.
  static constexpr size_t kBytesPerBlock = sizeof(Entry) + sizeof(Touch) + 2 * 16;
};

}  // namespace dyn::kv
