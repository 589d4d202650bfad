// dyn-bind show and check: per-session placement and the TTL affinity check (SPEC 2).
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/metrics/affinity.h"
#include "dyn/metrics/report.h"
#include "dyn/route/config.h"

using namespace dyn;

namespace {

std::string ms_cell(const std::optional<double>& v) { return v ? fmt::format("{:.0f}", *v) : "-"; }

metrics::TurnSet load_or_fail(const std::vector<std::string>& inputs) {
  metrics::TurnSet set = metrics::load_turns(inputs);
  if (set.turns.empty())
    throw Fatal(kExitBadData,
                fmt::format("no request_end or route_decision rows found ({} other rows)", set.skipped_rows));
  return set;
}

}  // namespace

void setup_show(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    cli::Format format = cli::Format::kAuto;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "show", "Per session and subagent group: turns, workers used, first/last time, rebinds, cached ratio");
  sub->add_option("files", o->inputs,
                  "request_end rows (router traces, client rows) or route_decision rows; - or none = stdin")
      ->type_name("FILE");
  cli::add_format_option(*sub, o->format, {cli::Format::kAuto, cli::Format::kTable, cli::Format::kJson},
                         "Output format (json: one session per line)");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o](cli::Sink& sink) {
    metrics::TurnSet set = load_or_fail(o->inputs);
    const auto summaries = metrics::summarize_bindings(set.turns);
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) {
      std::vector<std::vector<std::string>> rows{
          {"key", "turns", "errors", "workers", "rebinds", "first_unix_ms", "last_unix_ms", "cached_ratio"}};
      for (const auto& s : summaries) {
        std::string ws;
        for (const auto& w : s.workers) ws += (ws.empty() ? "" : ",") + w;
        rows.push_back({s.key, std::to_string(s.turns), std::to_string(s.errors), ws.empty() ? "-" : ws,
                        std::to_string(s.rebinds), ms_cell(s.first_ms), ms_cell(s.last_ms),
                        s.cached_ratio ? fmt::format("{:.3f}", *s.cached_ratio) : "-"});
      }
      out->write(metrics::text_table(rows));
    } else {
      for (const auto& s : summaries) out->line(metrics::binding_summary_json(s).dump());
    }
    sink.close();
    if (set.no_session) diag::note(fmt::format("{} rows without a session id not shown", set.no_session));
    return static_cast<int>(kExitOk);
  });
}

void setup_check(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    double ttl_secs = 0;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "Exit 1 and list violations (JSONL) if a session or subagent group moved between workers within the TTL");
  sub->add_option("files", o->inputs, "request_end rows or route_decision rows; - or none = stdin")->type_name("FILE");
  sub->add_option(
         "--ttl-secs", o->ttl_secs,
         fmt::format("Affinity TTL in seconds (1..{}), as the router was given it", dyn::route::kMaxAffinityTtlSecs))
      ->envname("DYN_ROUTER_SESSION_AFFINITY_TTL_SECS")
      ->type_name("S");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o, sub](cli::Sink& sink) {
    const double ttl = o->ttl_secs;
    if (sub->count("--ttl-secs") == 0)
      throw Fatal(kExitUsage, "no TTL: pass --ttl-secs or set DYN_ROUTER_SESSION_AFFINITY_TTL_SECS");
    if (!(ttl >= 1 && ttl <= dyn::route::kMaxAffinityTtlSecs))
      throw Fatal(kExitUsage,
                  fmt::format("TTL {} s is out of range 1..{} (SPEC 2.1)", ttl, dyn::route::kMaxAffinityTtlSecs));
    metrics::TurnSet set = load_or_fail(o->inputs);
    const auto res = metrics::check_affinity(set.turns, ttl);
    io::Output* out = &sink.get();
    for (const auto& v : res.violations) out->line(metrics::violation_json(v, ttl).dump());
    sink.close();
    diag::note(fmt::format("{} affinity keys, {} served turns checked, {} violations{}", res.keys, res.turns_checked,
                           res.violations.size(),
                           res.excused ? fmt::format(", {} rebinds after a failed turn", res.excused) : ""));
    return static_cast<int>(res.violations.empty() ? kExitOk : kExitCheckFailed);
  });
}
