// dyn-bench report: SPEC 7 metrics as a table, JSON or CSV, and AIPerf-compatible exports.
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/base/defaults.h"
#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/cli/choices.h"
#include "dyn/cli/run_config.h"
#include "dyn/io/sniff.h"

using namespace dyn;

metrics::RequestSet load_or_fail(const std::vector<std::string>& inputs) {
  metrics::RequestSet set = metrics::load_requests(inputs);
  if (set.requests.empty()) {
    // Name the formats this reads and, when the input explains it, what it got (issue 21.8).
    std::string msg = fmt::format(
        "no request rows found ({} other rows, {} warmup rows, {} malformed lines): expected request_end rows "
        "(dyn-route serve, dyn-trace capture, dyn-replay) or AIPerf's per-request profile_export.jsonl",
        set.other_rows, set.warmup_skipped, set.malformed);
    std::string why = io::explain_unusable_input(
        inputs, {{io::InputShape::kJsonDocument,
                  "an AIPerf summary export (profile_export_aiperf.json) has no per-request data: pass the "
                  "profile_export.jsonl beside it"},
                 {io::InputShape::kCsv, "CSV exports are output only; pass the JSONL rows"}});
    if (!why.empty()) msg += "; " + why;
    throw Fatal(kExitBadData, msg);
  }
  if (set.warmup_skipped) diag::note(fmt::format("{} warmup rows excluded", set.warmup_skipped));
  return set;
}

std::vector<metrics::Slo> goodput_or_fail(const std::string& text) {
  if (text.empty()) return {};
  auto slos = metrics::parse_goodput(text);
  if (!slos) throw Fatal(slos.error().exit_code, slos.error().message);
  return *slos;
}

void setup_report(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    cli::Format format = cli::Format::kAuto;
    std::string goodput;
    std::string export_dir;
    bool per_session = false;
    uint32_t kv_block_size = dyn::kDefaultKvBlockSize;
    std::vector<std::string> references;
    uint64_t reference_kv_blocks = 0;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "report", "Metrics of SPEC 7 (AIPerf definitions) from request_end rows or AIPerf's profile_export.jsonl");
  sub->add_option("files", o->inputs,
                  "request_end rows (plain, gzip, envelopes) or AIPerf profile_export.jsonl; - or none = stdin")
      ->type_name("FILE");
  cli::add_format_option(*sub, o->format,
                         {cli::Format::kAuto, cli::Format::kTable, cli::Format::kJson, cli::Format::kCsv},
                         "Output format (json: the profile_export_aiperf.json shape; csv: its CSV)");
  sub->add_option(
         "--goodput", o->goodput,
         "SLOs as 'metric:value ...' in ms or tokens/sec/user, e.g. 'time_to_first_token:200 inter_token_latency:20'")
      ->type_name("SLOS");
  sub->add_option("--aiperf-export,--artifact-dir", o->export_dir,
                  "Also write profile_export.jsonl, profile_export_aiperf.json (with this run's input_config) and "
                  "profile_export_aiperf.csv into DIR (--artifact-dir: AIPerf's spelling)")
      ->type_name("DIR");
  sub->add_option("--kv-block-size", o->kv_block_size,
                  "Tokens per engine KV block: the theoretical (infinite-cache) hit rate counts full blocks of this "
                  "size, as the engines cache them")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  sub->add_option("--reference", o->references,
                  "Yardstick (repeatable; needs --reference-kv-blocks): the rows with hash ids, each holding its "
                  "prompt's blocks from start to end, through one KV cache of the cluster's whole capacity; adds "
                  "its hit rate and the rows' own as a fraction of it: " +
                      cli::choices_help(tokens::kReferencePolicies, "; ", ": "))
      ->check(CLI::IsMember(cli::choice_names(tokens::kReferencePolicies)));
  sub->add_option("--reference-kv-blocks", o->reference_kv_blocks,
                  "KV blocks of the --reference cache: the cluster's sum (workers x --num-gpu-blocks-override)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  sub->add_flag("--per-session", o->per_session, "Add the per-session breakdown to the table (always in JSON)");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o, sub](cli::Sink& sink) {
    metrics::ReportOptions ro;
    ro.goodput = goodput_or_fail(o->goodput);
    ro.kv_block_size = o->kv_block_size;
    if (o->references.empty() != (o->reference_kv_blocks == 0))
      throw Fatal(kExitUsage, "--reference and --reference-kv-blocks go together (the pooled cache needs a size)");
    for (const auto& name : o->references) ro.references.push_back(*parse_in(tokens::kReferencePolicies, name));
    ro.reference_kv_blocks = o->reference_kv_blocks;
    metrics::RequestSet set = load_or_fail(o->inputs);
    metrics::Report rep = metrics::build_report(set, ro);
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) out->write(metrics::report_table(rep, o->per_session));
    else if (o->format == cli::Format::kCsv) out->write(metrics::report_csv(rep));
    else out->line(metrics::report_json(rep).dump(2));
    sink.close();
    if (!o->export_dir.empty())
      metrics::write_aiperf_export(set, rep, o->export_dir, cli::run_config(*sub->get_parent(), o->inputs));
    return static_cast<int>(kExitOk);
  });
}
