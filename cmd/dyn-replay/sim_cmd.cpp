// dyn-replay --sim: flags, workload loading and the simulated run (its summary: replay/summary.h).
#include "sim_cmd.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/cli/choices.h"
#include "dyn/cli/run_tool.h"
#include "dyn/replay/sim.h"
#include "dyn/replay/summary.h"
#include "dyn/records/workload.h"
#include "engine_flags.h"

namespace dyn::cmd {

void add_sim_flags(CLI::App& app, SimFlags& f, bool add_seed, bool add_model) {
  const char* g = "Simulation";
  app.add_flag(
         "--sim", f.sim,
         "Replay through the simulated cluster on a virtual clock instead of an endpoint (the load flags apply as they do live; endpoint-only flags are usage errors)")
      ->group(g);
  const size_t first = app.get_options().size();
  app.add_option("--workers", f.workers, "Simulated engines (--sim)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u))
      ->group(g);
  app.add_option("--sim-epoch-unix-ms", f.epoch_unix_ms, "Unix ms of virtual time 0 in the records (--sim)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--reference", f.references,
                 "Yardstick (repeatable): after the run, its requests with the same timing and engine blocks go "
                 "through one KV cache of every worker's blocks, and the summary gives this run's hit rate as a "
                 "fraction of that cache's: " +
                     cli::choices_help(tokens::kReferencePolicies, "; ", ": "))
      ->check(CLI::IsMember(cli::choice_names(tokens::kReferencePolicies)))
      ->allow_extra_args(false)  // one policy per --reference: a workload file after it stays the input
      ->group(g);
  if (add_seed) app.add_option("--seed", f.seed, "Seed of every random choice")->capture_default_str()->group(g);
  if (add_model) app.add_option("--model", f.model, "Model name in the records")->capture_default_str()->group(g);
  add_engine_flags(app, f.engine, /*with_block_size=*/false, "Engine (--sim)");
  add_router_flags(app, f.router);
  add_admission_flags(app, f.admission, /*with_kv_blocks=*/false);
  // --seed and --model name the run, not the cluster (live runs have them too).
  const auto all = app.get_options();
  for (size_t i = first; i < all.size(); ++i) {
    const std::string& n = all[i]->get_lnames().front();
    if (n != "seed" && n != "model") f.cluster_options.push_back(all[i]);
  }
}

int run_sim_cmd(const std::vector<std::string>& inputs, uint32_t workload_block_size, const SimFlags& f,
                const std::string& out_path, bool line_buffered, Json* summary) {
  const route::AdmissionConfig admission = admission_config(f.admission);  // usage errors before loading
  records::WorkloadOptions wo;
  wo.block_size = workload_block_size;
  wo.strict_hash_ids = !f.lenient;
  wo.require_timestamps = f.schedule.mode == replay::LoadMode::kFixedSchedule;
  replay::SimOptions so;
  so.workers = f.workers;
  so.engine = f.engine;
  so.router = f.router.config(f.seed);
  so.engine.block_size = so.router.block_size;
  so.epoch_unix_ms = f.epoch_unix_ms;
  so.model = f.model;
  so.admission = admission;
  so.schedule = f.schedule;
  so.concurrency = f.concurrency;
  so.duration_s = f.duration_s;
  for (const auto& name : f.references) so.references.push_back(*parse_in(tokens::kReferencePolicies, name));
  cli::OutputOptions oo{out_path, line_buffered};
  io::Output* out = nullptr;
  auto owned = cli::open_output(oo, &out);
  auto s = replay::run_sim_files(inputs, wo, so, *out);
  out->close();
  diag::note(replay::sim_summary_line(s, f.workers));
  if (std::string skipped = replay::sim_skipped_line(s); !skipped.empty()) diag::note(skipped);
  if (std::string refs = replay::sim_reference_line(s); !refs.empty()) diag::note(refs);
  if (std::string streamed = replay::sim_stream_line(s); !streamed.empty()) diag::note(streamed);
  if (summary) *summary = replay::sim_summary_json(s, f.workers);
  return kExitOk;
}

}  // namespace dyn::cmd
