// dyn-trace cat: options -> trace::cat_traces.
#include <memory>

#include "commands.h"
#include "dyn/trace/cat.h"

void setup_cat(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::CatOptions cat;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub =
      app.add_subcommand("cat", "Concatenate trace segments and JSONL files in order, unwrapping envelopes");
  sub->add_option("files", o->cat.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_flag("--sort", o->cat.sort, "Stable sort by event_time_unix_ms");
  sub->add_flag("--strict", o->cat.strict, "Exit 3 when a gzip stream is truncated or a row is malformed");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->cat.inputs, &o->out, [o](dyn::cli::Sink& sink) {
    dyn::io::Output* out = &sink.get();
    int rc = dyn::trace::cat_traces(o->cat, *out);
    sink.close();
    return rc;
  });
}
