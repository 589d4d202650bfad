// dyn-bench plot: a self-contained HTML report with SVG charts.
#include <memory>

#include "commands.h"
#include "dyn/base/error.h"
#include "dyn/metrics/plot.h"

using namespace dyn;

void setup_plot(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    metrics::PlotOptions plot;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("plot", "One self-contained HTML file with SVG charts (no network needed to view it)");
  sub->add_option("files", o->inputs, "request_end rows or AIPerf profile_export.jsonl; - or none = stdin")->type_name("FILE");
  sub->add_option("--title", o->plot.title, "Page title")->capture_default_str();
  sub->add_option("--max-sessions", o->plot.max_sessions, "Sessions drawn in the timeline (first by start)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cli::add_output_options(*sub, o->out);
  dispatch.add(sub, [o, sub] {
    if (cli::stdin_is_interactive(o->inputs)) {
      std::fputs(sub->help().c_str(), stderr);
      return static_cast<int>(kExitUsage);
    }
    metrics::RequestSet set = load_or_fail(o->inputs);
    metrics::Report rep = metrics::build_report(set);
    io::Output* out = nullptr;
    auto file = cli::open_output(o->out, &out);
    out->write(metrics::render_html(set, rep, o->plot));
    out->close();
    return static_cast<int>(kExitOk);
  });
}
