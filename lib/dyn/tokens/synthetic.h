// Synthetic prompt text from hash ids (SPEC 4.3).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dyn::tokens {

/// Text of one block: exactly 4 * block_size bytes of printable ASCII, a pure function of
/// (seed, hash_id, block_size). It starts with the id in hex and a colon, so the first bytes
/// differ between ids and a real tokenizer does not merge neighbouring blocks.
std::string block_text(uint64_t seed, uint64_t hash_id, uint32_t block_size);

/// Prompt for a workload row: the block texts of `hash_ids` concatenated, the whole cut to
/// 4 * input_length bytes (so it is exactly input_length tokens under SPEC 4.2). Never padded
/// to len*B: with too few ids (a row accepted in lenient mode) filler blocks follow, so the
/// prompt still has exactly input_length tokens.
std::string synthetic_prompt(uint64_t seed, std::span<const uint64_t> hash_ids, uint64_t input_length,
                             uint32_t block_size);

}  // namespace dyn::tokens
