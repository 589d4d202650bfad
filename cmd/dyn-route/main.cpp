// dyn-route: Session-aware routing: normalize agent headers, decide placements offline, serve live.
#include "dyn/cli/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"Session-aware routing: normalize agent headers, decide placements offline, serve live", "dyn-route"};
  return dyn::cli::run_tool(argc, argv, app, [&] {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(dyn::kExitUsage);
  });
}
