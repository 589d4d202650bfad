// dyn-bind: Inspect and check session affinity in traces and live routers.
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Inspect and check session affinity in traces and live routers", "dyn-bind"};
  dyn::cli::Dispatch dispatch(app);
  setup_show(app, dispatch);
  setup_check(app, dispatch);
  setup_live(app, dispatch);
  app.require_subcommand(1);
  return dyn::cli::run_tool(argc, argv, app, [&] { return dispatch.run(); });
}
