// dyn-mocker: Mock OpenAI-compatible inference engine with a KV cache and timing model.
#include "dyn/cli/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"Mock OpenAI-compatible inference engine with a KV cache and timing model", "dyn-mocker"};
  return dyn::cli::run_tool(argc, argv, app, [&] {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(dyn::kExitUsage);
  });
}
