// A small open-addressing hash map from u64 sequence hashes to u32 slots (the prefix index's hot path).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace dyn::kv {

/// An array of trivially copyable T for hash tables of millions of cells, every byte zero (or
/// `fill`). Large ones are mapped anonymous memory (zero pages: no memset pass over cells that
/// are then written anyway) aligned to 2 MiB and advised to use transparent huge pages, so
/// filling them takes one page fault per 2 MiB instead of per 4 KiB (issue 17: the simulator's
/// theoretical-hit set spent 10 % of a run in memset and page faults while growing). Move-only;
/// throws std::bad_alloc.
template <class T>
class HugeArray {
 public:
  HugeArray() = default;
  explicit HugeArray(size_t n, unsigned char fill = 0) : n_(n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) {
      // Cache-line aligned, as the mapped ones are (a hash table's probe lines start on one).
      const size_t alloc = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
      data_ = static_cast<T*>(std::aligned_alloc(64, alloc));
      if (!data_) throw std::bad_alloc();
      std::memset(static_cast<void*>(data_), fill, alloc);
      return;
    }
    // Over-map by one huge page and trim, so the array starts on a 2 MiB boundary.
    map_bytes_ = bytes + kHuge;
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<char*>(m);
    char* aligned = map_ + ((kHuge - reinterpret_cast<uintptr_t>(map_) % kHuge) % kHuge);
    ::madvise(aligned, bytes, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
    data_ = reinterpret_cast<T*>(aligned);
    if (fill) std::memset(aligned, fill, bytes);
  }
  HugeArray(HugeArray&& o) noexcept { swap(o); }
  HugeArray& operator=(HugeArray&& o) noexcept {
    HugeArray(std::move(o)).swap(*this);
    return *this;
  }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  ~HugeArray() {
    if (map_) ::munmap(map_, map_bytes_);
    else std::free(data_);
  }
  void swap(HugeArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    std::swap(map_, o.map_);
    std::swap(map_bytes_, o.map_bytes_);
  }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + n_; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  T* data_ = nullptr;
  size_t n_ = 0;
  char* map_ = nullptr;  // the whole mapping, when mapped
  size_t map_bytes_ = 0;
};

/// u64 -> V map with linear probing and backward-shift deletion. Keys may be any u64 (the
/// empty marker lives in the value, kEmpty, a value whose bytes are all `EmptyByte`); they are
/// spread by a Fibonacci multiply, so sequential ids hash as well as XXH3 values. Grows at 50 %
/// load. Not thread-safe.
template <class V, unsigned char EmptyByte>
class BasicFlatMap {
 public:
  static constexpr V kEmpty = static_cast<V>(EmptyByte == 0 ? V{0} : ~V{0});
  static_assert(EmptyByte == 0 || EmptyByte == 0xff, "an empty value is all zero or all one bits");

  BasicFlatMap() { rehash(16); }
  size_t size() const { return size_; }

  /// Value for key, or kEmpty.
  V find(uint64_t key) const {
    size_t i = slot(key);
    while (true) {
      const Cell& c = cells_[i];
      if (c.value == kEmpty) return kEmpty;
      if (c.key == key) return c.value;
      i = (i + 1) & mask_;
    }
  }

