// dyn-replay --sim: the simulated-cluster face of dyn-replay (flags and the run).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/base/json.h"
#include "dyn/engine/config.h"
#include "dyn/replay/schedule.h"
#include "admission_flags.h"
#include "router_flags.h"

namespace dyn::cmd {

struct SimFlags {
  bool sim = false;
  uint32_t workers = 1;
  engine::EngineConfig engine;
  RouterFlags router;
  AdmissionFlags admission;
  uint64_t seed = 0;
  uint64_t epoch_unix_ms = 0;
  /// --lenient: hash_ids that do not fit input_length are a warning, not a rejected workload.
  bool lenient = false;
  std::string model = "mock-model";
  /// The live replay's load controls (dyn-replay flags, checked and set by the command;
  /// replay::SimOptions says what each does in simulation).
  replay::ScheduleOptions schedule;
  uint64_t concurrency = 0;
  double duration_s = 0;
  std::vector<std::string> references;  ///< --reference names (tokens::kReferencePolicies)
  /// The options add_sim_flags registered after --sim itself (workers, references, engine,
  /// router, admission): what only the simulated cluster reads.
  std::vector<const CLI::Option*> cluster_options;
};

/// Adds --sim, --workers, the engine flags of dyn-mocker (the engine block size is the router's
/// --kv-cache-block-size) and the router flags of dyn-route to `app`. `add_seed`/`add_model`:
/// whether to register --seed/--model here (false when the live side already has them and
/// binds them to the same variables).
void add_sim_flags(CLI::App& app, SimFlags& f, bool add_seed = true, bool add_model = true);

/// Loads the workload (`inputs`, "-" = stdin; `workload_block_size` 0 = 512 or the trace's own;
/// timestamps required on the fixed schedule only),
/// runs the simulation, writes request_end rows to `out_path` ("-" = stdout) and a summary on
/// stderr (requests, simulated and wall time, prompt-cache and theoretical hit %). Returns the
/// exit code (3 when the workload has errors, 0 otherwise). `summary`, when given, receives the
/// same figures as JSON (requests, errors, workers, simulated_s, wall_s, prompt_cache_hit_pct,
/// theoretical_hit_pct, preemptions).
int run_sim_cmd(const std::vector<std::string>& inputs, uint32_t workload_block_size, const SimFlags& f,
                const std::string& out_path, bool line_buffered, Json* summary = nullptr);

}  // namespace dyn::cmd
