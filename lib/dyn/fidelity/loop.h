// The closed loop of a load point, run through the simulator (SPEC 8 "Fidelity"), and the same
// loop's figures as linear functions of the parametric step model (what calibrate fits).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "dyn/engine/config.h"
#include "dyn/engine/profile.h"
#include "dyn/fidelity/rows.h"

namespace dyn::fidelity {

/// Coefficients of the parametric step model (the length of its feature vector).
inline constexpr size_t kCoefficients = engine::StepCoefficients::kCount;
/// Requests per client of a closed loop: 10 x concurrency in all (Dynamo's digital-twin method).
inline constexpr uint64_t kRequestsPerClient = 10;
/// A closed-loop client's round trip from one response's end to its next request at the engine:
/// below any step's time (steps last at least 1 ms), so the new request misses the step already
/// under way, as on a real server (replay::SimOptions::client_latency_ms).
inline constexpr double kClientLatencyMs = 0.5;

/// A closed loop's means over its requests.
struct LoopFigures {
  double ttft_ms = 0, tpot_ms = 0, tps_gpu = 0;
  uint64_t requests = 0, errors = 0;
};

/// Runs `p` through the simulator of dyn-replay --sim (replay::run_sim: one worker of `engine`,
/// the router in front of it, concurrency mode): p.concurrency clients, kRequestsPerClient x
/// concurrency requests of exactly p.isl prompt tokens and p.osl output tokens, no prefix reuse
/// (no hash ids). TTFT and TPOT are means over the requests (TPOT = (latency - TTFT) / (OSL - 1)),
/// tps_gpu = 1000 x concurrency / TPOT / p.gpus (LoadPoint::tps_gpu's definition). Requests the
/// engine refuses (a prompt larger than its KV pool) count in `errors` and not in the means.
LoopFigures simulate_point(const LoadPoint& p, const engine::EngineConfig& engine);

/// The same closed loop with the parametric step model: mean TTFT = ttft . c + ttft_offset and
/// mean TPOT = tpot . c + tpot_offset for coefficients c (engine::StepCoefficients order), exact
/// while no step is clamped at 1 ms. Obtained by stepping the same engine::Engine in the same
/// order as simulate_point (a step's batch never depends on time in a closed loop with a client
/// latency below every step), summing each request's StepCoefficients::features over the steps
/// between its arrival and its first and last tokens.
struct LinearLoop {
  std::array<double, engine::StepCoefficients::kCount> ttft{}, tpot{};
  double ttft_offset = 0, tpot_offset = 0;
  bool ok = true;  ///< false: a request could not fit the KV pool (this setting cannot run the point)
};
/// `engine`'s scheduler settings are used; its profile and speedup are not.
LinearLoop linear_loop(const LoadPoint& p, const engine::EngineConfig& engine);

}  // namespace dyn::fidelity
