// Engine settings and the default timing model of SPEC 8 (Dynamo mocker defaults and polynomials).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/base/named.h"

namespace dyn::engine {

/// Which inactive cached blocks an engine evicts first (SPEC 8, --kv-eviction).
/// - kLru: least recently used (vLLM's and SGLang's rule).
/// - kSession: the blocks of finished sessions first (their last turn said so, as
///   x-dynamo-session-final does), least recently used among them, then LRU for the rest. Only a
///   session's own blocks go early: one another session has held too (a shared system prompt)
///   stays in the LRU. Idle sessions are not ranked by predicted return: with tool times drawn
///   alike, ordering them by release time plus a mean gap is MRU, which measured far worse than
///   LRU (agent workload 52 % vs 57 % hit, sessionized Mooncake 8 % vs 26 %).
/// - kPriority: SGLang's --radix-eviction-policy priority: the blocks of the least important
///   requests first, least recently used among equals; a block several requests held keeps the
///   most important of their priorities. Importance follows the scheduler's polarity
///   (EngineConfig::low_priority_values_first: lower values are more important unless SGLang's
///   --enable-priority-scheduling is given without --schedule-low-priority-values-first), so
///   the request scheduled first is also the one whose blocks stay longest.
enum class KvEviction { kLru, kSession, kPriority };

/// Names of --kv-eviction.
inline constexpr Named<KvEviction> kKvEvictions[] = {
    {KvEviction::kLru, "lru", "least recently used first, as vLLM"},
    {KvEviction::kSession, "session",
     "the blocks of sessions whose last turn said x-dynamo-session-final first, then LRU"},
    {KvEviction::kPriority, "priority",
     "the blocks of the least important requests first (priority polarity as --scheduling-policy), LRU among "
     "equals, as SGLang's --radix-eviction-policy priority"},
};

/// How an engine admits waiting requests (SPEC 8).
/// - kFcfs: arrival order.
/// - kPriority: by RequestSpec::priority, ties in arrival order; the polarity is
///   EngineConfig::low_priority_values_first (vLLM --scheduling-policy priority: lower values
///   first; SGLang --enable-priority-scheduling: higher first unless
///   --schedule-low-priority-values-first). A preempted request still goes back first.
enum class SchedulingPolicy { kFcfs, kPriority };

/// Names of --scheduling-policy (vLLM's).
inline constexpr Named<SchedulingPolicy> kSchedulingPolicies[] = {
    {SchedulingPolicy::kFcfs, "fcfs", "waiting requests in arrival order"},
    {SchedulingPolicy::kPriority, "priority", "waiting requests by the request's priority, lower values first (vLLM)"},
};

class PerfProfile;
class SharedTier;

/// Settings of the lower tiers (Dynamo mocker kvbm_offload/config.rs names and defaults). Off
/// unless g2_blocks > 0; then EngineConfig::kv_bytes_per_token must be set (a block moves
/// block_size x kv_bytes_per_token bytes). Bandwidths in GB/s (1e9 bytes/s); 0 = unbounded.
struct TierConfig {
  uint64_t g2_blocks = 0;            ///< --num-g2-blocks: host memory blocks per engine
  uint64_t g3_blocks = 0;            ///< --num-g3-blocks: local disk blocks per engine (0 = no G3)
  uint64_t g4_blocks = 0;            ///< --num-g4-blocks: the shared pool's blocks, all engines together (0 = no G4)
  uint32_t offload_batch_size = 32;  ///< --offload-batch-size: G1 evictions per G1->G2 transfer
  double g1_to_g2_gbps = 14, g2_to_g1_gbps = 14;
  double g2_to_g3_gbps = 7, g3_to_g2_gbps = 7;
  double g2_to_g4_gbps = 4, g4_to_g2_gbps = 4;
  bool enabled() const { return g2_blocks > 0; }
  /// "" when whole, else the message naming the missing flag (a half-given tier: G3/G4 without
  /// G2, G2 without the bytes a block moves). Dynamo's mocker silently runs without offload then.
  std::string validate(uint64_t kv_bytes_per_token) const;
};

/// Bounds on leases (SPEC 8.6). A pin is a lease, never a leak: at most `max_pinned_fraction`
/// of G1's blocks are pinned at once (Dynamo's continuum experiment capped retained G1 at 40 %
/// and 25 %: 40 % recovered the most targeted reuse, 62.9 %), and no lease outlives
/// `max_ttl_s` (that experiment's fixed TTL, 300 s).
struct KvHintLimits {
  bool enabled = false;  ///< the engine takes hints (dyn-mocker); off: no session lineage is kept
  double max_pinned_fraction = 0.4;
  double max_ttl_s = 300;
  uint64_t max_sessions = 16384;  ///< sessions whose latest blocks are kept (Dynamo's session-prefix index cap)
};

/// Settings of one simulated inference worker. Defaults follow SPEC 8 (Dynamo's mocker); the names
/// and meanings of the scheduler's are vLLM's.
struct EngineConfig {
  uint32_t block_size = kDefaultKvBlockSize;  ///< tokens per KV block (vLLM --block-size)
  uint64_t num_blocks = kDefaultKvBlocks;     ///< KV blocks in the pool (--num-gpu-blocks-override)
  uint32_t max_num_seqs = 256;                ///< cap on running sequences
  uint32_t max_num_batched_tokens = 8192;     ///< per-step token budget (prefill chunks + decodes)
  bool enable_prefix_caching = true;          ///< reuse full blocks by sequence hash
  bool enable_chunked_prefill = true;         ///< split long prompts across steps
  /// vLLM's prefill_schedule_interval: waiting requests are admitted (their prefill starts) only
  /// when at least this many steps have passed since the last step that computed prompt tokens,
  /// or when no running sequence has a token to decode instead. 1 = every step (vLLM's default).
  uint32_t prefill_schedule_interval = 1;
  /// vLLM's max_num_partial_prefills: at most this many sequences compute prompt tokens in one
  /// step (running ones continuing a chunked prefill first, then admissions); 0 = no limit.
  uint32_t max_num_partial_prefills = 0;
  /// vLLM's long_prefill_token_threshold (V1 scheduler.py): a sequence with more prompt tokens
  /// left to compute than this computes at most this many in one step, so one long prefill cannot
  /// fill a step and a request arriving behind it waits at most one short step; 0 = off. Needs
  /// enable_chunked_prefill (it splits prompts).
  uint64_t long_prefill_token_threshold = 0;
  double speedup_ratio = 1.0;                 ///< divides every step time (> 0)
  bool kv_events = false;                     ///< record stored/removed events for a router (SPEC 3.3)
  KvEviction kv_eviction = KvEviction::kLru;  ///< --kv-eviction
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  bool low_priority_values_first = true;  ///< kPriority's polarity (see SchedulingPolicy)
  /// The model's KV cache size per token in bytes, all of one engine's GPUs together
  /// (--kv-bytes-per-token; 0 = not given). Sizes the pool from a memory budget
  /// (kv_blocks_for_memory) and, for tiered caches, the bytes a block transfer moves.
  uint64_t kv_bytes_per_token = 0;
  /// The step timing (--perf-profile); null = SPEC 8's default polynomial (H200,
  /// Llama-3.1-8B-Instruct-FP8, TP1, vLLM).
  std::shared_ptr<const PerfProfile> profile;
  /// The tiers below G1 (SPEC 8.7; off unless tiers.g2_blocks > 0).
  TierConfig tiers;
  /// The process's shared G4 pool when tiers.g4_blocks > 0: dyn-replay --sim hands every worker
  /// the same one; null = the engine makes its own (dyn-mocker: one engine per process).
  std::shared_ptr<SharedTier> shared_g4;
  /// KV hints (SPEC 8.6): whether the engine takes them and the bounds of its leases.
  KvHintLimits kv_hints;

