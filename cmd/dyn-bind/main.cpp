// dyn-bind: Inspect and check session affinity in traces and live routers.
#include "dyn/cli/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"Inspect and check session affinity in traces and live routers", "dyn-bind"};
  return dyn::cli::run_tool(argc, argv, app, [&] {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(dyn::kExitUsage);
  });
}
