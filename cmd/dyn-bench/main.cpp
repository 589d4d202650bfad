// dyn-bench: Metrics, comparisons, plots and AIPerf-compatible exports from request rows.
#include "dyn/cli/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"Metrics, comparisons, plots and AIPerf-compatible exports from request rows", "dyn-bench"};
  return dyn::cli::run_tool(argc, argv, app, [&] {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(dyn::kExitUsage);
  });
}
