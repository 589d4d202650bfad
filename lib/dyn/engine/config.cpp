// Engine settings validation and the SPEC 8 timing polynomials.
#include "dyn/engine/config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dyn::engine {

std::string EngineConfig::validate() const {
  if (block_size == 0) return "block size must be > 0";
  if (num_blocks == 0) return "the KV pool needs at least one block (--num-gpu-blocks-override)";
  if (max_num_seqs == 0) return "--max-num-seqs must be > 0";
  if (max_num_batched_tokens == 0) return "--max-num-batched-tokens must be > 0";
  if (!(speedup_ratio > 0)) return "--speedup-ratio must be > 0";
  if (prefill_schedule_interval == 0) return "--prefill-schedule-interval must be >= 1";
  if (long_prefill_token_threshold > 0 && !enable_chunked_prefill)
    return "--long-prefill-token-threshold splits long prompts across steps: it needs chunked prefill (drop "
           "--no-chunked-prefill)";
  return tiers.validate(kv_bytes_per_token);
}

std::string TierConfig::validate(uint64_t kv_bytes_per_token) const {
  if (!enabled() && (g3_blocks || g4_blocks))
    return fmt::format("--num-{}-blocks needs --num-g2-blocks: lower tiers are staged through G2 (host memory)",
                       g3_blocks ? "g3" : "g4");
  if (enabled() && kv_bytes_per_token == 0)
    return "--num-g2-blocks needs --kv-bytes-per-token: a block transfer moves block size x bytes per token";
  return {};
}

Expected<uint64_t> kv_blocks_for_memory(double gpu_memory_gib, double utilization, double reserved_gib,
                                        uint64_t kv_bytes_per_token, uint32_t block_size) {
  if (!(gpu_memory_gib > 0) || !(utilization > 0) || utilization > 1 || reserved_gib < 0 || kv_bytes_per_token == 0 ||
      block_size == 0)
    return Error{
        "the KV memory budget needs --gpu-memory-gib > 0, --gpu-memory-utilization in (0, 1], "
        "--reserved-memory-gib >= 0 and --kv-bytes-per-token > 0",
        kExitUsage};
  const double kv_bytes = (gpu_memory_gib * utilization - reserved_gib) * 1073741824.0;
  const double per_block = static_cast<double>(kv_bytes_per_token) * static_cast<double>(block_size);
  const double blocks = std::floor(kv_bytes / per_block);
  if (!(blocks >= 1))
    return Error{fmt::format("the KV memory budget ({} GiB x {} - {} GiB reserved) holds no block of {} tokens x {} "
                             "bytes",
                             gpu_memory_gib, utilization, reserved_gib, block_size, kv_bytes_per_token),
                 kExitUsage};
  return static_cast<uint64_t>(std::min(blocks, 1099511627776.0));
}

double prefill_time_ms(uint64_t new_tokens) {
  if (new_tokens == 0) return 0.0;
  const double t = static_cast<double>(new_tokens);
  return 4.209989e-07 * t * t + 1.518344e-02 * t + 16.50142;
}

double decode_time_ms(double u) { return std::max(1.0, -25.74 * u * u + 54.01 * u + 5.74); }

}  // namespace dyn::engine
