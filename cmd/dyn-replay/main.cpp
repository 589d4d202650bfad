// dyn-replay: replay a workload against a live OpenAI-compatible endpoint or the simulated cluster
// (SPEC 6.3) and write one request_end row per request: the flags, then replay::run.
#include <cstdio>
#include <string_view>

#include "dyn/base/error.h"
#include "dyn/cli/run_tool.h"
#include "dyn/replay/run.h"
#include "flags.h"

int main(int argc, char** argv) {
  // AIPerf's verb: `dyn-replay profile WORKLOAD ...` runs as `dyn-replay WORKLOAD ...` (a workload
  // file named profile is ./profile).
  if (argc > 1 && std::string_view(argv[1]) == "profile") {
    for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
    argv[--argc] = nullptr;
  }
  CLI::App app{"Replay a workload against a live endpoint or the simulated cluster", "dyn-replay"};
  dyn::cmd::ReplayFlags flags;
  dyn::cmd::add_replay_flags(app, flags);
  return dyn::cli::run_tool(argc, argv, app, [&] {
    const dyn::replay::RunOptions options = dyn::cmd::run_options(app, flags);
    if (dyn::cli::stdin_is_interactive(options.inputs)) {
      std::fputs(app.help().c_str(), stderr);
      return static_cast<int>(dyn::kExitUsage);
    }
    return dyn::replay::run(options, dyn::cmd::run_output(app, flags, options.inputs));
  });
}
