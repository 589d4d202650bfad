// The change a worker's KV event makes to the prefix index (SPEC 3.3), in router terms: what
// kvevents translates vLLM's events into and route::Router applies (route::KvEvent).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace dyn::kv {

/// Blocks stored on or removed from one worker, or all of its blocks cleared.
struct BlockEvent {
  enum class Kind { kStored, kRemoved, kCleared } kind = Kind::kStored;
  std::vector<uint64_t> block_hashes;  ///< sequence hashes at the router block size
  std::optional<uint64_t> parent_hash;
};

}  // namespace dyn::kv
