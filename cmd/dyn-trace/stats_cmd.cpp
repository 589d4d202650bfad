// dyn-trace stats: options -> trace::trace_stats.
#include <memory>

#include "commands.h"
#include "dyn/trace/stats.h"

void setup_stats(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::StatsOptions s;
    std::string format = "auto";
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("stats", "Per-session and per-worker summaries of request_end rows");
  sub->add_option("files", o->s.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--format", o->format, "table, jsonl, or auto: table on a terminal, else jsonl")
      ->check(CLI::IsMember({"auto", "table", "jsonl"}))
      ->capture_default_str();
  sub->add_flag("--strict", o->s.strict, "Exit 3 when a gzip stream is truncated or a row is malformed");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->s.inputs, &o->out, [o](dyn::cli::Sink& sink) {
    dyn::io::Output* out = &sink.get();
    o->s.table = o->format == "auto" ? out->is_terminal() : o->format == "table";
    int rc = dyn::trace::trace_stats(o->s, *out);
    sink.close();
    return rc;
  });
}
