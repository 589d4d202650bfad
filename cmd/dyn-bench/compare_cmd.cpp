// dyn-bench compare: two set-ups side by side, one run or several repeats each, with differences and ratios.
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/metrics/compare.h"

using namespace dyn;

namespace {

/// One side of the comparison: each file one run, each run its own report.
metrics::CompareSide load_side(const std::vector<std::string>& files, const std::string& label,
                               const metrics::ReportOptions& ro) {
  metrics::CompareSide side;
  std::string views;
  for (const auto& f : files) {
    metrics::RequestSet set = load_or_fail({f});
    side.runs.push_back(metrics::build_report(set, ro));
    side.files.push_back(std::filesystem::path(f).filename().string());
    const std::string v = metrics::describe_view(set);
    if (side.view.empty() || side.view == v) side.view = v;
    else side.view = "mixed views (runs from several sources)";
  }
  side.label =
      label.empty() ? side.files.front() + (files.size() > 1 ? fmt::format(" +{} more", files.size() - 1) : "") : label;
  return side;
}

}  // namespace

void setup_compare(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> a, b;
    std::string label_a, label_b;
    cli::Format format = cli::Format::kAuto;
    std::string goodput;
    uint32_t kv_block_size = dyn::kDefaultKvBlockSize;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "The same metrics for two set-ups side by side, with B-A and B/A: A B (one run each), or A1 A2 ... --vs B1 B2 "
      "... (repeats: mean, spread, and a better side only beyond the spread)");
  sub->add_option("runs", o->a,
                  "Side A's runs (request_end rows or AIPerf profile_export.jsonl, one file per run), or A and B "
                  "when --vs is not given")
      ->required()
      ->type_name("A");
  sub->add_option("--vs", o->b, "Side B's runs, one file per run (repeats of the same set-up)")->type_name("B");
  sub->add_option("--label-a", o->label_a, "Name of side A in the output (default: its first file name)")
      ->type_name("TEXT");
  sub->add_option("--label-b", o->label_b, "Name of side B in the output (default: its first file name)")
      ->type_name("TEXT");
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
    std::vector<std::string> a = o->a, b = o->b;
    if (b.empty()) {
      if (a.size() != 2)
        throw Fatal(kExitUsage, fmt::format("compare needs A and B, or A1 A2 ... --vs B1 B2 ... ({} files given "
                                            "without --vs)",
                                            a.size()));
      b = {a[1]};
      a.resize(1);
    }
    metrics::ReportOptions ro;
    ro.goodput = goodput_or_fail(o->goodput);
    ro.kv_block_size = o->kv_block_size;
    const metrics::CompareSide sa = load_side(a, o->label_a, ro), sb = load_side(b, o->label_b, ro);
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) out->write(metrics::compare_table(sa, sb));
    else out->line(metrics::compare_json(sa, sb).dump(2));
    sink.close();
    return static_cast<int>(kExitOk);
  });
}
