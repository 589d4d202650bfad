// TurnCounter: string keys once in chunks, an open-addressing table of references to them.
#include "dyn/offline/turns.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace dyn::offline {

namespace {
constexpr uint32_t kSaturated = 0xffffffffu;
uint64_t hash_of(std::string_view key) { return std::hash<std::string_view>{}(key); }
}  // namespace

TurnCounter::TurnCounter() {
  cells_ = 1024;
  mask_ = cells_ - 1;
  shift_ = 64 - 10;
  table_ = std::make_unique<uint32_t[]>(cells_);
  tags_ = std::make_unique<uint8_t[]>(cells_);
  std::fill(table_.get(), table_.get() + cells_, kEmpty);
}

TurnCounter::~TurnCounter() = default;

std::string_view TurnCounter::key_of(uint32_t ref) const {
  const auto* p = reinterpret_cast<const unsigned char*>(at(ref)) + 4;
  size_t len = 0;
  for (int s = 0;; s += 7) {
    const unsigned char b = *p++;
    len |= static_cast<size_t>(b & 0x7f) << s;
    if (!(b & 0x80)) break;
  }
  return {reinterpret_cast<const char*>(p), len};
}

uint32_t* TurnCounter::find_cell(std::string_view key, uint64_t h) const {
  const uint8_t tag = tag_of(h);
  for (size_t i = slot(h);; i = (i + 1) & mask_) {
    uint32_t* c = &table_[i];
    if (*c == kEmpty || (tags_[i] == tag && key_of(*c) == key)) return c;
  }
}

uint32_t TurnCounter::add(std::string_view key) {
  unsigned char len[10];
  size_t n = 0;
  for (size_t v = key.size();; v >>= 7) {
    len[n++] = static_cast<unsigned char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    if (v <= 0x7f) break;
  }
  const size_t need = 4 + n + key.size();
  if (used_ + need > kChunk) {
    // A new chunk (a key longer than a chunk gets one of its own size); the rest of the last
    // one stays unused, less than one record.
    if (chunks_.size() >= (size_t{1} << (32 - kChunkBits)))
      throw std::length_error("TurnCounter: more than 4 GiB of keys");
    chunks_.push_back(std::make_unique<char[]>(std::max(kChunk, need)));
    used_ = 0;
  }
  const auto ref = static_cast<uint32_t>(((chunks_.size() - 1) << kChunkBits) | used_);
  char* p = chunks_.back().get() + used_;
  std::memset(p, 0, 4);
  std::memcpy(p + 4, len, n);
  if (!key.empty()) std::memcpy(p + 4 + n, key.data(), key.size());
  used_ += need;
  return ref;
}

void TurnCounter::grow() {
  const size_t old_cells = cells_;
  std::unique_ptr<uint32_t[]> old = std::move(table_);
  std::unique_ptr<uint8_t[]> old_tags = std::move(tags_);
  cells_ *= 2;
  mask_ = cells_ - 1;
  --shift_;
  table_ = std::make_unique<uint32_t[]>(cells_);
  tags_ = std::make_unique<uint8_t[]>(cells_);
  std::fill(table_.get(), table_.get() + cells_, kEmpty);
  for (size_t i = 0; i < old_cells; ++i) {
    if (old[i] == kEmpty) continue;
    size_t j = slot(hash_of(key_of(old[i])));
    while (table_[j] != kEmpty) j = (j + 1) & mask_;
    table_[j] = old[i];
    tags_[j] = old_tags[i];
  }
}

uint64_t TurnCounter::read_count(uint32_t ref) const {
  uint32_t c;
  std::memcpy(&c, at(ref), 4);
  if (c != kSaturated) return c;
  return big_.at(ref);
}

void TurnCounter::write_count(uint32_t ref, uint64_t c) {
  const uint32_t small = c < kSaturated ? static_cast<uint32_t>(c) : kSaturated;
  std::memcpy(at(ref), &small, 4);
  if (small == kSaturated) big_[ref] = c;
}

uint64_t TurnCounter::next(std::string_view key) {
  const uint64_t h = hash_of(key);
  uint32_t* cell = find_cell(key, h);
  if (*cell == kEmpty) {
    if ((size_ + 1) * 4 > cells_ * 3) {
      grow();
      cell = find_cell(key, h);
    }
    *cell = add(key);
    tags_[static_cast<size_t>(cell - table_.get())] = tag_of(h);
    ++size_;
  }
  const uint64_t c = read_count(*cell);
  write_count(*cell, c + 1);
  return c;
}

void TurnCounter::prefetch_cells(std::string_view key) const {
  const size_t i = slot(hash_of(key));
  __builtin_prefetch(&table_[i]);
  __builtin_prefetch(&tags_[i]);
}

void TurnCounter::prefetch_record(std::string_view key) const {
  const uint64_t h = hash_of(key);
  const uint8_t tag = tag_of(h);
  // The first cell whose tag matches (usually the key's own): no key is read here.
  for (size_t i = slot(h);; i = (i + 1) & mask_) {
    if (table_[i] == kEmpty) return;
    if (tags_[i] == tag) {
      __builtin_prefetch(at(table_[i]));
      return;
    }
  }
}

uint64_t TurnCounter::count(std::string_view key) const {
  const uint32_t* cell = find_cell(key, hash_of(key));
  return *cell == kEmpty ? 0 : read_count(*cell);
}

}  // namespace dyn::offline