  /// Inserts key -> value (value != kEmpty); the key must not be present.
  void insert(uint64_t key, V value) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    size_t i = slot(key);
    while (cells_[i].value != kEmpty) i = (i + 1) & mask_;
    cells_[i] = Cell{key, value};
    ++size_;
  }

  /// find() and, when absent, insert(key, value) with one probe sequence (value != kEmpty).
  /// Returns the value already present, or kEmpty when it inserted.
  V find_or_insert(uint64_t key, V value) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    size_t i = slot(key);
    for (; cells_[i].value != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) return cells_[i].value;
    cells_[i] = Cell{key, value};
    ++size_;
    return kEmpty;
  }

  /// Pointer to key's value, nullptr when absent. Valid until the map is next changed; writing
  /// kEmpty through it is not allowed (erase() instead).
  V* find_ptr(uint64_t key) {
    size_t i = slot(key);
    while (true) {
      Cell& c = cells_[i];
      if (c.value == kEmpty) return nullptr;
      if (c.key == key) return &c.value;
      i = (i + 1) & mask_;
    }
  }

  /// find_or_insert() that returns the value's cell (valid as find_ptr()'s): the present value,
  /// or `value` just inserted, with *inserted telling which.
  V* find_or_insert_ptr(uint64_t key, V value, bool* inserted) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    return find_or_insert_reserved(key, value, inserted);
  }

  /// Makes room for n keys in all: until the map holds n, find_or_insert_reserved() needs no
  /// growth check (one check per batch of keys, not one per key).
  void reserve(size_t n) {
    size_t c = cells_.size();
    while (n * 2 > c) c *= 2;
    if (c != cells_.size()) rehash(c);
  }
  /// find_or_insert_ptr() for a key reserve() made room for (size() < the n reserved).
  V* find_or_insert_reserved(uint64_t key, V value, bool* inserted) {
    size_t i = slot(key);
    for (; cells_[i].value != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) {
        *inserted = false;
        return &cells_[i].value;
      }
    cells_[i] = Cell{key, value};
    ++size_;
    *inserted = true;
    return &cells_[i].value;
  }

  /// Starts loading the cell where key's probe begins (a hint, see FlatSet::prefetch()).
  void prefetch(uint64_t key) const { __builtin_prefetch(&cells_[slot(key)], 1); }

  /// Removes key if present.
  void erase(uint64_t key) {
    size_t i = slot(key);
    while (true) {
      if (cells_[i].value == kEmpty) return;
      if (cells_[i].key == key) break;
      i = (i + 1) & mask_;
    }
    erase_cell(i);
  }

  /// Removes the key whose value `value` points to (a pointer from find_ptr() or
  /// find_or_insert_ptr(), still valid): erase() without probing for the key again.
  void erase_at(V* value) {
    const Cell* c = reinterpret_cast<const Cell*>(reinterpret_cast<char*>(value) - offsetof(Cell, value));
    erase_cell(static_cast<size_t>(c - cells_.begin()));
  }

  /// Calls f(key, value&) on every entry; one whose value f sets to kEmpty is erased. An entry
  /// an erasure moves into a slot already passed (the table's wrapped start) is seen again, so
  /// f must be idempotent (e.g. clearing one bit).
  template <class F>
  void update_all(F f) {
    for (size_t i = 0; i < cells_.size(); ++i)
      while (cells_[i].value != kEmpty) {
        f(cells_[i].key, cells_[i].value);
        if (cells_[i].value != kEmpty) break;
        erase_cell(i);  // shifts the next entries back: slot i may hold one not seen yet
      }
  }

  void clear() {
    cells_ = HugeArray<Cell>(16, EmptyByte);
    mask_ = 15;
    shift_ = 60;
    size_ = 0;
  }

 private:
  // Empty cells have every byte EmptyByte (value kEmpty), so a new table is one memset.
  struct Cell {
    uint64_t key;
    V value;
  };
  // A key's probe starts at the first cell of a 64-byte line (4 cells): most probes then end in
  // the line the prefetch loaded, where a home anywhere in the line ran past its end into a
  // second cache miss for about one probe in ten (issue 54's profile).
  static constexpr size_t kLineCells = 64 / sizeof(Cell);
  size_t slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & ~(kLineCells - 1);
  }
  // Empties cell i. Backward-shift deletion keeps probe chains intact without tombstones.
  void erase_cell(size_t i) {
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
  void rehash(size_t n) {
    HugeArray<Cell> old(n, EmptyByte);
    old.swap(cells_);
    mask_ = n - 1;
    shift_ = 64;
    for (size_t m = n; m > 1; m >>= 1) --shift_;
    size_ = 0;
    for (const Cell& c : old)
      if (c.value != kEmpty) insert(c.key, c.value);
  }
  HugeArray<Cell> cells_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};
/// The prefix index's map: sequence hash -> first holder entry (kEmpty: none).
using FlatMap = BasicFlatMap<uint32_t, 0xff>;
/// Sequence hash -> a bitset of holders (worker w < 64 is bit w; 0 = absent): the event-fed
/// prefix index's one cell per block.
using FlatMaskMap = BasicFlatMap<uint64_t, 0>;

/// The approximate prefix index's map: one 16-byte cell per (block, worker) holder, keyed by the
/// block's sequence hash, with the holder's worker and entry (an index into the caller's pool)
/// beside it. A block's holders are cells of the same key, which linear probing keeps in one run
/// of adjacent cells from the key's home: a lookup reads a block's holders from one or two cache
/// lines instead of chasing a linked list of pooled entries one cache miss after the other
/// (issue 54: at 1,000 simulated workers a lookup matched ~10 holders a block and that chase was a
/// quarter of a simulation). At most one cell per (key, worker). Backward-shift deletion, grown at
/// 50 % load; size() counts cells, distinct() keys. Not thread-safe.
class HolderMap {
 public:
  static constexpr uint32_t kEmpty = 0xffffffffu;  // Cell::entry of an empty cell
  struct Cell {
    uint64_t key;
    uint32_t entry;  // kEmpty: the cell is empty
    uint32_t worker;
  };

