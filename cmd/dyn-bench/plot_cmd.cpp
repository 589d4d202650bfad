// dyn-bench plot: a self-contained HTML report with SVG charts; several inputs are compared as
// separate runs (one series each, with a legend) plus sweep charts across them.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "dyn/base/error.h"
#include "dyn/metrics/plot.h"

using namespace dyn;

namespace {

/// "--sweep NAME=V1,V2,..." -> name and one number per run; usage errors name the flag.
std::pair<std::string, std::vector<double>> parse_sweep(const std::string& text, size_t runs) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Fatal(kExitUsage, "--sweep " + text + ": expected NAME=V1,V2,... (one number per input run)");
  std::vector<double> v;
  std::string rest = text.substr(eq + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t c = rest.find(',', pos);
    if (c == std::string::npos) c = rest.size();
    std::string item = rest.substr(pos, c - pos);
    char* end = nullptr;
    double d = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0') throw Fatal(kExitUsage, "--sweep: '" + item + "' is not a number");
    v.push_back(d);
    pos = c + 1;
  }
  if (v.size() != runs)
    throw Fatal(kExitUsage,
                "--sweep gives " + std::to_string(v.size()) + " values for " + std::to_string(runs) + " input runs");
  return {text.substr(0, eq), v};
}

}  // namespace

void setup_plot(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs, labels, groups;
    std::string sweep;
    metrics::PlotOptions plot;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "plot",
      "One self-contained HTML file with SVG charts (no network needed to view it); several files are compared as runs");
  sub->add_option("files", o->inputs,
                  "request_end rows or AIPerf profile_export.jsonl, one file per run; - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--title", o->plot.title, "Page title")->capture_default_str();
  sub->add_option("--max-sessions", o->plot.max_sessions, "Sessions drawn in the timeline (first by start)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--label", o->labels, "Name of each run in the legend, in input order (default: file name)")
      ->type_name("TEXT");
  sub->add_option("--group", o->groups,
                  "The series of each run in the sweep charts, in input order (e.g. its routing policy): one line per "
                  "group, through its runs in order of --sweep")
      ->type_name("TEXT");
  sub->add_option("--sweep", o->sweep,
                  "The parameter the runs sweep, with one value per run, e.g. 'request rate (req/s)=1,2,4': the sweep "
                  "charts plot hit rate, TTFT and throughput against it")
      ->type_name("NAME=V1,V2,...");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o](cli::Sink& sink) {
    if (!o->labels.empty() && o->labels.size() != std::max<size_t>(1, o->inputs.size()))
      throw Fatal(kExitUsage, "--label given " + std::to_string(o->labels.size()) + " times for " +
                                  std::to_string(o->inputs.size()) + " input runs");
    if (!o->groups.empty() && o->groups.size() != o->inputs.size())
      throw Fatal(kExitUsage, "--group given " + std::to_string(o->groups.size()) + " times for " +
                                  std::to_string(o->inputs.size()) + " input runs");
    io::Output* out = &sink.get();
    if (out->is_terminal())  // HTML is for a file or a browser, never a terminal
      throw Fatal(kExitUsage, "plot writes HTML: give -o FILE.html or redirect standard output");
    if (o->inputs.size() <= 1) {
      if (!o->sweep.empty() || !o->groups.empty())
        throw Fatal(kExitUsage, "--sweep and --group need two or more input runs");
      metrics::RequestSet set = load_or_fail(o->inputs);
      metrics::Report rep = metrics::build_report(set);
      out->write(metrics::render_html(set, rep, o->plot));
    } else {
      std::pair<std::string, std::vector<double>> sweep;
      if (!o->sweep.empty()) sweep = parse_sweep(o->sweep, o->inputs.size());
      std::vector<metrics::RequestSet> sets;
      std::vector<metrics::Report> reps;
      sets.reserve(o->inputs.size());
      reps.reserve(o->inputs.size());
      std::vector<metrics::PlotRun> runs;
      for (size_t i = 0; i < o->inputs.size(); ++i) {
        sets.push_back(load_or_fail({o->inputs[i]}));
        reps.push_back(metrics::build_report(sets.back()));
      }
      for (size_t i = 0; i < o->inputs.size(); ++i) {
        metrics::PlotRun r;
        r.label = o->labels.empty() ? std::filesystem::path(o->inputs[i]).parent_path().filename().string() + "/" +
                                          std::filesystem::path(o->inputs[i]).filename().string()
                                    : o->labels[i];
        if (o->labels.empty() && std::filesystem::path(o->inputs[i]).parent_path().empty())
          r.label = std::filesystem::path(o->inputs[i]).filename().string();
        r.set = &sets[i];
        r.report = &reps[i];
        if (!sweep.second.empty()) r.x = sweep.second[i];
        if (!o->groups.empty()) r.group = o->groups[i];
        runs.push_back(r);
      }
      out->write(metrics::render_runs_html(runs, sweep.first, o->plot));
    }
    sink.close();
    return static_cast<int>(kExitOk);
  });
}
