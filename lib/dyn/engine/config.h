// Engine settings and the timing model of SPEC 8 (Dynamo mocker defaults and polynomials).
#pragma once

#include <cstdint>
#include <string>

#include "dyn/base/defaults.h"
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
enum class KvEviction { kLru, kSession };

/// Names of --kv-eviction.
inline constexpr Named<KvEviction> kKvEvictions[] = {
    {KvEviction::kLru, "lru", "least recently used first, as vLLM"},
    {KvEviction::kSession, "session",
     "the blocks of sessions whose last turn said x-dynamo-session-final first, then LRU"},
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

/// Settings of one simulated inference worker. Defaults follow SPEC 8 (Dynamo's mocker).
struct EngineConfig {
  uint32_t block_size = kDefaultKvBlockSize;  ///< tokens per KV block
  uint64_t num_blocks = kDefaultKvBlocks;     ///< KV blocks in the pool (--num-gpu-blocks-override)
  uint32_t max_num_seqs = 256;                ///< cap on running sequences
  uint32_t max_num_batched_tokens = 8192;     ///< per-step token budget (prefill chunks + decodes)
  bool enable_prefix_caching = true;          ///< reuse full blocks by sequence hash
  bool enable_chunked_prefill = true;         ///< split long prompts across steps
  double speedup_ratio = 1.0;                 ///< divides every step time (> 0)
  bool kv_events = false;                     ///< record stored/removed events for a router (SPEC 3.3)
  KvEviction kv_eviction = KvEviction::kLru;  ///< --kv-eviction
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  bool low_priority_values_first = true;  ///< kPriority's polarity (see SchedulingPolicy)

  /// "" when valid, else a message naming the bad setting (zero sizes, speedup <= 0).
  std::string validate() const;
};

/// SPEC 8 prefill time in ms for `new_tokens` uncached tokens computed in one step:
/// 4.209989e-07·T² + 1.518344e-02·T + 16.50142; 0 when T = 0 (fully cached prompt).
double prefill_time_ms(uint64_t new_tokens);

/// SPEC 8 decode step time in ms at KV utilisation u (active KV blocks / total blocks, 0..1):
/// −25.74·u² + 54.01·u + 5.74, at least 1.0.
double decode_time_ms(double kv_utilisation);

}  // namespace dyn::engine
