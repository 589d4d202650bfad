// Engine settings validation and the SPEC 8 timing polynomials.
#include "dyn/engine/config.h"

#include <algorithm>

namespace dyn::engine {

std::string EngineConfig::validate() const {
  if (block_size == 0) return "block size must be > 0";
  if (num_blocks == 0) return "the KV pool needs at least one block (--num-gpu-blocks-override)";
  if (max_num_seqs == 0) return "--max-num-seqs must be > 0";
  if (max_num_batched_tokens == 0) return "--max-num-batched-tokens must be > 0";
  if (!(speedup_ratio > 0)) return "--speedup-ratio must be > 0";
  return {};
}

double prefill_time_ms(uint64_t new_tokens) {
  if (new_tokens == 0) return 0.0;
  const double t = static_cast<double>(new_tokens);
  return 4.209989e-07 * t * t + 1.518344e-02 * t + 16.50142;
}

double decode_time_ms(double u) { return std::max(1.0, -25.74 * u * u + 54.01 * u + 5.74); }

}  // namespace dyn::engine
