// Router settings (SPEC 2.1, 3.1-3.3): one struct shared by dyn-route decide/serve and the simulator.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/base/named.h"

namespace dyn::route {

/// SPEC 3.1 routing modes (`--router-mode`).
enum class Mode { kRoundRobin, kRandom, kPowerOfTwo, kLeastLoaded, kKv, kDirect };

/// Every routing mode, in help order: the one list that parse_mode, mode_name, the CLI's choices,
/// --help, man pages and completions draw from. A new mode is its enumerator in Mode, an entry
/// here (in enum order) and its row in kPolicies (router.cpp), whose static_asserts fail the build
/// when the row is missing or out of order.
inline constexpr Named<Mode> kModes[] = {
    {Mode::kRoundRobin, "round-robin", ""},   {Mode::kRandom, "random", ""},
    {Mode::kPowerOfTwo, "power-of-two", ""},  {Mode::kLeastLoaded, "least-loaded", ""},
    {Mode::kKv, "kv", "KV-aware cost model"}, {Mode::kDirect, "direct", "caller names the worker"},
};
/// The mode's name in kModes.
const char* mode_name(Mode m);
/// Parses a mode name (exact, lower-case); nullopt for anything else.
std::optional<Mode> parse_mode(std::string_view name);

/// SPEC 2.3 affinity modes (`--router-session-affinity-mode`).
enum class AffinityMode { kHard, kSoft };
inline constexpr Named<AffinityMode> kAffinityModes[] = {
    {AffinityMode::kHard, "hard", "the bound worker is the only candidate"},
    {AffinityMode::kSoft, "soft", "it is a preference kept while eligible"},
};
const char* affinity_mode_name(AffinityMode m);
std::optional<AffinityMode> parse_affinity_mode(std::string_view name);

/// The shared KV pool the cost model credits (SPEC 3.2, Dynamo's --shared-cache-type none|hicache).
/// Dynamo asks SGLang HiCache's Mooncake master; dyn learns the pool from the workers' KV events
/// on the shared medium ("EXTERNAL": KVBM's G4, which the engine model publishes).
enum class SharedCacheType { kNone, kEvents };
inline constexpr Named<SharedCacheType> kSharedCacheTypes[] = {
    {SharedCacheType::kNone, "none", "no shared pool"},
    {SharedCacheType::kEvents, "events", "the pool is learned from KV events on the EXTERNAL medium"},
};

/// Every router setting. Defaults are the SPEC / Dynamo defaults. Units are in the names.
struct RouterConfig {
  Mode mode = Mode::kRoundRobin;
  /// Session affinity idle TTL in seconds (SPEC 2.1); 0 = affinity off. Valid: 1 … 31,536,000.
  uint32_t affinity_ttl_secs = 0;
  AffinityMode affinity_mode = AffinityMode::kHard;
  /// Router KV block size in tokens (`--kv-cache-block-size`). Must equal the workers' size.
  uint32_t block_size = kDefaultKvBlockSize;
  /// cost = overlap_score_weight × prefill_blocks + decode_blocks (SPEC 3.2). >= 0.
  double overlap_score_weight = 1.0;
  /// Selection temperature (SPEC 3.2); 0 = lowest cost. >= 0.
  double temperature = 0.0;
  /// Approximate index: lifetime of a routed block without reuse, seconds (`--router-ttl-secs`).
  double kv_ttl_secs = 120.0;
  /// Feed the index from worker KV events (stored/removed/cleared) instead of guessing.
  bool kv_events = false;
  /// Overlap credit of a block on a lower tier, as a fraction of a device block's (SPEC 3.2;
  /// Dynamo's --router-host-cache-hit-weight 0.75, --router-disk-cache-hit-weight 0.25). 0 and 0 =
  /// GPU-only credit. Each in [0, 1].
  double host_cache_hit_weight = 0.75;
  double disk_cache_hit_weight = 0.25;
  /// Approximate index: seconds a routed block is predicted on the worker's host (G2) / disk (G3)
  /// tier since its last use (`--router-host-ttl-secs`, `--router-disk-ttl-secs`); 0 = that tier
  /// is not predicted. A lower tier's TTL exceeds the TTL of every tier above it. Event-fed mode
  /// takes lower-tier residency from the events instead (these must be 0 then).
  double host_ttl_secs = 0;
  double disk_ttl_secs = 0;
  /// The shared pool and the credit of its blocks beyond a worker's GPU run (SPEC 3.2); the
  /// multiplier defaults to 0.5 with a pool and must be 0 without one. [0, 1].
  SharedCacheType shared_cache_type = SharedCacheType::kNone;
  std::optional<double> shared_cache_multiplier;
  double shared_multiplier() const {
    return shared_cache_multiplier.value_or(shared_cache_type == SharedCacheType::kNone ? 0.0 : 0.5);
  }
  /// Predicted host / disk tier budget per worker in blocks; 0 = bounded by the TTL only.
  uint64_t host_max_tree_size = 0;
  uint64_t disk_max_tree_size = 0;
  /// Approximate index budget per worker in blocks; 0 = worker_kv_blocks (`--router-max-tree-size`).
  uint64_t max_tree_size = 0;
  /// Prune to this fraction of the budget (SPEC 3.3: 0.8). (0, 1].
  double prune_target_ratio = 0.8;
  /// KV capacity of each worker in router blocks: the base of the decode-blocks threshold
  /// (SPEC 8 default 16,384).
  uint64_t worker_kv_blocks = kDefaultKvBlocks;
  /// Busy when active decode blocks > threshold × worker_kv_blocks (fraction 0–1). Unset = never.
  std::optional<double> active_decode_blocks_threshold;
  /// Busy when prefill tokens in flight > threshold. Unset = never.
  std::optional<uint64_t> active_prefill_tokens_threshold;
  /// Busy when prefill tokens in flight > threshold × max_num_batched_tokens (Dynamo's
  /// --active-prefill-tokens-threshold-frac). Unset = never. >= 0.
  std::optional<double> active_prefill_tokens_threshold_frac;
  /// Each worker's token budget per engine step, the base of the fraction above (SPEC 8: 8,192).
  uint64_t max_num_batched_tokens = 8192;
  /// Busy when requests in flight on the worker >= threshold (dyn's; a worker at its count takes
  /// no more). Unset = never. >= 1.
  std::optional<uint64_t> active_requests_threshold;
  /// Seed of the one generator behind every random choice (SPEC 3.1).
  uint64_t seed = 0;
  /// Live binding limit (SPEC 2.1: 65,536); a new binding beyond it fails with HTTP 503.
  uint64_t max_bindings = 65536;
  /// Longest a request waits for an "initializing" binding of its key (SPEC 2.2.2) before it
  /// places itself without the binding, in ms of real (steady) time: a waiter blocks a thread, so
  /// this bound holds even when the router runs on a virtual clock.
  double init_wait_ms = 30'000;

  bool affinity_enabled() const { return affinity_ttl_secs > 0; }
  /// Checks ranges (TTL 1 … 31,536,000 when set, block size > 0, weights >= 0, thresholds in
  /// range, ratio in (0, 1]) and that kv_events comes with Mode::kKv, the one policy that reads
  /// the index. Returns an Error (exit code 2, usage) naming the flag, or nullopt.
  std::optional<Error> validate() const;
};

inline constexpr uint32_t kMaxAffinityTtlSecs = 31'536'000;

}  // namespace dyn::route
