// dyn-trace stats: options -> trace::trace_stats.
#include <memory>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/trace/stats.h"

void setup_stats(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::StatsOptions s;
    dyn::cli::Format format = dyn::cli::Format::kAuto;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("stats", "Per-session and per-worker summaries of request_end rows");
  sub->add_option("files", o->s.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  dyn::cli::add_format_option(*sub, o->format,
                              {dyn::cli::Format::kAuto, dyn::cli::Format::kTable, dyn::cli::Format::kJson},
                              "Output format (json: one object per session, per worker and the total)");
  sub->add_flag("--strict", o->s.strict, "Exit 3 when a gzip stream is truncated or a row is malformed");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->s.inputs, &o->out, [o](dyn::cli::Sink& sink) {
    dyn::io::Output* out = &sink.get();
    o->s.table = dyn::cli::as_table(o->format, *out);
    int rc = dyn::trace::trace_stats(o->s, *out);
    sink.close();
    return rc;
  });
}
