// XXH3 hashing with libxxhash's header (Debian libxxhash-dev).
#include "dyn/tokens/hash.h"

// Inlined: chain_hash hashes 16 bytes per block, where a call into the shared library costs more
// than the hash itself (the simulator and dyn-route decide chain hundreds per request). Same
// algorithm and seed, so the values are those of the library (SPEC 4.1 check values in the tests).
#if defined(__x86_64__) && defined(__GNUC__)
// The AVX2 kernels compiled beside the baseline's SSE2 ones, for their own target
// (xxhash's xxh_x86dispatch.c does the same): a block over 240 bytes is hashed with AVX2 where the
// CPU has it (secret_hash). The build targets plain x86-64, which left XXH3 on SSE2.
#include <immintrin.h>  // every target's intrinsics (GCC): the AVX2 ones for the kernels below
#define DYN_XXH_AVX2 1
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
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

uint64_t hash_tokens(std::span<const uint32_t> tokens, uint64_t seed) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(uint32_t), seed);
}

uint64_t adapter_seed(std::string_view lora_name) {
  return lora_name.empty() ? kHashSeed : kHashSeed + XXH3_64bits(lora_name.data(), lora_name.size());
}

uint64_t chain_hash(uint64_t prev, uint64_t block) {
  uint64_t pair[2] = {prev, block};
  return XXH3_64bits_withSeed(pair, sizeof pair, kHashSeed);
}

namespace {

#ifdef DYN_XXH_AVX2
/// XXH3's long-input path (over 240 bytes) with the AVX2 kernels: the values of the SSE2 ones.
__attribute__((__target__("avx2"))) uint64_t hash_long_avx2(const void* data, size_t len, const unsigned char* secret) {
  return XXH3_hashLong_64b_internal(data, len, secret, XXH3_SECRET_DEFAULT_SIZE, XXH3_accumulate_512_avx2,
                                    XXH3_scrambleAcc_avx2);
}
const bool kAvx2 = __builtin_cpu_supports("avx2");
#endif

/// XXH3_64bits_withSecretandSeed(data, len, secret, 192, seed) where `secret` is
/// XXH3_generateSecret_fromSeed's of `seed`. An input over 240 bytes (a 64-token block is 256)
/// hashes with the secret alone (xxhash.h: XXH3_hashLong_64b_withSecret ignores the seed), with
/// AVX2 where the CPU has it: a block in two thirds of the time (issue 54, a 620 KB prompt).
uint64_t secret_hash(const void* data, size_t len, const unsigned char* secret, uint64_t seed) {
#ifdef DYN_XXH_AVX2
  if (len > XXH3_MIDSIZE_MAX && kAvx2) return hash_long_avx2(data, len, secret);
#endif
  return XXH3_64bits_withSecretandSeed(data, len, secret, XXH3_SECRET_DEFAULT_SIZE, seed);
}

/// XXH3-64 with `seed` of many inputs: XXH3_64bits_withSeed derives a 192-byte secret from the
/// seed on every input over 240 bytes (a 64-token block is 256), a third of hashing a prompt;
/// this derives it once. xxhash.h: a secret from XXH3_generateSecret_fromSeed with
/// XXH3_64bits_withSecretandSeed gives exactly XXH3_64bits_withSeed's values.
class SeededHasher {
 public:
  explicit SeededHasher(uint64_t seed) : seed_(seed) { XXH3_generateSecret_fromSeed(secret_, seed); }
  uint64_t operator()(const void* data, size_t len) const { return secret_hash(data, len, secret_, seed_); }

 private:
  uint64_t seed_;
  alignas(64) unsigned char secret_[XXH3_SECRET_DEFAULT_SIZE];
};

}  // namespace

