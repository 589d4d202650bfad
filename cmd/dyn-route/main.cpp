// dyn-route: session-aware routing: normalize agent headers, decide placements offline, serve live.
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Session-aware routing: normalize agent headers, decide placements offline, serve live", "dyn-route"};
  dyn::cli::Dispatch dispatch(app);
  setup_normalize(app, dispatch);
  setup_decide(app, dispatch);
  setup_serve(app, dispatch);
  app.require_subcommand(1);
  return dyn::cli::run_tool(argc, argv, app, [&] { return dispatch.run(); });
}
