// KV cache tiers below the GPU (SPEC 8.7, issue 48): G2 host, G3 disk and a G4 pool shared by the
// engines of one process, the processor-sharing links between them, and the per-engine offload and
// onboard bookkeeping, after Dynamo mocker's kvbm_offload model.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <span>
#include <vector>

#include "dyn/engine/config.h"
#include "dyn/engine/kv_pool.h"

namespace dyn::engine {

/// The `medium` a KV event carries for a tier, as Dynamo's router spells it
/// (kv-router protocols.rs StorageTier::to_kv_medium; vLLM's BlockStored.medium): "GPU",
/// "CPU_PINNED", "DISK", "EXTERNAL".
std::string_view tier_medium(Tier t);

/// A processor-sharing link (Dynamo mocker bandwidth_sharing_model.rs): N transfers in flight each
/// progress at B/N; when one completes the others speed up. Time in ms on the caller's clock,
/// never going back (an earlier time is taken as the last one).
class Link {
 public:
  /// `gbps`: 1e9 bytes per second; <= 0 = unbounded (a transfer completes when it starts).
  explicit Link(double gbps) : bytes_per_ms_(gbps > 0 ? gbps * 1e6 : 0) {}
  /// Starts a transfer of `bytes` at `now_ms`; returns its id (unique on this link).
  uint64_t start(double now_ms, double bytes);
  /// When the next transfer completes if none starts meanwhile (+inf when idle).
  double next_finish_ms() const;
  /// Moves the clock to `now_ms`, appending the transfers completed by then (completion order).
  void advance(double now_ms, std::vector<uint64_t>& done);
  size_t active() const { return active_.size(); }

 private:
  std::vector<uint64_t> finished_;  // completed while start() moved the clock, not yet reported
  struct Transfer {
    uint64_t id;
    double remaining;  // bytes
  };
  double bytes_per_ms_;  // 0 = unbounded
  double now_ = 0;
  uint64_t next_id_ = 1;
  std::vector<Transfer> active_;
};

/// The blocks one lower tier holds: a set of sequence hashes with a capacity, least recently used
/// evicted first. A block is `ready` once the copy that brought it has landed; until then it is
/// held (its slot taken, its store event sent) but not readable.
class TierStore {
 public:
  explicit TierStore(uint64_t capacity) : capacity_(capacity) {}
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return map_.size(); }
  bool contains(uint64_t h) const { return map_.count(h) > 0; }
  bool ready(uint64_t h) const {
    auto it = map_.find(h);
    return it != map_.end() && it->second.ready;
  }
  /// Inserts `h` (not ready) as the most recently used block, evicting the least recently used
  /// ones into `evicted` to make room. Present already: touched only.
  void insert(uint64_t h, std::optional<uint64_t> parent, std::vector<uint64_t>& evicted);
  void set_ready(uint64_t h);
  void touch(uint64_t h);
  std::optional<uint64_t> parent(uint64_t h) const;

 private:
  struct Entry {
    std::list<uint64_t>::iterator pos;
    std::optional<uint64_t> parent;
    bool ready = false;
  };
  uint64_t capacity_;
  std::list<uint64_t> lru_;  // front = oldest
  std::unordered_map<uint64_t, Entry> map_;
};

/// The G4 tier of one process: its store and its two links, shared by every engine that holds
/// it (dyn-replay --sim: all workers; dyn-mocker: its one engine). Completions of a transfer an
/// engine started are handed back to that engine, whichever engine's clock moved the link.
class SharedTier {
 public:
  explicit SharedTier(const TierConfig& cfg) : store(cfg.g4_blocks), up(cfg.g4_to_g2_gbps), down(cfg.g2_to_g4_gbps) {}
  TierStore store;
  Link up, down;  // up: G4 -> G2, down: G2 -> G4
  /// transfer id on `up` / `down` -> (owner, its completion handler); an owner going away
  /// forgets its own (forget()).
  using Handlers = std::unordered_map<uint64_t, std::pair<const void*, std::function<void(double)>>>;
  Handlers up_owner, down_owner;
  void forget(const void* owner);
  /// Moves both links to `now_ms`, running each completion's handler at its completion time.
  void advance(double now_ms);
  double next_finish_ms() const;
};

