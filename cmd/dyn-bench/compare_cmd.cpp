// dyn-bench compare: two runs side by side with differences and ratios.
#include <filesystem>
#include <memory>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/metrics/compare.h"

using namespace dyn;

void setup_compare(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::string a, b;
    std::string label_a, label_b;
    cli::Format format = cli::Format::kAuto;
    std::string goodput;
    uint32_t kv_block_size = dyn::kDefaultKvBlockSize;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("compare", "The same metrics for two runs side by side, with B-A and B/A");
  sub->add_option("a", o->a, "Baseline run: request_end rows or AIPerf profile_export.jsonl")
      ->required()
      ->type_name("A");
  sub->add_option("b", o->b, "Run compared with the baseline")->required()->type_name("B");
  sub->add_option("--label-a", o->label_a, "Name of run A in the output (default: its file name)")->type_name("TEXT");
  sub->add_option("--label-b", o->label_b, "Name of run B in the output (default: its file name)")->type_name("TEXT");
  cli::add_format_option(*sub, o->format, {cli::Format::kAuto, cli::Format::kTable, cli::Format::kJson},
                         "Output format");
  sub->add_option("--goodput", o->goodput, "SLOs as for report, applied to both runs")->type_name("SLOS");
  sub->add_option("--kv-block-size", o->kv_block_size,
                  "Tokens per engine KV block: the theoretical (infinite-cache) hit rate counts full blocks of this "
                  "size, as the engines cache them")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, nullptr, &o->out, [o](cli::Sink& sink) {
    metrics::ReportOptions ro;
    ro.goodput = goodput_or_fail(o->goodput);
    ro.kv_block_size = o->kv_block_size;
    metrics::RequestSet a = load_or_fail({o->a});
    metrics::RequestSet b = load_or_fail({o->b});
    const metrics::Report ra = metrics::build_report(a, ro), rb = metrics::build_report(b, ro);
    const std::string la = o->label_a.empty() ? std::filesystem::path(o->a).filename().string() : o->label_a;
    const std::string lb = o->label_b.empty() ? std::filesystem::path(o->b).filename().string() : o->label_b;
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) out->write(metrics::compare_table(ra, rb, la, lb));
    else out->line(metrics::compare_json(ra, rb, la, lb).dump(2));
    sink.close();
    return static_cast<int>(kExitOk);
  });
}
