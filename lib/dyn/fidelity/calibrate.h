// Calibration (dyn-bench calibrate) and fidelity scoring (dyn-bench fidelity) of the engine model
// against measured closed loops (SPEC 8 "Calibration").
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/engine/config.h"
#include "dyn/engine/profile.h"
#include "dyn/fidelity/loop.h"
#include "dyn/fidelity/rows.h"

namespace dyn::fidelity {

/// Mean absolute percentage errors of predictions against measurements (percent, not fractions).
struct Scores {
  uint64_t rows = 0;
  double ttft_mape_pct = 0, tpot_mape_pct = 0, tps_gpu_mape_pct = 0;
  Json to_json() const;  ///< {"rows", "ttft_mape_pct", "tpot_mape_pct", "tps_gpu_mape_pct"}
};

/// One load point with what the simulator predicted for it.
struct Prediction {
  LoadPoint point;
  LoopFigures predicted;
};

/// Scores of predictions (rows the simulator could not run count as 100 % off).
Scores score(const std::vector<Prediction>& rows);
/// Per row: {isl, osl, concurrency, ttft_ms, ttft_pred_ms, tpot_ms, tpot_pred_ms, tps_gpu,
/// tps_gpu_pred}.
Json prediction_json(const Prediction& p);

/// Runs every point through the simulator with `engine` (simulate_point): dyn-bench fidelity.
std::vector<Prediction> predict(const std::vector<LoadPoint>& points, const engine::EngineConfig& engine);

struct CalibrateOptions {
  /// The engine whose step model is fitted: block size, max_num_seqs and the rest as given; the
  /// scheduler settings below are searched unless fixed.
  engine::EngineConfig engine;
  /// Per-step token budgets tried (vLLM max_num_batched_tokens); one value fixes it.
  std::vector<uint32_t> budgets = {2048, 4096, 8192, 16384, 32768};
  /// Chunked prefill on and off tried; one value fixes it.
  std::vector<bool> chunked = {true, false};
  /// max_num_partial_prefills values tried (0 = no limit); one value fixes it.
  std::vector<uint32_t> partials = {0, 1, 2, 4};
  /// prefill_schedule_interval values tried; one value fixes it.
  std::vector<uint32_t> intervals = {1};
  /// Search the KV pool's size (the capacity that makes long high-concurrency loops queue); false
  /// keeps engine.num_blocks.
  bool fit_kv = true;
  /// Search max_num_seqs below the largest concurrency (a cap that makes requests wait for a
  /// running one to finish); false keeps engine.max_num_seqs.
  bool fit_seqs = true;
  /// Leave-one-ISL/OSL-pair-out scores (each pair fitted without its rows, then predicted).
  bool held_out = true;
  /// What the profile names (model, GPU, TP, engine, version).
  engine::PerfProfile::Info info;
};

struct CalibrateResult {
  std::shared_ptr<const engine::PerfProfile> profile;  ///< fitted on every point
  std::vector<Prediction> train;                       ///< every point, predicted by `profile`
  std::vector<Prediction> held_out;                    ///< each pair's rows, predicted without them
  Scores train_scores, held_out_scores;
};

/// Fits the parametric step model (engine::StepCoefficients, all >= 0) and the scheduler settings
/// so that simulated closed loops reproduce `points`: for each candidate setting (token budget x
/// chunked prefill x KV pool size) the loops' mean TTFT and TPOT are linear in the coefficients
/// (linear_loop), which non-negative least squares fits on relative errors (each point's TTFT and
/// TPOT weigh alike); the setting with the lowest mean absolute relative error wins. Every score
/// then comes from the simulator (simulate_point), never from the linear model. Held-out scores:
/// deterministic leave-one-ISL/OSL-pair-out over every pair, the setting chosen on the training
/// rows only. Errors (kExitBadData): fewer than three ISL/OSL pairs ("needs at least three"), no
/// setting that can run every point.
Expected<CalibrateResult> calibrate(const std::vector<LoadPoint>& points, const CalibrateOptions& options);

/// Non-negative least squares (Lawson-Hanson): x >= 0 minimizing |A x - b|, A given as rows.
std::vector<double> nnls(const std::vector<std::vector<double>>& a, const std::vector<double>& b);

}  // namespace dyn::fidelity
