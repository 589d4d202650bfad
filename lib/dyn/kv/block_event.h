// The change a worker's KV event makes to the prefix index (SPEC 3.3), in router terms: what
// kvevents translates vLLM's events into and route::Router applies (route::KvEvent).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dyn::kv {

/// The storage tier a block lives on (Dynamo's StorageTier, KVBM's G1/G2/G3/G4): the engine's device
/// memory, host (pinned CPU) memory, local disk, and a pool shared by every worker (Dynamo's
/// External: Mooncake's store, KVBM's G4). A block may be on several at once.
enum class Tier : uint8_t { kDevice, kHost, kDisk, kShared };
inline constexpr size_t kTiers = 4;
/// The canonical medium name of a tier: "GPU", "CPU_PINNED", "DISK", "EXTERNAL".
const char* tier_name(Tier t);
/// The tier of an event's `medium` (Dynamo's StorageTier::from_kv_medium): none, "GPU" or "DEVICE"
/// -> device; "CPU", "CPU_PINNED", "CPU_TIER1" -> host; "CPU_TIER2", "DISK", "NVME", "STORAGE" ->
/// disk; "EXTERNAL", "NETWORK", "REMOTE", "SHARED" -> the shared pool. nullopt for anything else,
/// which the feeds skip and count.
std::optional<Tier> tier_of_medium(std::optional<std::string_view> medium);

/// Blocks stored on or removed from one tier of one worker, or all of the worker's blocks on that
/// tier cleared.
struct BlockEvent {
  enum class Kind { kStored, kRemoved, kCleared } kind = Kind::kStored;
  std::vector<uint64_t> block_hashes;  ///< sequence hashes at the router block size
  std::optional<uint64_t> parent_hash;
  Tier tier = Tier::kDevice;
};

}  // namespace dyn::kv
