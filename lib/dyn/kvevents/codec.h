// vLLM's KV event wire format: the msgpack encoding of KVEventBatch (vllm/distributed/kv_events.py,
// as documented by vLLM's examples/online_serving/kv_events_subscriber.py; SGLang publishes the same).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dyn/base/error.h"

namespace dyn::kvevents {

/// Blocks newly cached by the engine. `block_hashes` are the engine's own block ids (vLLM:
/// a hash chained over the prefix, opaque to us); `token_ids` are the tokens of exactly these
/// blocks, block_size per block; `parent_block_hash` is the engine id of the block before the
/// first one (none for a prompt's first block).
struct BlockStored {
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash;
  std::vector<uint32_t> token_ids;
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;  ///< "GPU", "CPU", ... (absent in older vLLM)
};
/// Blocks the engine evicted (engine ids).
struct BlockRemoved {
  std::vector<uint64_t> block_hashes;
  std::optional<std::string> medium;
};
/// The engine dropped its whole prefix cache.
struct AllBlocksCleared {};

using Event = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

/// One published batch: the events of one engine step, `ts` in seconds since the epoch.
struct EventBatch {
  double ts = 0;
  std::vector<Event> events;
  std::optional<int64_t> data_parallel_rank;  ///< vLLM >= 0.10 with DP; omitted when unset
};

/// Encodes a batch exactly as vLLM's msgspec encoder does for its array_like tagged structs:
///   batch  = [ts(float64), [event...]] (+ data_parallel_rank when set)
///   event  = ["BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size,
///             lora_id|nil, medium|nil] | ["BlockRemoved", block_hashes, medium|nil]
///            | ["AllBlocksCleared"]
/// Integers take their smallest msgpack form, strings are str, none is nil. (The fields follow
/// the classes of vLLM's documented subscriber; newer fields such as lora_name are not emitted.)
std::string encode_batch(const EventBatch& batch);

/// Decodes a payload from any vLLM/SGLang version seen so far: array_like structs (extra
/// trailing fields such as lora_name, extra_keys or group_idx are ignored, missing trailing
/// optional fields are none) or map-encoded structs ({"type": tag, field: value}). A block hash
/// may be an int (negative ones are taken as their 64-bit two's complement) or bytes (newer vLLM's
/// ExternalBlockHash; folded to their last 8 bytes, big-endian). Errors (exit code 3) name the
/// event index and field: malformed msgpack, unknown tag, wrong types, a token id outside u32.
Expected<EventBatch> decode_batch(std::string_view payload);

/// "BlockStored", "BlockRemoved", "AllBlocksCleared".
const char* event_tag(const Event& e);

}  // namespace dyn::kvevents
