// dyn-bind show and check: per-session placement and the TTL affinity check (SPEC 2).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dyn/cli/choices.h"
#include "dyn/cli/format.h"
#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/metrics/affinity.h"
#include "dyn/metrics/report.h"
#include "dyn/route/config.h"
#include "dyn/route/router.h"

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

namespace {

/// The TTL and mode to check against: the flags, else the run-config beside the trace files (or
/// --run-config), which must agree. Fatal(kExitUsage) when none says, or when they disagree.
metrics::CheckOptions check_settings(const std::vector<std::string>& inputs, const std::string& run_config,
                                     std::optional<double> ttl, std::optional<route::AffinityMode> mode) {
  std::vector<std::string> configs;
  if (!run_config.empty()) configs.push_back(run_config);
  else
    for (const auto& f : inputs)
      if (auto c = metrics::run_config_beside(f);
          !c.empty() && std::find(configs.begin(), configs.end(), c) == configs.end())
        configs.push_back(c);
  std::optional<metrics::RouterAffinity> from;
  for (const auto& c : configs) {
    auto a = metrics::read_router_affinity(c);
    if (!a) throw Fatal(a.error().exit_code, a.error().message);
    if (from && (from->ttl_secs != a->ttl_secs || from->soft != a->soft))
      throw Fatal(kExitUsage, fmt::format("{} and {} record different affinity settings: pass --ttl-secs and --mode",
                                          from->path, a->path));
    from = *a;
  }
  metrics::CheckOptions o;
  const bool said = ttl && mode;  // the flags said everything; else the run-config is named
  if (!ttl) {
    if (!from)
      throw Fatal(kExitUsage,
                  "no TTL: pass --ttl-secs, or --run-config FILE (a router trace's PREFIX.run-config.json, read "
                  "by itself beside trace files), or set DYN_ROUTER_SESSION_AFFINITY_TTL_SECS");
    if (!from->ttl_secs)
      throw Fatal(kExitUsage, from->path +
                                  ": the router ran without session affinity (no --router-session-affinity-ttl-secs): "
                                  "pass --ttl-secs to check its moves against a TTL anyway");
    ttl = from->ttl_secs;
  }
  if (!(*ttl >= 1 && *ttl <= dyn::route::kMaxAffinityTtlSecs))
    throw Fatal(kExitUsage,
                fmt::format("TTL {} s is out of range 1..{} (SPEC 2.1)", *ttl, dyn::route::kMaxAffinityTtlSecs));
  o.ttl_secs = *ttl;
  o.soft = mode ? *mode == route::AffinityMode::kSoft : from && from->soft;
  if (from && !said)
    diag::note(fmt::format("TTL {} s, {} affinity, from {}", o.ttl_secs, o.soft ? "soft" : "hard", from->path));
  for (const auto& r : route::kRebindReasons)
    (route::forced_move(r.value) ? o.forced_reasons : o.soft_reasons).push_back(r.name);
  return o;
}

/// The moves that are not violations, on stderr: each (the first 20), then how many per reason.
void report_moves(const std::vector<metrics::Violation>& moves) {
  if (moves.empty()) return;
  std::map<std::string, uint64_t> per;
  for (const auto& m : moves) ++per[m.reason];
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < moves.size() && i < kShown; ++i) {
    const auto& m = moves[i];
    diag::note(fmt::format("moved, not a violation: {} from worker {} to {} at {} ({})", m.key, m.previous->worker,
                           m.next->worker, m.next->where, m.reason));
  }
  if (moves.size() > kShown) diag::note(fmt::format("... and {} more such moves", moves.size() - kShown));
  std::string counts;
  for (const auto& [reason, n] : per) {
    std::string gloss = reason == "soft"                   ? "soft affinity rebind"
                        : reason == "previous_turn_failed" ? "after a failed turn on the old worker"
                                                           : "";
    for (const auto& r : route::kRebindReasons)
      if (reason == r.name) gloss = r.gloss;
    counts += fmt::format("{}{} {} ({})", counts.empty() ? "" : ", ", n, reason, gloss);
  }
  diag::note(fmt::format("{} moves the binding could not prevent or was allowed to make: {}", moves.size(), counts));
}

}  // namespace

void setup_check(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    double ttl_secs = 0;
    route::AffinityMode mode = route::AffinityMode::kHard;
    std::string run_config;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "Exit 1 and list violations (JSONL) if a session or subagent group moved between workers within the TTL; "
      "moves the router records as forced (worker unhealthy, removed, drained, dispatch failed) or soft are "
      "reported apart on stderr");
  sub->add_option("files", o->inputs, "request_end rows or route_decision rows; - or none = stdin")->type_name("FILE");
  sub->add_option("--ttl-secs", o->ttl_secs,
                  fmt::format("Affinity TTL in seconds (1..{}), as the router was given it (default: from the "
                              "router's run-config)",
                              dyn::route::kMaxAffinityTtlSecs))
      ->envname("DYN_ROUTER_SESSION_AFFINITY_TTL_SECS")
      ->type_name("S");
  cli::add_choice(*sub, "--mode", o->mode, route::kAffinityModes,
                  "Affinity mode the router ran with (default: from its run-config, else hard): soft allows the "
                  "router's own rebinds");
  sub->add_option("--run-config", o->run_config,
                  "The router's run-config (PREFIX.run-config.json) to take TTL and mode from; default: the one beside "
                  "the trace files")
      ->type_name("FILE");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o, sub](cli::Sink& sink) {
    std::optional<double> ttl;
    if (sub->count("--ttl-secs")) ttl = o->ttl_secs;
    std::optional<route::AffinityMode> mode;
    if (sub->count("--mode")) mode = o->mode;
    const metrics::CheckOptions co = check_settings(o->inputs, o->run_config, ttl, mode);
    metrics::TurnSet set = load_or_fail(o->inputs);
    const auto res = metrics::check_affinity(set.turns, co);
    io::Output* out = &sink.get();
    for (const auto& v : res.violations) out->line(metrics::violation_json(v, co.ttl_secs).dump());
    sink.close();
    report_moves(res.moves);
    diag::note(
        fmt::format("{} affinity keys, {} served turns checked, {} violations{}", res.keys, res.turns_checked,
                    res.violations.size(),
                    res.moves.empty() ? "" : fmt::format(", {} moves that are not violations", res.moves.size())));
    return static_cast<int>(res.violations.empty() ? kExitOk : kExitCheckFailed);
  });
}
