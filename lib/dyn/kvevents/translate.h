// KV events -> the router's index (SPEC 3.3): the one translation of dyn-route serve, decide and
// dyn-replay --sim, from an engine's block ids to router sequence hashes, per medium and group.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dyn/kv/block_event.h"
#include "dyn/kvevents/codec.h"

namespace dyn::kvevents {

/// The device tier's medium: the engine's device memory, "GPU" in vLLM and SGLang. An event
/// without a medium is older vLLM's, whose events were all GPU blocks.
inline constexpr std::string_view kDeviceMedium = "GPU";

/// Why an event was not applied to a worker's index (counted per worker, never a whole batch).
enum class Skip : uint8_t {
  kUndecodable,     ///< the event could not be decoded (its batch's other events are applied)
  kOtherMedium,     ///< a medium of no tier the translator was asked for (an unknown name)
  kOtherGroup,      ///< a KV cache group other than the main (full) attention one
  kPlaceholder,     ///< a BlockStored without token ids or of block size 0 (vLLM's offload placeholders)
  kUnnamedAdapter,  ///< stored under a LoRA adapter known only by lora_id: no request can name it
  kBlockSize,       ///< refused by the caller's block size check
  kTokenCount,      ///< token ids are not block_hashes x block_size
  kUnknownParent,   ///< continues a block never stored (missed events)
};
inline constexpr size_t kSkipReasons = 8;
/// The metric label: "undecodable", "medium", "group", "placeholder", "adapter", "block_size",
/// "token_count", "parent".
const char* skip_name(Skip s);
/// True for the reasons that mean lost or malformed events (undecodable, adapter, token count,
/// parent), worth a warning; the others are traffic a router expects from a healthy engine.
bool is_problem(Skip s);

/// An event not applied: why, and a message naming it.
struct Skipped {
  Skip why = Skip::kUndecodable;
  std::string detail;
};

/// The LoRA adapters workers have stored blocks under (BlockStored lora_name), shared by every
/// worker's translator and read by the request path: a request whose model names one of them is
/// hashed under that adapter, as its blocks are (tokens::adapter_seed; Dynamo hashes a request's
/// blocks with its LoRA name, lib/kv-router protocols.rs, and serves an adapter under its name as
/// the model, as vLLM does). Thread-safe.
class Adapters {
 public:
  void add(std::string_view name);
  /// The block-hash seed of a request to `model`: the adapter's when `model` is a known adapter,
  /// else the base model's (tokens::kHashSeed).
  uint64_t seed_for(std::string_view model) const;

 private:
  std::atomic<bool> any_{false};
  mutable std::shared_mutex mu_;
  std::set<std::string, std::less<>> names_;
};

/// The media a WorkerFeed translates: one name per tier (device, host, disk, shared pool), Dynamo's canonical
/// spellings; an event's medium is matched to them by tier.
inline constexpr std::string_view kTieredMedia[] = {"GPU", "CPU_PINNED", "DISK", "EXTERNAL"};

/// What one engine event means for the router's index of that worker, in router terms.
struct IndexUpdate {
  enum class Kind { kStored, kRemoved, kCleared } kind = Kind::kStored;
  /// The medium the blocks are on: the translator's name for it (kv::tier_of_medium gives its tier).
  std::string medium{kDeviceMedium};
  /// Router sequence hashes (SPEC 4.1 at the router block size), prefix order for kStored.
  std::vector<uint64_t> sequence_hashes;
};

/// Turns one worker's engine events into router index updates.
///
/// An engine's block ids are its own (vLLM hashes with a per-process random seed), so the router
/// recomputes its sequence hashes from each BlockStored's token ids: router block k's hash is
/// XXH3 of its tokens chained onto the previous router block (tokens::chain_hash), exactly what the
/// router computes for a request from the same token ids. The translator remembers, for every
/// engine block it was told about, the router state at that block's end (the last complete router
/// block's sequence hash and the tokens after it), so a BlockStored that continues a parent is
/// translated without the earlier tokens, and a BlockRemoved names the router blocks it drops.
///
/// A block's identity is (medium, KV cache group, engine id), and the adapter it was computed
/// under is part of its router hash (tokens::adapter_seed of lora_name), so:
/// - an event on another medium (an offloaded CPU copy) never stores or removes a device block;
///   media of no tier in `media` are skipped (Skip::kOtherMedium). Media are matched by tier
///   (kv::tier_of_medium: "CPU" and "CPU_PINNED" are one tier, as in Dynamo);
/// - hybrid models (vLLM group_idx, kv_cache_spec_kind) reuse engine ids across groups: only the
///   main attention groups are indexed (full_attention, mla_attention, sink_full_attention; an
///   event naming no group is group 0). A group's kind is learned from the first BlockStored that
///   names both; an event of a group not known to be main is skipped, group 0 excepted (Dynamo's
///   kv-router ZMQ filter, filter_reason). A router block stays indexed while any engine block of
///   any group holds it: a removal in one group never drops what another still holds;
/// - blocks stored under an adapter never match requests to the base model.
///
/// Block sizes: when the engine's block size equals the router's (the supported case) the mapping
/// is one to one. A different engine size is translated too (router blocks are cut from the
/// concatenated tokens: exact for stores, and an engine block's removal drops the router blocks
/// that ended in it), but the caller decides whether to accept it (accept_block_size).
/// Not thread-safe: one subscriber thread owns it.
class Translator {
 public:
  /// `media`: the media translated, each with blocks of its own (default the device tier); each
  /// names a different tier (kv::tier_of_medium).
  /// `adapters` (may be null) learns the adapter names of stored blocks.
  explicit Translator(uint32_t router_block_size, std::vector<std::string> media = {std::string(kDeviceMedium)},
                      Adapters* adapters = nullptr);

