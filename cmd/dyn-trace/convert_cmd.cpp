// dyn-trace convert: options -> trace::convert_workload.
#include <memory>

#include "commands.h"
#include "dyn/cli/choices.h"
#include "dyn/trace/convert.h"
#include "engine_flags.h"

void setup_convert(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::ConvertOptions c;
    std::string from, to = "mooncake", perf_profile;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "convert",
      "Convert Dynamo traces, Mooncake workloads, Azure CSV and WEKA agent traces to Mooncake or agentic workloads");
  sub->add_option("files", o->c.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--from", o->from, "Input format: " + dyn::cli::choices_help(dyn::trace::kConvertFrom, ", "))
      ->required()
      ->check(CLI::IsMember(dyn::cli::choice_names(dyn::trace::kConvertFrom)));
  sub->add_option("--to", o->to, "Output format: " + dyn::cli::choices_help(dyn::trace::kConvertTo, ", "))
      ->check(CLI::IsMember(dyn::cli::choice_names(dyn::trace::kConvertTo)))
      ->capture_default_str();
  sub->add_option("--block-size", o->c.block_size,
                  "Tokens per hash id (default: the trace's own for Dynamo, else 512; a different value is an error)")
      ->check(CLI::Range(1u, 1u << 20))
      ->type_name("B");
  sub->add_option("--perf-profile", o->perf_profile,
                  std::string("--to agentic: timing of the service-time estimate behind tool_wait_ms: ") +
                      dyn::cmd::kPerfProfileHelp)
      ->type_name("PATH");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->c.inputs, &o->out, [o](dyn::cli::Sink& sink) {
    o->c.from = *dyn::parse_in(dyn::trace::kConvertFrom, o->from);  // validated by IsMember
    o->c.to = *dyn::parse_in(dyn::trace::kConvertTo, o->to);
    if (!o->perf_profile.empty()) {
      if (o->c.to != dyn::trace::ConvertTo::kAgentic && o->c.from != dyn::trace::ConvertFrom::kWeka)
        throw dyn::Fatal(dyn::kExitUsage,
                         "--perf-profile applies to --to agentic and --from weka only (the "
                         "estimate behind tool_wait_ms)");
      auto p = dyn::engine::PerfProfile::load(o->perf_profile);
      if (!p) throw dyn::Fatal(p.error().exit_code, "--perf-profile " + p.error().message);
      o->c.profile = *p;
    }
    dyn::io::Output* out = &sink.get();
    int rc = dyn::trace::convert_workload(o->c, *out);
    if (rc != 0) sink.discard();  // a failed conversion leaves no partial file
    return rc;
  });
}
