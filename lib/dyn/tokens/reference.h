// Yardsticks for prefix-cache hit rates (issue 18): one pooled KV cache holding the whole
// cluster's blocks, under LRU eviction or under Belady's clairvoyant MIN.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dyn/base/named.h"

namespace dyn::tokens {

/// One request as a reference cache sees it: the sequence hashes of its prompt's full engine
/// blocks (SPEC 3.1, in order), its input tokens, and the virtual or recorded time it held them
/// (ms; from dispatch to its last token).
struct ReferenceRequest {
  double start_ms = 0, end_ms = 0;
  uint64_t input_tokens = 0;
  std::vector<uint64_t> blocks;
};

/// The eviction rule of a pooled reference cache: `kLru` evicts the unpinned block used longest
/// ago (the engines' rule: the pool keeps freed blocks in LRU order, a request's tail first);
/// `kBelady` evicts the unpinned block whose next use lies furthest ahead (never used again
/// first), Belady's MIN, which no online policy beats on the same request order.
enum class ReferencePolicy { kLru, kBelady };

/// Names of `dyn-replay --sim --reference` and `dyn-bench report --reference`.
inline constexpr Named<ReferencePolicy> kReferencePolicies[] = {
    {ReferencePolicy::kLru, "pooled", "one cache of the cluster's KV blocks, LRU eviction"},
    {ReferencePolicy::kBelady, "belady", "the same cache, Belady's clairvoyant MIN eviction"},
};

/// Prompt tokens a single KV cache of `capacity_blocks` blocks (the cluster's sum) would have
/// served from cache for `requests`, taken in order of start (stable). A request's hit is its
/// leading blocks present at its start (SPEC 3.2 overlap) x block_size, at most its input tokens.
/// From start to end it pins its blocks (they cannot be evicted); a missing block takes a free
/// block or evicts an unpinned one by `policy` (among equals the deeper block first, as an
/// engine frees a request's tail first); when every block is pinned the rest of its prompt is
/// not cached. Ends at or before a start release first. Only prompt blocks are held (decode
/// blocks are not), so the figure is an upper bound for engines with the same capacity and
/// request timing. Pure; O(blocks x log(capacity)).
uint64_t reference_hit_tokens(std::span<const ReferenceRequest> requests, uint64_t capacity_blocks, uint32_t block_size,
                              ReferencePolicy policy);

}  // namespace dyn::tokens
