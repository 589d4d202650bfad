// dyn-bench compare: two set-ups side by side, each as the mean and spread of its runs.
#include "dyn/metrics/compare.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "dyn/metrics/affinity.h"

namespace dyn::metrics {
namespace {

bool larger_is_better_scalar(const std::string& tag) {
  return tag == "request_count" || tag == "request_throughput" || tag == "output_token_throughput" ||
         tag == "goodput" || tag == "good_request_count" || tag == "prompt_cache_hit_rate" ||
         tag == "theoretical_cache_hit_rate" || tag == "total_cached_tokens";
}

bool neutral_scalar(const std::string& tag) {
  return tag == "total_isl" || tag == "total_osl" || tag == "total_output_tokens" || tag == "total_reasoning_tokens" ||
         tag == "benchmark_duration";
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

/// Sample standard deviation (ddof 1): the spread of repeated runs; none for a single run.
std::optional<double> spread(const std::vector<double>& v) {
  if (v.size() < 2) return std::nullopt;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

CompareRow make_row(const std::string& tag, const std::string& header, const std::string& unit, const std::string& stat,
                    std::vector<double> av, std::vector<double> bv, int direction) {
  CompareRow r;
  r.tag = tag, r.header = header, r.unit = unit, r.stat = stat;
  r.a = mean(av), r.b = mean(bv), r.diff = r.b - r.a;
  r.a_sd = spread(av), r.b_sd = spread(bv);
  r.a_runs = std::move(av), r.b_runs = std::move(bv);
  if (r.a != 0) r.ratio = r.b / r.a;
  r.better = r.a == r.b ? "same" : direction == 0 ? "-" : ((r.b > r.a) == (direction > 0)) ? "b" : "a";
  if (r.a != r.b && direction != 0 && r.a_sd && r.b_sd) r.exceeds_spread = std::fabs(r.diff) > *r.a_sd + *r.b_sd;
  return r;
}

/// A run-level figure of one report: a series' statistic or a scalar's value.
std::optional<double> figure(const Report& r, const std::string& tag, const std::string& stat) {
  if (const Series* s = r.find_series(tag))
    return stat == "avg" ? s->stats.avg : s->stats.pct(std::stoi(stat.substr(1)));
  if (const Scalar* s = r.find_scalar(tag)) return s->value;
  return std::nullopt;
}

/// The figure over every run of a side; nullopt when a run lacks it.
std::optional<std::vector<double>> figures(const std::vector<Report>& runs, const std::string& tag,
                                           const std::string& stat) {
  std::vector<double> v;
  for (const Report& r : runs) {
    auto f = figure(r, tag, stat);
    if (!f) return std::nullopt;
    v.push_back(*f);
  }
  return v;
}

/// Per worker (in first-run order): mean request share and mean hit rate over the runs that have
/// the worker.
struct WorkerMean {
  std::string worker;
  double share_pct = 0;
  std::optional<double> hit_pct;
};
std::vector<WorkerMean> worker_means(const std::vector<Report>& runs) {
  std::vector<WorkerMean> out;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> acc;
  for (const Report& r : runs)
    for (const auto& w : r.workers) {
      if (!acc.count(w.worker)) out.push_back({w.worker, 0, std::nullopt});
      acc[w.worker].first.push_back(w.share_pct);
      if (w.hit_pct) acc[w.worker].second.push_back(*w.hit_pct);
    }
  for (auto& w : out) {
    w.share_pct = mean(acc[w.worker].first);
    if (!acc[w.worker].second.empty()) w.hit_pct = mean(acc[w.worker].second);
  }
  return out;
}

Json worker_json(const std::vector<Report>& runs) {
  Json out = Json::array();
  for (const auto& w : worker_means(runs))
    out.push_back(
        Json{{"worker", w.worker}, {"share_pct", w.share_pct}, {"hit_pct", w.hit_pct ? Json(*w.hit_pct) : Json()}});
  return out;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

/// "12.34" for one run, "12.34 ± 0.56" for several.
std::string cell(double mean_value, const std::optional<double>& sd) {
  return sd ? format_number(mean_value) + " ± " + format_number(*sd) : format_number(mean_value);
}

/// The table's verdict: the better side only beyond the spread (see the legend).
std::string verdict(const CompareRow& r) {
  if (r.better == "same") return "=";
  if (r.better == "-") return "-";
  if (!r.exceeds_spread) return "(" + r.better + ")";
  return *r.exceeds_spread ? r.better : "~";
}

std::string side_line(const char* name, const CompareSide& s) {
  std::string files;
  for (const auto& f : s.files) files += (files.empty() ? "" : ", ") + f;
  std::string line = fmt::format("{}: {}", name, s.label);
  if (s.runs.size() > 1) line += fmt::format(" ({} runs: {})", s.runs.size(), files);
  else if (!files.empty() && files != s.label) line += " (" + files + ")";
  if (!s.view.empty()) line += "; " + s.view;
  return line + "\n";
}

}  // namespace

std::vector<CompareRow> compare_runs(const std::vector<Report>& a, const std::vector<Report>& b) {
  std::vector<CompareRow> rows;
  if (a.empty() || b.empty()) return rows;
  auto add = [&](const std::string& tag, const std::string& header, const std::string& unit, const std::string& stat,
                 int dir) {
    auto av = figures(a, tag, stat), bv = figures(b, tag, stat);
    if (av && bv) rows.push_back(make_row(tag, header, unit, stat, std::move(*av), std::move(*bv), dir));
  };
  for (const auto& sa : a.front().series) {
    if (!b.front().find_series(sa.tag)) continue;
    const int dir = sa.larger_is_better ? 1 : (sa.unit == "tokens" ? 0 : -1);
    for (const char* stat : {"avg", "p50", "p90", "p99"}) add(sa.tag, sa.header, sa.unit, stat, dir);
  }
  for (const auto& sa : a.front().scalars) {
    if (sa.tag == "min_request_timestamp" || sa.tag == "max_response_timestamp") continue;
    if (!b.front().find_scalar(sa.tag)) continue;
    const int dir = neutral_scalar(sa.tag) ? 0 : larger_is_better_scalar(sa.tag) ? 1 : -1;
    add(sa.tag, sa.header, sa.unit, "value", dir);
  }
  return rows;
}

std::vector<CompareRow> compare_reports(const Report& a, const Report& b) { return compare_runs({a}, {b}); }

Json compare_json(const CompareSide& a, const CompareSide& b) {
  Json metrics = Json::array();
  for (const auto& r : compare_runs(a.runs, b.runs))
    metrics.push_back(Json{{"tag", r.tag},
                           {"header", r.header},
                           {"unit", r.unit},
                           {"stat", r.stat},
                           {"a", r.a},
                           {"b", r.b},
                           {"a_sd", opt(r.a_sd)},
                           {"b_sd", opt(r.b_sd)},
                           {"a_runs", r.a_runs},
                           {"b_runs", r.b_runs},
                           {"diff", r.diff},
                           {"ratio", opt(r.ratio)},
                           {"better", r.better},
                           {"exceeds_spread", r.exceeds_spread ? Json(*r.exceeds_spread) : Json()}});
  return Json{{"a", a.label},
              {"b", b.label},
              {"a_runs", a.runs.size()},
              {"b_runs", b.runs.size()},
              {"a_view", a.view},
              {"b_view", b.view},
              {"metrics", metrics},
              {"per_worker", {{"a", worker_json(a.runs)}, {"b", worker_json(b.runs)}}}};
}

std::string compare_table(const CompareSide& a, const CompareSide& b) {
  const bool several = a.runs.size() > 1 || b.runs.size() > 1;
  std::vector<std::vector<std::string>> rows{
      {"Metric", "stat", several ? "A mean ± sd" : "A", several ? "B mean ± sd" : "B", "B-A", "B/A", "better"}};
  for (const auto& r : compare_runs(a.runs, b.runs)) {
    std::string label = r.header;
    if (!r.unit.empty() && r.unit != "requests") label += " (" + r.unit + ")";
    rows.push_back({label, r.stat, cell(r.a, r.a_sd), cell(r.b, r.b_sd), format_number(r.diff),
                    r.ratio ? fmt::format("{:.3f}", *r.ratio) : "-", verdict(r)});
  }
  std::string out = side_line("A", a) + side_line("B", b) + "\n" + text_table(rows, 2);
  auto shares = [](const std::vector<Report>& runs) {
    std::string s;
    for (const auto& w : worker_means(runs))
      s += fmt::format("{}worker {}: {:.1f}% of requests{}", s.empty() ? "" : ", ", w.worker, w.share_pct,
                       w.hit_pct ? fmt::format(", hit {:.1f}%", *w.hit_pct) : "");
    return s.empty() ? std::string("-") : s;
  };
  out += fmt::format("\nWorkers A: {}\nWorkers B: {}{}\n", shares(a.runs), shares(b.runs),
                     several ? " (mean over runs)" : "");
  out +=
      "\nbetter: a or b = that side's mean is better by more than the spread (|B-A| > sd A + sd B, sd = the\n"
      "  standard deviation over a side's runs); ~ = within the spread; (a) or (b) = better, but a side has one\n"
      "  run, so no spread is known and the difference is only indicative (repeat: dyn-bench compare A1 A2 A3\n"
      "  --vs B1 B2 B3); = equal; - no better direction (sizes and counts of the workload).\n";
  return out;
}

}  // namespace dyn::metrics
