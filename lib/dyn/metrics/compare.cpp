// dyn-bench compare: two reports side by side.
#include "dyn/metrics/compare.h"

#include <fmt/format.h>

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

CompareRow make_row(const std::string& tag, const std::string& header, const std::string& unit, const std::string& stat,
                    double a, double b, int direction) {
  CompareRow r{tag, header, unit, stat, a, b, b - a, std::nullopt, "same"};
  if (a != 0) r.ratio = b / a;
  if (a != b && direction != 0) r.better = ((b > a) == (direction > 0)) ? "b" : "a";
  if (a != b && direction == 0) r.better = "-";
  return r;
}

Json worker_json(const Report& r) {
  Json out = Json::array();
  for (const auto& w : r.workers)
    out.push_back(Json{{"worker", w.worker},
                       {"requests", w.requests},
                       {"share_pct", w.share_pct},
                       {"hit_pct", w.hit_pct ? Json(*w.hit_pct) : Json()}});
  return out;
}

}  // namespace

std::vector<CompareRow> compare_reports(const Report& a, const Report& b) {
  std::vector<CompareRow> rows;
  auto series_rows = [&](const Series& sa, const Series& sb) {
    const int dir = sa.larger_is_better ? 1 : (sa.unit == "tokens" ? 0 : -1);
    rows.push_back(make_row(sa.tag, sa.header, sa.unit, "avg", sa.stats.avg, sb.stats.avg, dir));
    for (int p : {50, 90, 99})
      rows.push_back(
          make_row(sa.tag, sa.header, sa.unit, fmt::format("p{}", p), sa.stats.pct(p), sb.stats.pct(p), dir));
  };
  for (const auto& sa : a.series)
    if (const Series* sb = b.find_series(sa.tag)) series_rows(sa, *sb);
  for (const auto& sa : a.scalars) {
    if (sa.tag == "min_request_timestamp" || sa.tag == "max_response_timestamp") continue;
    const Scalar* sb = b.find_scalar(sa.tag);
    if (!sb) continue;
    const int dir = neutral_scalar(sa.tag) ? 0 : larger_is_better_scalar(sa.tag) ? 1 : -1;
    rows.push_back(make_row(sa.tag, sa.header, sa.unit, "value", sa.value, sb->value, dir));
  }
  return rows;
}

Json compare_json(const Report& a, const Report& b, const std::string& label_a, const std::string& label_b) {
  Json metrics = Json::array();
  for (const auto& r : compare_reports(a, b))
    metrics.push_back(Json{{"tag", r.tag},
                           {"header", r.header},
                           {"unit", r.unit},
                           {"stat", r.stat},
                           {"a", r.a},
                           {"b", r.b},
                           {"diff", r.diff},
                           {"ratio", r.ratio ? Json(*r.ratio) : Json()},
                           {"better", r.better}});
  return Json{{"a", label_a},
              {"b", label_b},
              {"metrics", metrics},
              {"per_worker", {{"a", worker_json(a)}, {"b", worker_json(b)}}}};
}

std::string compare_table(const Report& a, const Report& b, const std::string& label_a, const std::string& label_b) {
  std::vector<std::vector<std::string>> rows{{"Metric", "stat", "A", "B", "B-A", "B/A", "better"}};
  for (const auto& r : compare_reports(a, b)) {
    std::string label = r.header;
    if (!r.unit.empty() && r.unit != "requests") label += " (" + r.unit + ")";
    rows.push_back({label, r.stat, format_number(r.a), format_number(r.b), format_number(r.diff),
                    r.ratio ? fmt::format("{:.3f}", *r.ratio) : "-", r.better == "same" ? "=" : r.better});
  }
  std::vector<std::size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out = fmt::format("A: {}\nB: {}\n\n", label_a, label_b);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (std::size_t i = 0; i < rows[k].size(); ++i) {
      if (i) line += "  ";
      line += i < 2 ? fmt::format("{:<{}}", rows[k][i], w[i]) : fmt::format("{:>{}}", rows[k][i], w[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (k == 0) out += std::string(line.size(), '-') + "\n";
  }
  auto shares = [](const Report& r) {
    std::string s;
    for (const auto& w : r.workers)
      s += fmt::format("{}worker {}: {:.1f}% of requests{}", s.empty() ? "" : ", ", w.worker, w.share_pct,
                       w.hit_pct ? fmt::format(", hit {:.1f}%", *w.hit_pct) : "");
    return s.empty() ? std::string("-") : s;
  };
  out += fmt::format("\nWorkers A: {}\nWorkers B: {}\n", shares(a), shares(b));
  return out;
}

}  // namespace dyn::metrics
