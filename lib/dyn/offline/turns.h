// Exact per-session turn counts for dyn-route decide's request ids, in about 20 bytes a session.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dyn::offline {

/// How many times each string key has been counted, exactly. dyn-route decide names a row
/// without a request id "<session_id>:<turn>", the turn being the number of the session's rows
/// routed before it (docs/records.md); a session may come back at any later row, so every session
/// ever seen keeps its count. Stored compactly: each key once in 64 KiB chunks as
/// [u32 count][LEB128 length][bytes], found through an open-addressing table of u32 references
/// (at most 3/4 full), about 20 bytes a key of 9 characters; a std::unordered_map<std::string,
/// uint64_t> took about 72 bytes a key, 9 MiB of decide's 34 MiB peak on 16 copies of the
/// sessionized Mooncake trace (issue 17). Counts are exact up to 2^64 - 1 (a count that reaches
/// 2^32 - 1 continues in a side table). Throws std::length_error past 4 GiB of keys (65,536
/// chunks), std::bad_alloc when memory runs out. Not thread-safe.
class TurnCounter {
 public:
  TurnCounter();
  ~TurnCounter();
  TurnCounter(const TurnCounter&) = delete;
  TurnCounter& operator=(const TurnCounter&) = delete;

  /// The number of times `key` was counted before this call (0 for a new key), then counts it
  /// once more. Any bytes are a key, "" included.
  uint64_t next(std::string_view key);
  /// The number of times `key` was counted, without counting it.
  uint64_t count(std::string_view key) const;
  /// Cache hints for a key that next() will be asked about soon: stage 1 fetches its table cells,
  /// stage 2 (a call later, once they are in) the key's record. Each lookup of a key last seen
  /// long ago otherwise waits for two cache misses (dyn-route decide calls them one and two rows
  /// ahead). No effect on counts.
  void prefetch_cells(std::string_view key) const;
  void prefetch_record(std::string_view key) const;
  /// Distinct keys counted.
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = 0xffffffffu;
  static constexpr uint32_t kChunkBits = 16;
  static constexpr size_t kChunk = size_t{1} << kChunkBits;
  size_t slot(uint64_t h) const { return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> shift_); }
  char* at(uint32_t ref) const { return chunks_[ref >> kChunkBits].get() + (ref & (kChunk - 1)); }
  std::string_view key_of(uint32_t ref) const;
  // The table cell holding `key`'s reference, or the empty cell where it would go.
  uint32_t* find_cell(std::string_view key, uint64_t h) const;
  static uint8_t tag_of(uint64_t h) { return static_cast<uint8_t>(h); }
  uint32_t add(std::string_view key);  // appends a record with count 0, returns its reference
  void grow();
  uint64_t read_count(uint32_t ref) const;
  void write_count(uint32_t ref, uint64_t c);

  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t used_ = kChunk;  // bytes used in the last chunk (full: the first add() opens one)
  std::unique_ptr<uint32_t[]> table_;
  std::unique_ptr<uint8_t[]> tags_;  // tag_of(hash) of each occupied cell's key
  size_t cells_ = 0, mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
  std::unordered_map<uint32_t, uint64_t> big_;  // counts >= 2^32 - 1, by reference
};

}  // namespace dyn::offline
