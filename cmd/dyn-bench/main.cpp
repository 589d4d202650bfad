// dyn-bench: Metrics, comparisons, plots and AIPerf-compatible exports from request rows.
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Metrics, comparisons, plots and AIPerf-compatible exports from request rows", "dyn-bench"};
  dyn::cli::Dispatch dispatch(app);
  setup_report(app, dispatch);
  setup_compare(app, dispatch);
  setup_plot(app, dispatch);
  setup_calibrate(app, dispatch);
  setup_fidelity(app, dispatch);
  setup_audit(app, dispatch);
  app.require_subcommand(1);
  return dyn::cli::run_tool(argc, argv, app, [&] { return dispatch.run(); });
}