std::vector<uint64_t> block_hashes(std::span<const uint32_t> tokens, uint32_t block_size, bool include_partial,
                                   uint64_t seed) {
  const SeededHasher hash(seed);
  std::vector<uint64_t> out;
  size_t full = tokens.size() / block_size;
  out.reserve(full + 1);
  for (size_t i = 0; i < full; ++i)
    out.push_back(hash(tokens.data() + i * block_size, size_t{block_size} * sizeof(uint32_t)));
  if (include_partial && tokens.size() % block_size)
    out.push_back(hash(tokens.data() + full * block_size, (tokens.size() - full * block_size) * sizeof(uint32_t)));
  return out;
}

std::vector<uint64_t> text_block_hashes(std::string_view text, uint32_t block_size, bool include_partial,
                                        uint64_t seed) {
  TextBlockHasher h(block_size, seed);
  h.append(text);
  return h.finish(include_partial);
}

static_assert(TextBlockHasher::kSecretSize == XXH3_SECRET_DEFAULT_SIZE);

TextBlockHasher::TextBlockHasher(uint32_t block_size, uint64_t seed)
    : seed_(seed), stage_(size_t{block_size} * sizeof(uint32_t)) {
  XXH3_generateSecret_fromSeed(secret_, seed);
}

void TextBlockHasher::hash_block(const void* data, size_t len) {
  out_.push_back(secret_hash(data, len, secret_, seed_));
}

void TextBlockHasher::append(std::string_view s) {
  bytes_ += s.size();
  const size_t block = stage_.size();
  if (fill_ > 0) {
    const size_t take = std::min(s.size(), block - fill_);
    std::memcpy(stage_.data() + fill_, s.data(), take);
    fill_ += take;
    s.remove_prefix(take);
    if (fill_ < block) return;
    hash_block(stage_.data(), block);
    fill_ = 0;
  }
  for (; s.size() >= block; s.remove_prefix(block)) hash_block(s.data(), block);
  std::memcpy(stage_.data(), s.data(), s.size());
  fill_ = s.size();
}

std::vector<uint64_t> TextBlockHasher::finish(bool include_partial) {
  // The last token is zero-padded (SPEC 4.2): gathered bytes that make block_size tokens so are
  // a complete block.
  const size_t len = (fill_ + 3) / 4 * 4;
  if (fill_ > 0 && (include_partial || len == stage_.size())) {
    std::fill(stage_.begin() + static_cast<ptrdiff_t>(fill_), stage_.begin() + static_cast<ptrdiff_t>(len), 0);
    hash_block(stage_.data(), len);
  }
  fill_ = 0;
  return std::move(out_);
}

std::vector<uint64_t> sequence_hashes(std::span<const uint64_t> blocks) {
  std::vector<uint64_t> out;
  out.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) out.push_back(i == 0 ? blocks[0] : chain_hash(out.back(), blocks[i]));
  return out;
}

std::vector<uint64_t> sequence_from_ids(std::span<const uint64_t> ids, uint32_t ids_bs, bool ids_are_sequence,
                                        uint64_t input_length, uint32_t router_bs) {
  std::vector<uint64_t> seq;
  sequence_from_ids(ids, ids_bs, ids_are_sequence, input_length, router_bs, seq);
  return seq;
}

