// dyn-trace convert: options -> trace::convert_workload.
#include <memory>

#include "commands.h"
#include "dyn/trace/convert.h"

void setup_convert(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::ConvertOptions c;
    std::string from, to = "mooncake";
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Convert Dynamo traces, Mooncake workloads and Azure CSV traces to Mooncake or agentic workloads");
  sub->add_option("files", o->c.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--from", o->from, "Input format")
      ->required()
      ->check(CLI::IsMember({"dynamo", "mooncake", "azure-csv"}))
      ->type_name("dynamo|mooncake|azure-csv");
  sub->add_option("--to", o->to, "Output format: Mooncake JSONL or Dynamo's agentic form (wait_for chains)")
      ->check(CLI::IsMember({"mooncake", "agentic"}))
      ->type_name("mooncake|agentic");
  sub->add_option("--block-size", o->c.block_size,
                  "Tokens per hash id (default: the trace's own for Dynamo, else 512; a different value is an error)")
      ->check(CLI::Range(1u, 1u << 20))
      ->type_name("B");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add(sub, [o, sub] {
    if (dyn::cli::stdin_is_interactive(o->c.inputs)) {
      std::fputs(sub->help().c_str(), stderr);
      return static_cast<int>(dyn::kExitUsage);
    }
    o->c.from = o->from == "dynamo"     ? dyn::trace::ConvertFrom::kDynamo
                : o->from == "mooncake" ? dyn::trace::ConvertFrom::kMooncake
                                        : dyn::trace::ConvertFrom::kAzureCsv;
    o->c.to = o->to == "agentic" ? dyn::trace::ConvertTo::kAgentic : dyn::trace::ConvertTo::kMooncake;
    dyn::io::Output* out = nullptr;
    auto file = dyn::cli::open_output(o->out, &out);
    int rc = dyn::trace::convert_workload(o->c, *out);
    if (rc == 0) out->close();
    return rc;
  });
}
