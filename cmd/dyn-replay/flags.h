// dyn-replay's flags (docs/cli.md), each bound to the replay::RunOptions value it sets, whose
// default is the one --help shows.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"
#include "dyn/replay/run.h"
#include "admission_flags.h"
#include "engine_flags.h"
#include "queue_flags.h"
#include "router_flags.h"

namespace dyn::cmd {

/// Every flag's value, as parsed.
struct ReplayFlags {
  replay::RunOptions run;
  std::vector<std::string> input_files;  ///< --input-file (AIPerf's spelling of the positional FILE)
  std::string summary_path, artifact_dir;
  cli::OutputOptions out;
  EngineFlags engine;
  RouterFlags router;
  AdmissionFlags admission;
  QueueFlags queue;
  std::vector<std::string> references;
  std::vector<std::string> kv_policies;  // --kv-policy names
  /// The options registered after --sim: what only the simulated cluster reads.
  std::vector<const CLI::Option*> cluster;
};

/// Registers every dyn-replay flag on `app`: the workload, records, live endpoint and load flags,
/// -o, then --sim with the simulated cluster's (the engine flags of dyn-mocker, whose block size is
/// the router's --kv-cache-block-size, the router flags of dyn-route, its router queue flags and
/// the admission flags).
void add_replay_flags(CLI::App& app, ReplayFlags& f);

/// The run the parsed flags ask for (after run_tool's parse): the positional workload and
/// --input-file together, the cluster's router and admission settings and --reference policies,
/// and which flags were typed; with --sim, the engine's --perf-profile loaded and its settings
/// applied (EngineFlags::finish; the router takes the engine's block size). Throws Fatal: a
/// profile that cannot be read (kExitBadData), bad engine settings (kExitUsage).
replay::RunOptions run_options(const CLI::App& app, const ReplayFlags& f);

/// Where the run's results go (-o, --line-buffered, --summary, --artifact-dir) with the run's
/// configuration (cli::run_config) for its records.
replay::RunOutput run_output(const CLI::App& app, const ReplayFlags& f, const std::vector<std::string>& inputs);

}  // namespace dyn::cmd
