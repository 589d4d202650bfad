// Timing profiles (SPEC 8, --perf-profile): how long one engine step takes on real hardware, read
// from Dynamo's profiler output, the mocker's converted npz, or dyn's own JSON (what
// `dyn-bench calibrate` writes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"

namespace dyn::engine {

/// What one engine step computed: the inputs of every timing model (SPEC 8).
struct StepShape {
  uint64_t prefill_tokens = 0;    ///< uncached prompt tokens computed (Dynamo: batch new tokens)
  uint64_t prefill_seqs = 0;      ///< sequences that computed prompt tokens
  double prefill_attention = 0;   ///< causal attention work of those chunks: sum of chunk x (tokens
                                  ///< before the chunk + chunk / 2), in token^2
  uint64_t decode_seqs = 0;       ///< sequences that decoded one token
  uint64_t decode_kv_tokens = 0;  ///< sum of the decoding sequences' context lengths (Dynamo's
                                  ///< "active KV tokens": logical, shared prefixes counted per sequence)
};

/// Coefficients of dyn's parametric step model (SPEC 8, the form calibrate fits), all in ms:
/// step = base + prefill_step x [P > 0] + prefill_token x P + prefill_attention x A
///        + prefill_seq x Np + decode_seq x D + kv_token x K, at least 1 ms,
/// with P, A, Np, D, K the StepShape fields. Each term is one piece of physics: a fixed cost per
/// forward pass (weights read, launch, scheduling), the extra fixed cost of a pass that computes
/// prompt tokens (no decode-only CUDA graph, the prefill attention path), GEMM compute per new
/// token, causal attention per token pair, per-sequence cost of a prefill (sampling, metadata),
/// per-sequence cost of a decode, and attention's KV-cache reads per context token.
struct StepCoefficients {
  double base = 0, prefill_step = 0, prefill_token = 0, prefill_attention = 0, prefill_seq = 0, decode_seq = 0,
         kv_token = 0;
  static constexpr size_t kCount = 7;
  double operator[](size_t i) const;
  double& operator[](size_t i);
  /// The terms' names in the JSON profile, in the order above.
  static const char* name(size_t i);
  /// The feature vector of `s` (1, [P > 0], P, A, Np, D, K): step_ms = max(1, sum of coefficient x
  /// feature).
  static std::vector<double> features(const StepShape& s);
};

/// Engine settings a profile was measured or fitted with; each one unset leaves the flag's default.
struct ProfileEngine {
  std::optional<uint32_t> block_size;
  std::optional<uint64_t> num_gpu_blocks;
  /// KV capacity in tokens (the profiler's max_kv_tokens): num_gpu_blocks = kv_tokens / block size
  /// when num_gpu_blocks is not set.
  std::optional<uint64_t> kv_tokens;
  std::optional<uint32_t> max_num_seqs;
  std::optional<uint32_t> max_num_batched_tokens;
  std::optional<bool> enable_chunked_prefill;
  std::optional<uint32_t> prefill_schedule_interval;
  std::optional<uint32_t> max_num_partial_prefills;  ///< 0 = no limit
};

/// Interpolation tables (Dynamo mocker's Interpolated model): prefill ms over new tokens, decode
/// ms over (active KV tokens, mean context length) on a grid; both extrapolate linearly.
struct ProfileTables {
  std::vector<double> prefill_tokens, prefill_ms;        ///< strictly increasing tokens
  std::vector<double> decode_kv_tokens, decode_context;  ///< strictly increasing axes
  std::vector<double> decode_ms;                         ///< [kv][context], row-major
};

/// A loaded timing profile. Immutable once loaded; shared by every engine of a run.
class PerfProfile {
 public:
  enum class Kind { kTables, kParametric };
  /// Provenance: what hardware and engine the profile describes ("" = not recorded).
  struct Info {
    std::string model, gpu, engine, engine_version;
    uint32_t tp = 0;     ///< tensor-parallel size (0 = not recorded)
    uint32_t gpus = 0;   ///< GPUs of one engine (0 = tp, or 1)
    std::string format;  ///< "dyn-json", "mocker-npz", "profiler-raw"
    std::string source;  ///< the path it was read from
  };

