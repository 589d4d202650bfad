// A growable array of trivially copyable values in one reserved address range: no copy on growth.
#pragma once

#include <sys/mman.h>

#include <cassert>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace dyn {

/// Up to `capacity` values of T appended one at a time into one anonymous mapping reserved at
/// construction (MAP_NORESERVE): a page becomes resident only when the array grows onto it, and
/// growing never copies, so memory follows the elements in use (issue 54: a thousand simulated
/// engines' KV pools doubled their slabs as blocks arrived, copying and zeroing twice what they
/// kept). No transparent-huge-page advice: pages come one at a time. Move-only; the constructor
/// throws std::bad_alloc when the range cannot be reserved.
template <class T>
class ReservedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  ReservedArray() = default;
  explicit ReservedArray(size_t capacity) : capacity_(capacity) {
    if (capacity == 0) return;
    void* m = ::mmap(nullptr, capacity * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(m);
  }
  ReservedArray(ReservedArray&& o) noexcept { swap(o); }
  ReservedArray& operator=(ReservedArray&& o) noexcept {
    ReservedArray(std::move(o)).swap(*this);
    return *this;
  }
  ReservedArray(const ReservedArray&) = delete;
  ReservedArray& operator=(const ReservedArray&) = delete;
  ~ReservedArray() {
    if (data_) ::munmap(data_, capacity_ * sizeof(T));
  }
  void swap(ReservedArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  /// Appends v; requires size() < capacity().
  void push_back(const T& v) {
    assert(size_ < capacity_);
    data_[size_++] = v;
  }
  /// size() becomes n (<= capacity()) without touching memory: the new values are the mapping's
  /// untouched zero bytes, resident only once written (a hash table sized once for its most
  /// entries costs pages only where cells fill). Only for a T whose all-zero bytes are a value.
  void grow_zeroed(size_t n) {
    assert(n >= size_ && n <= capacity_);
    size_ = n;
  }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace dyn