  HolderMap() { rehash(16); }
  size_t size() const { return size_; }
  size_t distinct() const { return distinct_; }

  /// Calls f(const Cell&) on each holder of key, in cell order.
  template <class F>
  void for_each(uint64_t key, F f) const {
    for (size_t i = slot(key); cells_[i].entry != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) f(cells_[i]);
  }
  /// The cell of (key, worker), nullptr when absent. Valid until the map is next changed.
  const Cell* find(uint64_t key, uint32_t worker) const {
    for (size_t i = slot(key); cells_[i].entry != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key && cells_[i].worker == worker) return &cells_[i];
    return nullptr;
  }
  /// The cell of (key, worker), inserting {key, entry, worker} when absent (*inserted tells
  /// which; entry != kEmpty). One probe sequence. Valid as find()'s.
  Cell* find_or_insert(uint64_t key, uint32_t worker, uint32_t entry, bool* inserted) {
    if ((size_ + 1) * 2 > cells_.size()) rehash(cells_.size() * 2);
    bool seen = false;
    size_t i = slot(key);
    for (; cells_[i].entry != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) {
        if (cells_[i].worker == worker) {
          *inserted = false;
          return &cells_[i];
        }
        seen = true;
      }
    cells_[i] = Cell{key, entry, worker};
    ++size_;
    distinct_ += !seen;
    *inserted = true;
    return &cells_[i];
  }
  /// Removes the cell of (key, worker) if present.
  void erase(uint64_t key, uint32_t worker) {
    size_t at = SIZE_MAX;
    bool other = false;  // another holder of key stays
    for (size_t i = slot(key); cells_[i].entry != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].key == key) {
        if (cells_[i].worker == worker) at = i;
        else other = true;
      }
    if (at == SIZE_MAX) return;
    distinct_ -= !other;
    erase_cell(at);
  }
  /// Starts loading the cell where key's probe begins (a hint, see FlatSet::prefetch()).
  void prefetch(uint64_t key) const { __builtin_prefetch(&cells_[slot(key)], 1); }

 private:
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  // Backward-shift deletion: a later cell of the run fills the hole when its probe from its home
  // passed the hole (no home between them), then leaves its own. Cells of one key are
  // interchangeable, so the rule holds for a multimap too.
  void erase_cell(size_t hole) {
    for (size_t j = (hole + 1) & mask_; cells_[j].entry != kEmpty; j = (j + 1) & mask_)
      if (((j - slot(cells_[j].key)) & mask_) >= ((j - hole) & mask_)) {
        cells_[hole] = cells_[j];
        hole = j;
      }
    cells_[hole].entry = kEmpty;
    --size_;
  }
  void rehash(size_t n) {
    HugeArray<Cell> old(n, 0xff);
    old.swap(cells_);
    mask_ = n - 1;
    shift_ = 64;
    for (size_t m = n; m > 1; m >>= 1) --shift_;
    for (const Cell& c : old)
      if (c.entry != kEmpty) {
        size_t i = slot(c.key);
        while (cells_[i].entry != kEmpty) i = (i + 1) & mask_;
        cells_[i] = c;
      }
  }
  HugeArray<Cell> cells_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
  size_t distinct_ = 0;
};

/// Insert-only set of u64 keys, 8 bytes a cell: linear probing, grown at 3/4 load (FlatMap's
/// 16-byte cells at 1/2 load cost several times the memory for a set of millions of blocks).
/// Key 0 is kept outside the table (0 marks an empty cell). Not thread-safe.
class FlatSet {
 public:
  FlatSet() : cells_(16), mask_(15), shift_(60) {}
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
  /// Whether key was added.
  bool contains(uint64_t key) const {
    if (key == 0) return has_zero_;
    for (size_t i = slot(key); cells_[i] != 0; i = (i + 1) & mask_)
      if (cells_[i] == key) return true;
    return false;
  }
  /// Starts loading the cell where key's probe begins (a hint: no effect on the contents). A
  /// set of millions of keys is mostly cache misses; callers that know their next keys prefetch
  /// a few ahead so the misses overlap.
  void prefetch(uint64_t key) const { __builtin_prefetch(&cells_[slot(key)], 1); }

 private:
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow() {
    HugeArray<uint64_t> old(cells_.size() * 2);
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
  HugeArray<uint64_t> cells_;
  size_t mask_;
  int shift_;
  size_t size_ = 0;
  bool has_zero_ = false;
};

}  // namespace dyn::kv
