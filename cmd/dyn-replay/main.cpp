// dyn-replay: replay a workload against a live OpenAI-compatible endpoint or the simulated cluster
// (SPEC 6.3) and write one request_end row per request: the flags, then replay::run.
#include <cstdio>

#include "dyn/base/error.h"
#include "dyn/cli/run_tool.h"
#include "dyn/replay/run.h"
#include "flags.h"

int main(int argc, char** argv) {
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
