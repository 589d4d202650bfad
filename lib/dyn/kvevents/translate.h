// Engine block ids -> router sequence hashes (SPEC 4.1), one translator per worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/kvevents/codec.h"

namespace dyn::kvevents {

/// What one engine event means for the router's index of that worker, in router terms.
struct IndexUpdate {
  enum class Kind { kStored, kRemoved, kCleared } kind = Kind::kStored;
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
/// Block sizes: when the engine's block size equals the router's (the supported case) the mapping
/// is one to one. A different engine size is translated too (router blocks are cut from the
/// concatenated tokens: exact for stores, and an engine block's removal drops the router blocks
/// that ended in it), but the caller decides whether to accept it (see block_size_ok()).
/// Not thread-safe: one subscriber thread owns it.
class Translator {
 public:
  explicit Translator(uint32_t router_block_size);

  /// Appends the updates for `e` to `out`. Errors (the event is skipped, the rest of the state
  /// stays valid): a BlockStored whose token count is not block_hashes × block_size, or whose
  /// parent the translator never saw (events were missed: the caller should resynchronise).
  std::optional<Error> translate(const Event& e, std::vector<IndexUpdate>& out);

  /// Forgets every engine block (after AllBlocksCleared, a gap that could not be replayed, or
  /// a publisher restart).
  void clear() { blocks_.clear(); }
  /// Engine blocks currently known.
  size_t known_blocks() const { return blocks_.size(); }
  /// The engine block size seen in the last BlockStored (0 = none yet).
  uint32_t engine_block_size() const { return engine_block_size_; }

 private:
  struct State {
    std::optional<uint64_t> last_seq;  ///< router sequence hash of the last complete router block
    std::vector<uint32_t> tail;        ///< tokens after it (< router block size)
    std::vector<uint64_t> completed;   ///< router blocks that ended inside this engine block
  };
  uint32_t router_bs_;
  uint32_t engine_block_size_ = 0;
  std::unordered_map<uint64_t, State> blocks_;
};

}  // namespace dyn::kvevents
