// Engine defaults that several modules and tools share (SPEC 8's default engine, which is Dynamo's
// mocker's): one definition, referenced everywhere, so a default never drifts between the router,
// the engine, the simulator and the reports.
#pragma once

#include <cstdint>

namespace dyn {

/// Tokens per KV block: the engine's block (dyn-mocker --block-size), the router's
/// (--kv-cache-block-size), the trace's sequence-hash block and the reports' engine block for the
/// theoretical hit rate (SPEC 3.1, 5.1, 8).
inline constexpr uint32_t kDefaultKvBlockSize = 64;

/// KV blocks in each worker's pool (dyn-mocker --num-gpu-blocks-override; the router's and the
/// admission controller's capacity estimate when the workers' size is not given) (SPEC 8, 9).
inline constexpr uint64_t kDefaultKvBlocks = 16384;

}  // namespace dyn
