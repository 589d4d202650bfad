// Unit tests for lib/dyn/offline: the turn counter behind decide's "<session>:<turn>" request ids.
#include <doctest/doctest.h>

#include <string>
#include <unordered_map>

#include "dyn/base/random.h"
#include "dyn/offline/turns.h"

using namespace dyn;
using dyn::offline::TurnCounter;

TEST_CASE("TurnCounter: counts from 0 per key, exactly") {
  TurnCounter t;
  CHECK(t.next("s1") == 0);
  CHECK(t.next("s1") == 1);
  CHECK(t.next("s2") == 0);
  CHECK(t.next("s1") == 2);
  CHECK(t.count("s1") == 3);
  CHECK(t.count("s2") == 1);
  CHECK(t.count("s3") == 0);
  CHECK(t.size() == 2);
  // Keys are bytes: a prefix, the empty key and embedded NULs are keys of their own.
  CHECK(t.next("s") == 0);
  CHECK(t.next("") == 0);
  CHECK(t.next("") == 1);
  CHECK(t.next(std::string_view("s1\0x", 4)) == 0);
  CHECK(t.count("s1") == 3);
  CHECK(t.size() == 5);
}

TEST_CASE("TurnCounter: a key longer than a chunk, and keys after it") {
  TurnCounter t;
  std::string big(200'000, 'k');
  CHECK(t.next("a") == 0);
  CHECK(t.next(big) == 0);
  CHECK(t.next("b") == 0);
  CHECK(t.next(big) == 1);
  std::string other = big;
  other.back() = 'x';
  CHECK(t.next(other) == 0);
  CHECK(t.count("a") == 1);
  CHECK(t.count("b") == 1);
}

TEST_CASE("TurnCounter: agrees with a std::unordered_map over 300,000 random keys") {
  // Many chunks and table growths; keys of 1..40 bytes, some repeated often.
  TurnCounter t;
  std::unordered_map<std::string, uint64_t> ref;
  Rng rng(11);
  for (int i = 0; i < 300'000; ++i) {
    const uint64_t id = rng.below(i < 1000 ? 50 : 200'000);
    std::string key = "c" + std::to_string(id % 16) + "-s" + std::to_string(id);
    key.resize(1 + id % 40, '.');
    REQUIRE(t.next(key) == ref[key]++);
  }
  CHECK(t.size() == ref.size());
  for (auto& [k, c] : ref) REQUIRE(t.count(k) == c);
}
