// dyn-bench audit: per run, worker and session, reusable, predicted and delivered prefill, and each
// miss attributed to workload, routing choice or stale index (issue 55).
#include <memory>

#include "commands.h"
#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/cli/format.h"
#include "dyn/metrics/audit.h"

using namespace dyn;

void setup_audit(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> traces;
    cli::Format format = cli::Format::kAuto;
    uint32_t kv_block_size = dyn::kDefaultKvBlockSize;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "audit",
      "Where each run's prefill went: reusable (infinite cache), predicted by the router, delivered by the "
      "engines, and the misses attributed to workload (cold), routing choice and stale index, per run, worker and "
      "session (traces of dyn-route serve, decide --explain and dyn-replay --sim)");
  sub->add_option("traces", o->traces, "Traces, one run each (request_end and route_decision rows)")
      ->required()
      ->type_name("TRACE");
  cli::add_format_option(*sub, o->format, {cli::Format::kAuto, cli::Format::kTable, cli::Format::kJson},
                         "Output format");
  sub->add_option("--kv-block-size", o->kv_block_size,
                  "Tokens per engine KV block: the reusable (infinite-cache) figure counts full blocks of this size")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, nullptr, &o->out, [o](cli::Sink& sink) {
    std::vector<metrics::AuditRun> runs;
    for (const std::string& t : o->traces) runs.push_back(metrics::audit_trace(t, o->kv_block_size));
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) out->write(metrics::audit_table(runs, o->kv_block_size));
    else out->line(metrics::audit_json(runs, o->kv_block_size).dump(2));
    sink.close();
    return static_cast<int>(kExitOk);
  });
}
