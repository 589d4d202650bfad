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
#include "dyn/base/named.h"

namespace dyn::kvevents {

/// Blocks newly cached by the engine. `block_hashes` are the engine's own block ids (vLLM:
/// a hash chained over the prefix, opaque to us); `token_ids` are the tokens of exactly these
/// blocks, block_size per block; `parent_block_hash` is the engine id of the block before the
/// first one (none for a prompt's first block). The fields after `medium` came with later vLLM
/// versions (vllm/distributed/kv_events.py): an adapter's name, the KV cache group of a hybrid
/// model (sliding window plus full attention) and that group's kind; they have initializers so
/// that an event written with the older fields alone need not name them.
struct BlockStored {
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash;
  std::vector<uint32_t> token_ids;
  uint32_t block_size = 0;  ///< 0 in vLLM's KV-offload placeholders (no tokens)
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;                   ///< "GPU", "CPU", ... (absent in older vLLM: the GPU)
  std::optional<std::string> lora_name = {};           ///< the LoRA adapter the blocks were computed under
  std::optional<uint32_t> group_idx = {};              ///< KV cache group (hybrid models); absent = the only one
  std::optional<std::string> kv_cache_spec_kind = {};  ///< "full_attention", "sliding_window", "mamba", ...
  std::optional<uint32_t> kv_cache_spec_sliding_window = {};
};
/// Blocks the engine evicted (engine ids) from one medium and group.
struct BlockRemoved {
  std::vector<uint64_t> block_hashes;
  std::optional<std::string> medium;
  std::optional<uint32_t> group_idx = {};
};
/// The engine dropped its whole prefix cache.
struct AllBlocksCleared {};

using Event = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

/// An event of a batch that could not be decoded: its index in the batch and why.
struct RejectedEvent {
  size_t index = 0;
  std::string reason;
};

/// One published batch: the events of one engine step, `ts` in seconds since the epoch.
struct EventBatch {
  double ts = 0;
  std::vector<Event> events;
  std::optional<int64_t> data_parallel_rank;  ///< vLLM >= 0.10 with DP; omitted when unset
  /// Decoding only: events of the payload that could not be decoded. They are left out of
  /// `events`; the others are kept, so one bad event never costs its batch.
  std::vector<RejectedEvent> rejected;
};

/// The three layouts vLLM has published (msgspec structs, vllm/distributed/kv_events.py):
/// - kArrays: batch and events array_like (older vLLM and SGLang; dyn-mocker's layout):
///     batch = [ts, [event...]] (+ data_parallel_rank when set)
///     event = ["BlockStored", block_hashes, parent|nil, token_ids, block_size, lora_id|nil,
///              medium|nil (, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
///              kv_cache_spec_sliding_window: written up to the last one set)]
///           | ["BlockRemoved", block_hashes, medium|nil (, group_idx when set)] | ["AllBlocksCleared"]
/// - kMapEvents: the batch an array, each event a map tagged {"type": "BlockStored", field: value}
///   with omit_defaults (fields that have a default are left out when unset; lora_id, medium and
///   lora_name have none and are always written, nil when unset);
/// - kMaps: the batch a map too ({"ts", "events", "data_parallel_rank" when set}), current vLLM.
enum class Layout { kArrays, kMapEvents, kMaps };

/// The two encodings a publisher chooses between (dyn-mocker --kv-events-encoding): what vLLM
/// publishes today and what older vLLM (before its structs dropped array_like) and SGLang publish.
/// Both are decoded everywhere; kMapEvents, a layout only some vLLM versions wrote, is decoded
/// but never published.
inline constexpr Named<Layout> kEncodings[] = {
    {Layout::kMaps, "map", "batch and events as msgpack maps, as current vLLM publishes them"},
    {Layout::kArrays, "array", "batch and events as arrays (array_like), as older vLLM and SGLang publish them"},
};

/// Encodes a batch as vLLM's msgspec encoder does in `layout`: integers in their smallest
/// msgpack form, strings as str, none as nil. (`rejected` is not encoded.)
std::string encode_batch(const EventBatch& batch, Layout layout = Layout::kArrays);

/// Decodes a payload from any vLLM/SGLang version seen so far, in any Layout (extra trailing
/// fields such as extra_keys are ignored, missing trailing optional fields are none). A block
/// hash may be an int (negative ones are taken as their 64-bit two's complement) or bytes (newer
/// vLLM's ExternalBlockHash; folded to their last 8 bytes, big-endian).
/// An event that cannot be decoded (unknown tag, a field of the wrong type, a token id outside
/// u32) goes to EventBatch::rejected with its index and field, and the batch's other events are
/// decoded. Errors (exit code 3) only for a payload with no usable batch: malformed msgpack,
/// trailing bytes, no ts or events, a data_parallel_rank that is not an int.
Expected<EventBatch> decode_batch(std::string_view payload);

/// "BlockStored", "BlockRemoved", "AllBlocksCleared".
const char* event_tag(const Event& e);

}  // namespace dyn::kvevents
