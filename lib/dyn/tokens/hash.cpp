// XXH3 hashing with libxxhash's header (Debian libxxhash-dev).
#include "dyn/tokens/hash.h"

// Inlined: chain_hash hashes 16 bytes per block, where a call into the shared library costs more
// than the hash itself (the simulator and dyn-route decide chain hundreds per request). Same
// algorithm and seed, so the values are those of the library (SPEC 4.1 check values in the tests).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

namespace dyn::tokens {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token bytes are hashed as little-endian");

std::vector<uint32_t> text_to_tokens(std::string_view text) {
  std::vector<uint32_t> out(token_count(text.size()), 0);
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

uint64_t hash_tokens(std::span<const uint32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(uint32_t), kHashSeed);
}

uint64_t chain_hash(uint64_t prev, uint64_t block) {
  uint64_t pair[2] = {prev, block};
  return XXH3_64bits_withSeed(pair, sizeof pair, kHashSeed);
}

std::vector<uint64_t> block_hashes(std::span<const uint32_t> tokens, uint32_t block_size,
                                   bool include_partial) {
  std::vector<uint64_t> out;
  size_t full = tokens.size() / block_size;
  out.reserve(full + 1);
  for (size_t i = 0; i < full; ++i) out.push_back(hash_tokens(tokens.subspan(i * block_size, block_size)));
  if (include_partial && tokens.size() % block_size)
    out.push_back(hash_tokens(tokens.subspan(full * block_size)));
  return out;
}

std::vector<uint64_t> sequence_hashes(std::span<const uint64_t> blocks) {
  std::vector<uint64_t> out;
  out.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    out.push_back(i == 0 ? blocks[0] : chain_hash(out.back(), blocks[i]));
  return out;
}

}  // namespace dyn::tokens
