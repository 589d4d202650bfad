// Synthetic block text: words drawn from a splitmix64 stream keyed by (seed, hash_id).
#include "dyn/tokens/synthetic.h"

#include <cstdio>

namespace dyn::tokens {

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

std::string block_text(uint64_t seed, uint64_t hash_id, uint32_t block_size) {
  const size_t n = 4ull * block_size;
  std::string out;
  out.reserve(n);
  char head[32];
  int len = std::snprintf(head, sizeof head, "%llx:", static_cast<unsigned long long>(hash_id));
  out.append(head, static_cast<size_t>(len));
  uint64_t state = seed * 0x100000001b3ULL ^ hash_id ^ (static_cast<uint64_t>(block_size) << 48);
  while (out.size() < n) {
    uint64_t r = splitmix(state);
    int word = 2 + static_cast<int>(r % 7);
    r /= 7;
    for (int i = 0; i < word && out.size() < n; ++i) {
      out.push_back(static_cast<char>('a' + r % 26));
      r /= 26;
      if (r == 0) r = splitmix(state);
    }
    if (out.size() < n) out.push_back(' ');
  }
  out.resize(n);
  return out;
}

std::string synthetic_prompt(uint64_t seed, std::span<const uint64_t> hash_ids, uint64_t input_length,
                             uint32_t block_size) {
  std::string out;
  const size_t want = 4ull * input_length;
  out.reserve(want);
  for (uint64_t id : hash_ids) {
    if (out.size() >= want) break;
    out += block_text(seed, id, block_size);
  }
  // Lenient mode (SPEC 4.3, case 06): too few ids still gives exactly input_length tokens, using
  // filler blocks keyed off the last id with the top bit set (never a real Mooncake id).
  uint64_t k = 0;
  const uint64_t base = hash_ids.empty() ? 0 : hash_ids.back();
  while (out.size() < want) out += block_text(seed, (1ULL << 63) | (base * 1000003ULL + ++k), block_size);
  if (out.size() > want) out.resize(want);
  return out;
}

}  // namespace dyn::tokens
