// dyn-trace: capture, cat, filter, summarize and convert request traces (SPEC 5, 6).
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Capture, concatenate, filter, summarize and convert request traces", "dyn-trace"};
  dyn::cli::Dispatch dispatch(app);
  setup_cat(app, dispatch);
  setup_filter(app, dispatch);
  setup_stats(app, dispatch);
  setup_convert(app, dispatch);
  setup_sessionize(app, dispatch);
  setup_generate(app, dispatch);
  setup_capture(app, dispatch);
  app.require_subcommand(1);
  return dyn::cli::run_tool(argc, argv, app, [&] { return dispatch.run(); });
}
