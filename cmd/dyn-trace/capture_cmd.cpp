// dyn-trace capture: a recording proxy in front of one endpoint (request_end rows, SPEC 5).
#include <memory>

#include "commands.h"
#include "frontend_flags.h"

void setup_capture(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  auto f = std::make_shared<dyn::cmd::FrontendFlags>();
  auto upstream = std::make_shared<std::string>();
  auto block = std::make_shared<uint32_t>(64);
  CLI::App* sub = app.add_subcommand(
      "capture", "Record live traffic: proxy to one upstream and write a request_end row per request");
  sub->add_option("--upstream", *upstream, "Base URL of the endpoint to record, e.g. http://127.0.0.1:8000")
      ->required()
      ->type_name("URL");
  sub->add_option("--kv-cache-block-size", *block, "Block size of the replay block's sequence hashes (tokens)")
      ->capture_default_str();
  f->add(*sub, /*trace_always_on=*/true);
  dispatch.add(sub, [f, upstream, block, sub] {
    f->apply(true);

    f->opt.capture = true;
    f->opt.workers = {*upstream};
    f->opt.trace_block_size = *block;
    f->opt.tool_name = "dyn-trace";
    f->opt.run_config = dyn::cmd::frontend_run_config(*sub->get_parent(), f->opt);
    return dyn::serve::run(f->opt);
  });
}
