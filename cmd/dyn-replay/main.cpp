// dyn-replay: replay a workload against a live endpoint or the simulated cluster (SPEC 6).
#include "dyn/cli/run_tool.h"
#include "sim_cmd.h"

int main(int argc, char** argv) {
  CLI::App app{"Replay a workload against a live endpoint or the simulated cluster", "dyn-replay"};
  std::vector<std::string> inputs;
  uint32_t block_size = 0;
  dyn::cli::OutputOptions out;
  dyn::cmd::SimFlags sim;
  app.add_option("WORKLOAD", inputs, "Mooncake JSONL workload or Dynamo trace files ('-' = stdin)");
  app.add_option("--block-size", block_size, "Block size of the workload's hash_ids (default 512, or the trace's)")
      ->check(CLI::PositiveNumber);
  dyn::cli::add_output_options(app, out);
  dyn::cmd::add_sim_flags(app, sim);
  return dyn::cli::run_tool(argc, argv, app, [&] {
    if (!sim.sim) throw dyn::Fatal(dyn::kExitUsage, "live replay is not built yet: use --sim");
    if (dyn::cli::stdin_is_interactive(inputs)) {
      std::fputs(app.help().c_str(), stderr);
      return static_cast<int>(dyn::kExitUsage);
    }
    return dyn::cmd::run_sim_cmd(inputs, block_size, sim, out.output, out.line_buffered);
  });
}