/// Counters of one engine's tiers (EngineStats, dyn-mocker /metrics).
struct TierStats {
  uint64_t used[5] = {}, capacity[5] = {};  ///< blocks per tier, indexed by Tier (G2..G4; G4 shared)
  uint64_t offloaded_bytes = 0;             ///< G1 -> G2 copies started
  uint64_t onboarded_bytes = 0;             ///< G2 -> G1 copies started
  uint64_t onboarded_blocks[5] = {};        ///< blocks onboarded, by the tier they came from
};

/// One engine's tiers below G1 (SPEC 8.7): its G2 and G3 stores and links, the shared G4, and the
/// transfers between them. The engine calls it with its own clock (ms, never going back):
/// - on_g1_evict() from inside the G1 pool's eviction, before the G1 remove event: the victim is
///   stored on G2 (store event at once, data readable when its batch's G1->G2 copy lands); the
///   G1 slot is free at once (Dynamo holds it until the copy lands: see SPEC 8.7);
/// - flush() after a step: evictions not yet sent start as one partial batch;
/// - a block landing on G2 is written through to G3 (one batch in flight, as Dynamo's G2->G3
///   pipeline) and to G4 (Dynamo's chained pipelines), so a G2 eviction loses nothing G3/G4 hold;
/// - match() and onboard() before prefill: the blocks continuing a request's G1 prefix on lower
///   tiers (each from the highest tier holding it ready) are staged G3/G4 -> G2, then G2 -> G1.
class Tiers {
 public:
  using EventSink = std::function<void(KvEvent)>;
  /// `block_bytes`: block_size x kv_bytes_per_token; `speedup` (> 0): the engine's --speedup-ratio,
  /// which divides transfer times as it divides step times (SPEC 8.7; byte counts stay real);
  /// `g4`: the process's shared pool (null: none).
  Tiers(const TierConfig& cfg, uint64_t block_bytes, double speedup, std::shared_ptr<SharedTier> g4, EventSink events);
  ~Tiers();
  Tiers(const Tiers&) = delete;
  Tiers& operator=(const Tiers&) = delete;

  void on_g1_evict(uint64_t h, std::optional<uint64_t> parent, double now_ms);
  void flush(double now_ms);
  /// Runs every transfer completion up to `now_ms` at its own time (a completion can start the
  /// next leg: a staged block's G2 -> G1 copy, a write-through copy).
  void advance(double now_ms);
  /// The next completion on any link this engine uses (+inf when none).
  double next_finish_ms() const;
  /// The lower tier of each of hashes[from..] continuing the prefix, stopping at the first block
  /// no lower tier holds ready (tier-exclusive, highest tier first).
  void match(std::span<const uint64_t> hashes, size_t from, std::vector<Tier>& out) const;
  /// Starts onboarding hashes[from .. from + tiers.size()) (tiers from match()); `done` runs at
  /// the time the last block has landed in G1 (at once when there is nothing to move).
  void onboard(std::span<const uint64_t> hashes, size_t from, const std::vector<Tier>& tiers, double now_ms,
               std::function<void(double)> done);
  TierStats stats() const;

 private:
  struct Batch {
    std::vector<uint64_t> hashes;
    std::function<void(double)> done;  // onboard legs: the request's count
  };
  void emit(KvEvent::Kind kind, Tier t, uint64_t h, std::optional<uint64_t> parent);
  void store_g2(uint64_t h, std::optional<uint64_t> parent, bool ready);
  void landed_g2(const std::vector<uint64_t>& hashes, double t);
  void start_g3_write(double t);
  void up_to_g1(std::vector<uint64_t> hashes, double t, std::function<void(double)> done);
  void run_link(Link& link, std::unordered_map<uint64_t, Batch>& pending, double t);

  TierConfig cfg_;
  double block_bytes_;
  double link_scale_;  // 1 / speedup: a link moves block_bytes_ x this per block
  std::shared_ptr<SharedTier> g4_;
  EventSink events_;
  TierStore g2_, g3_;
  Link g1_g2_, g2_g1_, g2_g3_, g3_g2_;
  std::unordered_map<uint64_t, Batch> g1_g2_pending_, g2_g1_pending_, g2_g3_pending_, g3_g2_pending_;
  std::vector<uint64_t> batch_;                  // evictions not yet sent
  std::vector<std::vector<uint64_t>> g3_queue_;  // write-through batches waiting for the G2 -> G3 link
  std::vector<uint64_t> evicted_;                // scratch
  TierStats st_;
};

}  // namespace dyn::engine