  /// Reads PATH (SPEC 8 "Timing profiles"), by what it is:
  /// - a directory: Dynamo profiler output (selected_prefill_interpolation/raw_data.npz and
  ///   selected_decode_interpolation/raw_data.npz), or one holding a *prefill*raw_data.npz and a
  ///   *decode*raw_data.npz;
  /// - "A.npz,B.npz": the profiler's two raw_data.npz files (either order);
  /// - an .npz: the mocker's converted profile (prefill_isl, prefill_ttft_ms,
  ///   decode_active_kv_tokens, decode_context_length, decode_itl [kv x context]) or one holding
  ///   both raw key sets;
  /// - a .json: dyn's profile (to_json's form).
  /// Raw profiler points are resampled (documented in SPEC 8): prefill sorted by ISL; decode, per
  /// profiled context length, linear in KV tokens (x_kv_usage x max_kv_tokens) onto 100 points
  /// from 0 to max_kv_tokens, the context axis being the profiled lengths; max_kv_tokens also
  /// sets the engine's KV capacity (num_gpu_blocks at the engine's block size).
  /// Errors (kExitBadData, naming the file and the key): unreadable or malformed file, a missing
  /// key, a NaN or infinite value, an axis that is not strictly increasing, mismatched lengths,
  /// fewer than one point, negative times.
  static Expected<std::shared_ptr<const PerfProfile>> load(const std::string& path);
  /// A parametric profile (what calibrate fits).
  static std::shared_ptr<const PerfProfile> parametric(const StepCoefficients& c, Info info, ProfileEngine engine);
  /// Builds a table profile from already-checked tables (tests, converters).
  static std::shared_ptr<const PerfProfile> tables(ProfileTables t, Info info, ProfileEngine engine);

  /// Step time in ms, before the speedup ratio. Tables: prefill_ms(P) (at least 0, 0 when P = 0)
  /// plus, when sequences decoded, decode_ms(K, K / D) at least 1 ms (Dynamo perf_model.rs); an
  /// empty step 1 ms. Parametric: see StepCoefficients.
  double step_ms(const StepShape& s) const;

  /// Estimated service time of one request in ms (before the speedup ratio), for tools that
  /// estimate ends without stepping an engine (dyn-route decide's end model, dyn-trace
  /// sessionize): its uncached prompt tokens (after `cached`) in chunks of `chunk` tokens, one step
  /// each (0 = one step), then `output` decode steps, each with this request at its mean context
  /// (prompt + output / 2) beside other sequences holding `other_kv_tokens` of context in all
  /// (counted as that many tokens over sequences of the same mean context).
  double request_ms(uint64_t prompt, uint64_t cached, uint64_t output, uint64_t chunk, double other_kv_tokens) const;

  Kind kind() const { return kind_; }
  const Info& info() const { return info_; }
  const ProfileEngine& engine() const { return engine_; }
  const StepCoefficients& coefficients() const { return coef_; }
  const ProfileTables& table() const { return tables_; }
  /// GPUs of one engine (info.gpus, else tp, else 1): throughput per GPU divides by it.
  uint32_t gpus() const;
  /// dyn's JSON form: {"schema": "dyn.perf_profile.v1", "model", "gpu", "tp", "gpus", "engine",
  /// "engine_version", "step_ms": {base, prefill_token, ...}, "engine_settings": {...}}; tables
  /// profiles add "prefill" {tokens, ms} and "decode" {kv_tokens, context, ms} instead of step_ms.
  Json to_json() const;
  /// One line naming the profile for logs and help: "Qwen/Qwen3-32B on h100_sxm TP2, vllm 0.12.0".
  std::string describe() const;

 private:
  Kind kind_ = Kind::kParametric;
  Info info_;
  ProfileEngine engine_;
  StepCoefficients coef_;
  ProfileTables tables_;
};

/// Parses dyn's JSON profile from text (`source` names it in errors); load() uses it for .json.
Expected<std::shared_ptr<const PerfProfile>> parse_profile_json(const std::string& text, const std::string& source);

/// Linear interpolation over strictly increasing `xs` with linear extrapolation past both ends
/// (one point: constant).
double interp1(const std::vector<double>& xs, const std::vector<double>& ys, double x);

}  // namespace dyn::engine
