// Tokens, block hashes and sequence hashes (SPEC 4.1, 4.2), Dynamo-compatible.
#pragma once

#include <algorithm>
#include <string>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dyn/kv/flat_map.h"

namespace dyn::tokens {

/// Seed of every XXH3-64 hash in the toolkit (SPEC 4.1, Dynamo's kv-router).
inline constexpr uint64_t kHashSeed = 1337;

/// SPEC 4.2: one token = 4 bytes of UTF-8, token i = bytes [4i, 4i+4) as little-endian u32, the
/// last token zero-padded. Result size = ceil(text.size() / 4).
std::vector<uint32_t> text_to_tokens(std::string_view text);
/// ceil(bytes / 4) without materializing tokens.
inline uint64_t token_count(uint64_t bytes) { return (bytes + 3) / 4; }

/// XXH3-64(seed 1337) of the tokens as little-endian u32 bytes (one block's hash).
uint64_t hash_tokens(std::span<const uint32_t> tokens);
/// The same with another seed (adapter_seed: blocks cached under a LoRA adapter).
uint64_t hash_tokens(std::span<const uint32_t> tokens, uint64_t seed);
/// The block-hash seed of blocks computed under LoRA adapter `lora_name`: kHashSeed plus XXH3-64
/// (seed 0) of the name, wrapping; kHashSeed for "" (the base model). Sequence hashes chain with
/// kHashSeed either way (Dynamo lib/kv-router protocols.rs compute_block_hash_for_seq), so an
/// adapter's blocks never match the base model's or another adapter's.
uint64_t adapter_seed(std::string_view lora_name);
/// Chains a sequence hash: XXH3-64(seed 1337) over the little-endian bytes of (prev, block).
uint64_t chain_hash(uint64_t prev_sequence_hash, uint64_t block_hash);

/// Hashes of the complete blocks of `tokens` (floor(n / block_size) values); with
/// `include_partial` a trailing partial block is hashed too (replay traces, SPEC 4.1).
/// block_size must be > 0. `seed`: adapter_seed() of the request's adapter.
std::vector<uint64_t> block_hashes(std::span<const uint32_t> tokens, uint32_t block_size, bool include_partial = false,
                                   uint64_t seed = kHashSeed);
/// block_hashes(text_to_tokens(text), ...) without the token copy: a token is the text's own 4
/// bytes (SPEC 4.2), so each block is hashed where it lies in `text`; only the block holding a
/// zero-padded last token is copied. Same values. Issue 54: a 150k-token prompt was copied once
/// more just to be hashed.
std::vector<uint64_t> text_block_hashes(std::string_view text, uint32_t block_size, bool include_partial = false,
                                        uint64_t seed = kHashSeed);
/// text_block_hashes of a text that arrives in pieces (a rendered prompt as the renderer appends
/// it, render_request_dom): each block is hashed where it lies in the piece that holds it whole;
/// only a block that straddles two pieces is gathered (block_size * 4 bytes at most). Same
/// values as text_block_hashes over the pieces joined, without the joined text (issue 54: the
/// rendered copy of a 150k-token prompt was a pass over 600 KB and an allocation as large).
class TextBlockHasher {
 public:
  /// XXH3's secret size (XXH3_SECRET_DEFAULT_SIZE): XXH3_64bits_withSeed derives a secret this
  /// large from the seed on every input over 240 bytes; the hasher derives it once.
  static constexpr size_t kSecretSize = 192;
  /// block_size must be > 0. `seed`: adapter_seed() of the request's adapter.
  TextBlockHasher(uint32_t block_size, uint64_t seed = kHashSeed);
  void append(std::string_view piece);
  TextBlockHasher& operator+=(std::string_view piece) {
    append(piece);
    return *this;
  }
  TextBlockHasher& operator+=(char c) {
    if (fill_ + 1 < stage_.size()) {  // the common case: the byte joins a gathered block
      stage_[fill_++] = c;
      ++bytes_;
      return *this;
    }
    append(std::string_view(&c, 1));
    return *this;
  }
  /// Room for the hashes of a text of about `text_bytes` bytes.
  void reserve(uint64_t text_bytes) { out_.reserve(text_bytes / stage_.size() + 1); }
  /// Bytes appended so far (the text's length).
  uint64_t bytes() const { return bytes_; }
  /// The hashes of the blocks so far, then of the trailing block: a complete one (block_size
  /// tokens, the last zero-padded), or with `include_partial` a partial one, zero-padded to whole
  /// tokens as text_block_hashes does. Call once.
  std::vector<uint64_t> finish(bool include_partial);

