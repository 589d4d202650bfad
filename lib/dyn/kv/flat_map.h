// A small open-addressing hash map from u64 sequence hashes to u32 slots (the prefix index's hot path).
#pragma once

#include <cstdint>
#include <vector>

namespace dyn::kv {

/// u64 -> u32 map with linear probing and backward-shift deletion. Keys may be any u64 (the
/// empty marker lives in the value, kEmpty); they are spread by a Fibonacci multiply, so
/// sequential ids hash as well as XXH3 values. Grows at 50 % load. Not thread-safe.
class FlatMap {
 public:
  static constexpr uint32_t kEmpty = 0xffffffffu;

  FlatMap() { rehash(16); }
  size_t size() const { return size_; }

  /// Value for key, or kEmpty.
  uint32_t find(uint64_t key) const {
    size_t i = slot(key);
    while (true) {
      const Cell& c = cells_[i];
      if (c.value == kEmpty) return kEmpty;
      if (c.key == key) return c.value;
      i = (i + 1) & mask_;
    }
  }

  /// Inserts key -> value (value != kEmpty); the key must not be present.
  void insert(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    size_t i = slot(key);
    while (cells_[i].value != kEmpty) i = (i + 1) & mask_;
    cells_[i] = Cell{key, value};
    ++size_;
  }

  /// find() and, when absent, insert(key, value) with one probe sequence (value != kEmpty).
  /// Returns the value already present, or kEmpty when it inserted.
  uint32_t find_or_insert(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    size_t i = slot(key);
    for (; cells_[i].value != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) return cells_[i].value;
    cells_[i] = Cell{key, value};
    ++size_;
    return kEmpty;
  }

  /// Removes key if present.
  void erase(uint64_t key) {
    size_t i = slot(key);
    while (true) {
      if (cells_[i].value == kEmpty) return;
      if (cells_[i].key == key) break;
      i = (i + 1) & mask_;
    }
    // Backward-shift deletion keeps probe chains intact without tombstones.
    size_t j = i;
    while (true) {
      j = (j + 1) & mask_;
      if (cells_[j].value == kEmpty) break;
      size_t home = slot(cells_[j].key);
      bool between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
      if (between) continue;
      cells_[i] = cells_[j];
      i = j;
    }
    cells_[i].value = kEmpty;
    --size_;
  }

  void clear() {
    cells_.assign(16, Cell{});
    mask_ = 15;
    shift_ = 60;
    size_ = 0;
  }

 private:
  struct Cell {
    uint64_t key = 0;
    uint32_t value = kEmpty;
  };
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t n) {
    std::vector<Cell> old;
    old.swap(cells_);
    cells_.assign(n, Cell{});
    mask_ = n - 1;
    shift_ = 64;
    for (size_t m = n; m > 1; m >>= 1) --shift_;
    size_ = 0;
    for (const Cell& c : old)
      if (c.value != kEmpty) insert(c.key, c.value);
  }
  std::vector<Cell> cells_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

/// Insert-only set of u64 keys, 8 bytes a cell: linear probing, grown at 3/4 load (FlatMap's
/// 16-byte cells at 1/2 load cost several times the memory for a set of millions of blocks).
/// Key 0 is kept outside the table (0 marks an empty cell). Not thread-safe.
class FlatSet {
 public:
  FlatSet() : cells_(16, 0), mask_(15), shift_(60) {}
  size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

  /// Adds key; true when it was not present.
  bool insert(uint64_t key) {
    if (key == 0) return has_zero_ ? false : (has_zero_ = true);
    size_t i = slot(key);
    for (; cells_[i] != 0; i = (i + 1) & mask_)
      if (cells_[i] == key) return false;
    cells_[i] = key;
    if (++size_ * 4 > cells_.size() * 3) grow();
    return true;
  }

 private:
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow() {
    std::vector<uint64_t> old(cells_.size() * 2, 0);
    old.swap(cells_);
    mask_ = cells_.size() - 1;
    --shift_;
    for (uint64_t k : old) {
      if (k == 0) continue;
      size_t i = slot(k);
      while (cells_[i] != 0) i = (i + 1) & mask_;
      cells_[i] = k;
    }
  }
  std::vector<uint64_t> cells_;
  size_t mask_;
  int shift_;
  size_t size_ = 0;
  bool has_zero_ = false;
};

}  // namespace dyn::kv