void sequence_from_ids(std::span<const uint64_t> ids, uint32_t ids_bs, bool ids_are_sequence, uint64_t input_length,
                       uint32_t router_bs, std::vector<uint64_t>& seq) {
  seq.clear();
  if (ids_bs == 0 || router_bs == 0) return;
  uint64_t full = input_length / router_bs;
  if (ids_bs == router_bs) {
    full = std::min<uint64_t>(full, ids.size());
    seq.reserve(full);
    if (ids_are_sequence) {
      seq.assign(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(full));
      return;
    }
    uint64_t prev = 0;
    for (uint64_t i = 0; i < full; ++i) {
      prev = chain_hash(prev, ids[i]);
      seq.push_back(prev);
    }
    return;
  }
  // Different sizes: router block j covers tokens [j*R, (j+1)*R); hash the (id, range) pieces.
  uint64_t covered = ids.size() * ids_bs;
  full = std::min<uint64_t>(full, covered / router_bs);
  seq.reserve(full);
  uint64_t prev = 0;
  constexpr uint64_t kStart = 0x6479'6e2d'626c'6f63ull;  // arbitrary start for a block's piece chain
  if (ids_bs % router_bs == 0) {
    // Router blocks nest in id blocks (the simulator's 64 in Mooncake's 512): block j is the one
    // piece (id k, tokens [off, off + router_bs) of it), hashed exactly as the general loop below
    // does, with the (kStart, id) hash computed once per id.
    const uint64_t per = ids_bs / router_bs;
    uint64_t h_id = 0;
    for (uint64_t j = 0; j < full; ++j) {
      const uint64_t k = j / per, off = (j - k * per) * router_bs;
      if (off == 0 || j == 0) h_id = chain_hash(kStart, ids[k]);
      const uint64_t h = chain_hash(h_id, (off << 32) | (off + router_bs));
      prev = j == 0 ? h : chain_hash(prev, h);
      seq.push_back(prev);
    }
    return;
  }
  // A block's first piece hashes (kStart, id): when router blocks are smaller than id blocks, the
  // blocks cut from one id share it, so it is computed once per id (same values, fewer hashes).
  uint64_t memo_k = UINT64_MAX, memo_h = 0;
  for (uint64_t j = 0; j < full; ++j) {
    uint64_t lo = j * router_bs, hi = lo + router_bs;
    uint64_t h = kStart;
    for (uint64_t t = lo; t < hi;) {
      uint64_t k = t / ids_bs;
      uint64_t end = std::min(hi, (k + 1) * ids_bs);
      if (t == lo) {
        if (k != memo_k) {
          memo_k = k;
          memo_h = chain_hash(kStart, ids[k]);
        }
        h = memo_h;
      } else {
        h = chain_hash(h, ids[k]);
      }
      h = chain_hash(h, ((t - k * ids_bs) << 32) | (end - k * ids_bs));
      t = end;
    }
    prev = j == 0 ? h : chain_hash(prev, h);
    seq.push_back(prev);
  }
}

uint64_t InfiniteCache::add(std::span<const uint64_t> ids, uint32_t ids_bs, uint64_t input_length, uint32_t engine_bs) {
  if (ids_bs == 0 || engine_bs == 0) return 0;
  if (ids_bs % engine_bs != 0)
    return add_sequence(sequence_from_ids(ids, ids_bs, false, input_length, engine_bs), engine_bs);
  const uint64_t per = ids_bs / engine_bs;
  // sequence_from_ids's count of full engine blocks; an id prefix is chained as equal block sizes
  // chain ids (with per = 1 the keys are the engine blocks' own sequence hashes).
  const uint64_t full = std::min<uint64_t>(input_length / engine_bs, ids.size() * per);
  prefixes_.clear();
  for (uint64_t k = 0, prefix = 0; k * per < full; ++k) prefixes_.push_back(prefix = chain_hash(prefix, ids[k]));
  // Each key is a likely cache miss in a table of millions: prefetched a few keys ahead.
  constexpr size_t kAhead = 8;
  for (size_t k = 0; k < std::min(prefixes_.size(), kAhead); ++k) seen_.prefetch(prefixes_[k]);
  uint64_t hit = 0;
  for (size_t k = 0; k < prefixes_.size(); ++k) {
    if (k + kAhead < prefixes_.size()) seen_.prefetch(prefixes_[k + kAhead]);
    const uint64_t key = prefixes_[k], pieces = std::min(per, full - k * per);
    if (seen_.contains(key)) {
      hit += pieces;
      continue;
    }
    uint32_t* had = partial_.find_ptr(key);
    const uint64_t before = had ? *had : 0;
    hit += std::min(pieces, before);
    if (pieces == per) {
      if (had) partial_.erase_at(had);
      seen_.insert(key);
    } else if (pieces > before) {
      if (had) *had = static_cast<uint32_t>(pieces);
      else partial_.insert(key, static_cast<uint32_t>(pieces));
    }
  }
  return hit * engine_bs;
}

}  // namespace dyn::tokens