  /// Appends the updates for `e` to `out`, or says why it was skipped (the rest of the state
  /// stays valid). `accept_block_size` (may be null) is asked about each BlockStored's block size
  /// once the event is known to be a usable device-tier store.
  std::optional<Skipped> translate(const Event& e, std::vector<IndexUpdate>& out,
                                   const std::function<bool(uint32_t)>* accept_block_size = nullptr);

  /// Forgets every engine block (after AllBlocksCleared, a gap that could not be replayed, or
  /// a publisher restart).
  void clear();
  /// Engine blocks currently known (all media and groups).
  size_t known_blocks() const { return blocks_.size(); }
  /// The engine block size seen in the last translated BlockStored (0 = none yet).
  uint32_t engine_block_size() const { return engine_block_size_; }

 private:
  struct Key {
    uint64_t engine_id;
    uint32_t group;
    uint32_t medium;  ///< index into media_
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct State {
    std::optional<uint64_t> last_seq;  ///< router sequence hash of the last complete router block
    std::vector<uint32_t> tail;        ///< tokens after it (< router block size)
    std::vector<uint64_t> completed;   ///< router blocks that ended inside this engine block
  };
  std::optional<uint32_t> medium_of(const std::optional<std::string>& m) const;
  bool main_group(std::optional<uint32_t> group, const std::optional<std::string>& kind);
  std::optional<Skipped> store(const BlockStored& s, uint32_t medium, std::vector<IndexUpdate>& out,
                               const std::function<bool(uint32_t)>* accept_block_size);
  void release(uint32_t medium, const std::vector<uint64_t>& seqs, std::vector<uint64_t>& dropped);

  uint32_t router_bs_;
  uint32_t engine_block_size_ = 0;
  std::vector<std::string> media_;
  Adapters* adapters_;
  std::unordered_map<Key, State, KeyHash> blocks_;
  /// Per medium: router sequence hash -> engine blocks (of any group) holding it.
  std::vector<std::unordered_map<uint64_t, uint32_t>> holders_;
  std::map<uint32_t, bool> group_is_main_;  ///< learned from BlockStored group_idx + kind
};

/// One worker's event counters (read by /metrics while the feed's thread writes them).
struct FeedCounts {
  std::atomic<uint64_t> stored{0}, removed{0}, cleared{0};    ///< events received, by type
  std::array<std::atomic<uint64_t>, kSkipReasons> skipped{};  ///< events not applied, by Skip
  std::atomic<uint64_t> engine_blocks{0};                     ///< Translator::known_blocks()
};

/// Where a feed's changes go: one worker's index (route::Router::apply_kv_events of that worker;
/// route::KvEvent is kv::BlockEvent), each change naming its tier; a batch's changes come in one
/// call, in order (the router applies them under one lock, loading cells ahead across them).
using IndexSink = std::function<void(std::span<const kv::BlockEvent>)>;

/// One worker's KV events into the router's index: the one path of dyn-route serve (a live ZMQ
/// stream), decide (recorded kv_event rows) and dyn-replay --sim (its engines' events), so the
/// same events give the same index everywhere. The device, host, disk and shared-pool tiers are
/// translated (kTieredMedia), each into its own index (SPEC 3.3). Every usable event of a batch is applied whatever
/// else the batch holds; each other one is skipped and counted (FeedCounts::skipped).
class WorkerFeed {
 public:
  WorkerFeed(uint32_t router_block_size, Adapters* adapters);

  /// Translates `batch` and gives the changes to `index`, in order.
  /// `accept_block_size`: the caller's policy for a usable store's block size (serve refuses a
  /// mismatched worker, decide warns and translates). `on_problem` gets the message of each
  /// skipped event that means lost or malformed events (is_problem).
  void apply(const EventBatch& batch, const IndexSink& index, const std::function<bool(uint32_t)>& accept_block_size,
             const std::function<void(const std::string&)>& on_problem);
  /// Gives updates already in router terms (the simulated engines publish router sequence
  /// hashes) to `index`, as for translated events; a medium of no tier is dropped.
  static void apply_updates(std::vector<IndexUpdate>& updates, const IndexSink& index);
  /// Forgets the worker's blocks, here and in `index` on every tier (missed events, a publisher
  /// restart).
  void reset(const IndexSink& index);

  const FeedCounts& counts() const { return counts_; }

 private:
  Translator tr_;
  FeedCounts counts_;
  std::vector<IndexUpdate> updates_;  // reused per batch
};

}  // namespace dyn::kvevents
