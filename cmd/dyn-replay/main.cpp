// dyn-replay: Replay a workload against a live endpoint or the simulated cluster.
#include "dyn/cli/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"Replay a workload against a live endpoint or the simulated cluster", "dyn-replay"};
  return dyn::cli::run_tool(argc, argv, app, [&] {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(dyn::kExitUsage);
  });
}