 private:
  void hash_block(const void* data, size_t len);
  uint64_t seed_;
  uint64_t bytes_ = 0;
  size_t fill_ = 0;          // bytes gathered in stage_
  std::vector<char> stage_;  // one block's bytes
  std::vector<uint64_t> out_;
  alignas(64) unsigned char secret_[kSecretSize];  // derived from seed_ once
};
/// Sequence hashes: seq[0] = block[0], seq[i] = chain_hash(seq[i-1], block[i]).
std::vector<uint64_t> sequence_hashes(std::span<const uint64_t> block_hashes);

/// Sequence hashes of a row's complete blocks at router block size `router_bs`, from its ids at
/// block size `ids_bs` covering `input_length` tokens. `ids_are_sequence` = the ids are already
/// sequence hashes (Dynamo replay hashes); otherwise per-block ids (Mooncake hash_ids) are chained.
/// Equal sizes: the first floor(input_length / bs) ids, chained. Different sizes: each router
/// block is hashed from the (id, token range) pieces it covers, so two rows share router block j
/// exactly when they share the ids under its tokens.
std::vector<uint64_t> sequence_from_ids(std::span<const uint64_t> ids, uint32_t ids_bs, bool ids_are_sequence,
                                        uint64_t input_length, uint32_t router_bs);
/// The same into `out` (cleared first), reusing its buffer: for callers hashing one row after another.
void sequence_from_ids(std::span<const uint64_t> ids, uint32_t ids_bs, bool ids_are_sequence, uint64_t input_length,
                       uint32_t router_bs, std::vector<uint64_t>& out);

/// The infinite prefix cache behind the theoretical hit rate (SPEC 7): every full block of size
/// `engine_bs` any earlier request had is cached. Requests are added in order of start; the one
/// rule used by dyn-bench's report and the simulator's summary, so they agree.
class InfiniteCache {
 public:
  /// Adds one request (per-block ids at `ids_bs`, `input_length` tokens, as sequence_from_ids)
  /// and returns how many of its input tokens lie in full engine blocks already cached.
  /// When engine blocks nest in id blocks (ids_bs a multiple of engine_bs), the cache keeps one
  /// key per id prefix instead of one per engine block: engine block j of a row is piece j % per
  /// of id j / per after the same ids (sequence_from_ids chains every piece before it), so it was
  /// cached exactly when an earlier row had the same id prefix with more than j % per of that id's
  /// pieces. Same counts as add_sequence() on the engine blocks, an eighth of the keys for
  /// Mooncake's 512-token ids at 64-token blocks (issue 54: 1.5 million rows of 125 trace copies
  /// held 183 million engine blocks, 2 GiB in the set).
  uint64_t add(std::span<const uint64_t> ids, uint32_t ids_bs, uint64_t input_length, uint32_t engine_bs);
  /// The same for a request whose engine-block sequence hashes the caller already has (the
  /// simulator computes them once for routing and for this count).
  uint64_t add_sequence(std::span<const uint64_t> seq, uint32_t engine_bs) {
    // Each key is a likely cache miss in a table of millions: prefetching kAhead keys ahead lets
    // those misses overlap instead of waiting for each in turn.
    constexpr size_t kAhead = 8;
    const size_t n = seq.size();
    for (size_t i = 0; i < std::min(n, kAhead); ++i) seen_.prefetch(seq[i]);
    uint64_t hit = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) seen_.prefetch(seq[i + kAhead]);
      if (!insert(seq[i])) hit += engine_bs;
    }
    return hit;
  }
  /// The unsized fallback (ids without a block size: Dynamo's input_sequence_hashes): adds one id,
  /// true when an earlier request had it.
  bool add_id(uint64_t id) { return !insert(id); }

 private:
  // True when h is new. A flat table (no node per block): the std::unordered_set it replaces was
  // 19 % of a whole-trace simulation (issue 17's profile).
  bool insert(uint64_t h) { return seen_.insert(h); }
  kv::FlatSet seen_;
  // add() with nesting ids: id prefixes some row had with all of the id's pieces (in seen_), and
  // those seen only with their first k < per pieces (a row's last id, cut by its length) -> k.
  kv::FlatMap partial_;
  std::vector<uint64_t> prefixes_;  // add()'s scratch: the row's id prefix keys
};

}  // namespace dyn::tokens
