// Unit tests for lib/dyn/tokens/reference: the pooled LRU and Belady reference caches.
#include <doctest/doctest.h>

#include <vector>

#include "dyn/tokens/reference.h"

using namespace dyn::tokens;

namespace {
// One-block requests, one after another (each ends before the next starts), 4 tokens a block.
std::vector<ReferenceRequest> sequence(const std::vector<uint64_t>& blocks) {
  std::vector<ReferenceRequest> v;
  for (size_t i = 0; i < blocks.size(); ++i) v.push_back({10.0 * i, 10.0 * i + 1, 4, {blocks[i]}});
  return v;
}
}  // namespace

TEST_CASE("reference: LRU evicts the block used longest ago, Belady the one used furthest ahead") {
  // a b c a b with room for two blocks: LRU keeps the two most recent and misses every time;
  // MIN drops b at c (a comes back first) and hits a.
  auto reqs = sequence({1, 2, 3, 1, 2});
  CHECK(reference_hit_tokens(reqs, 2, 4, ReferencePolicy::kLru) == 0);
  CHECK(reference_hit_tokens(reqs, 2, 4, ReferencePolicy::kBelady) == 4);
  // Room for everything: both hit every repeat.
  CHECK(reference_hit_tokens(reqs, 3, 4, ReferencePolicy::kLru) == 8);
  CHECK(reference_hit_tokens(reqs, 3, 4, ReferencePolicy::kBelady) == 8);
  // a a b a with room for one block there is nothing to choose (a missing block is always
  // cached): both hit the immediate repeat only.
  auto r2 = sequence({1, 1, 2, 1});
  CHECK(reference_hit_tokens(r2, 1, 4, ReferencePolicy::kLru) == 4);
  CHECK(reference_hit_tokens(r2, 1, 4, ReferencePolicy::kBelady) == 4);
}

TEST_CASE("reference: pinned blocks stay; hits are leading blocks, at most the input") {
  // A holds block 1 from 0 to 10; B (5-15) finds the only block pinned and caches nothing, so 1
  // survives for C at 20.
  std::vector<ReferenceRequest> reqs = {{0, 10, 4, {1}}, {5, 15, 4, {2}}, {20, 21, 4, {1}}, {30, 31, 4, {2}}};
  CHECK(reference_hit_tokens(reqs, 1, 4, ReferencePolicy::kLru) == 4);
  // Leading blocks only: 7 is missing, so the 9 after it is no hit even though it is cached.
  std::vector<ReferenceRequest> r2 = {{0, 1, 12, {5, 6, 9}}, {2, 3, 12, {5, 7, 9}}};
  CHECK(reference_hit_tokens(r2, 100, 4, ReferencePolicy::kLru) == 4);
  // A whole cached prompt counts at most its input tokens (a partial last block is not cached).
  std::vector<ReferenceRequest> r3 = {{0, 1, 8, {5, 6}}, {2, 3, 7, {5, 6}}};
  CHECK(reference_hit_tokens(r3, 100, 4, ReferencePolicy::kLru) == 7);
  // Requests are taken in order of start whatever their order in the input.
  std::vector<ReferenceRequest> r4 = {{2, 3, 4, {5}}, {0, 1, 4, {5}}};
  CHECK(reference_hit_tokens(r4, 1, 4, ReferencePolicy::kLru) == 4);
}

TEST_CASE("reference: among equally old blocks the deeper goes first (a request's tail)") {
  // A = [1, 2] then B = [3] with room for two: LRU evicts A's tail block 2 and keeps 1, so C = [1, 2]
  // hits its first block.
  std::vector<ReferenceRequest> reqs = {{0, 1, 8, {1, 2}}, {2, 3, 4, {3}}, {4, 5, 8, {1, 2}}};
  CHECK(reference_hit_tokens(reqs, 2, 4, ReferencePolicy::kLru) == 4);
}