  /// "" when valid, else a message naming the bad setting (zero sizes, speedup <= 0, a tier
  /// half configured: lower tiers without --num-g2-blocks, G2 without --kv-bytes-per-token).
  std::string validate() const;
};

/// KV blocks that fit a memory budget, as vLLM sizes its cache (gpu_memory_utilization):
/// floor((gpu_memory_gib x utilization - reserved_gib) x 2^30 / (kv_bytes_per_token x block_size)).
/// `gpu_memory_gib`: memory of all the engine's GPUs; `reserved_gib`: what is not KV cache
/// (weights, activations, CUDA graphs). Errors (kExitUsage): a budget that holds no block, or
/// zero/negative sizes.
Expected<uint64_t> kv_blocks_for_memory(double gpu_memory_gib, double utilization, double reserved_gib,
                                        uint64_t kv_bytes_per_token, uint32_t block_size);

/// SPEC 8 prefill time in ms for `new_tokens` uncached tokens computed in one step:
/// 4.209989e-07·T² + 1.518344e-02·T + 16.50142; 0 when T = 0 (fully cached prompt).
double prefill_time_ms(uint64_t new_tokens);

/// SPEC 8 decode step time in ms at KV utilisation u (active KV blocks / total blocks, 0..1):
/// −25.74·u² + 54.01·u + 5.74, at least 1.0.
double decode_time_ms(double kv_utilisation);

}  // namespace dyn::engine
