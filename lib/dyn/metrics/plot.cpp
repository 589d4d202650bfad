// Inline-SVG charts for dyn-bench plot.
#include "dyn/metrics/plot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace dyn::metrics {
namespace {

// Series colours: Tableau's ten, then ten more of Trubetskoy's 20 distinct colours that differ from
// them (without his pastels, too faint on white), so a 15-run page repeats none. Beyond 20 a series
// also gets a dash pattern (series_dash), so colour and dash together stay distinct.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                    "#7f7f7f", "#bcbd22", "#17becf", "#000075", "#800000", "#469990", "#f032e6",
                                    "#000000", "#808000", "#3cb44b", "#ffe119", "#911eb4", "#4363d8"};
const char* series_color(std::size_t i) { return kPalette[i % std::size(kPalette)]; }
/// The stroke-dasharray attribute of series i ("" for the first 20: colour alone tells them apart).
std::string series_dash(std::size_t i) {
  static constexpr const char* kDashes[] = {"6 3", "2 2", "8 3 2 3"};
  if (i < std::size(kPalette)) return "";
  return fmt::format(R"( stroke-dasharray="{}")", kDashes[(i / std::size(kPalette) - 1) % std::size(kDashes)]);
}
constexpr double kW = 720, kH = 300, kL = 64, kR = 16, kT = 28, kB = 44;  // chart box and margins

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

double nice_step(double range, int target) {
  if (range <= 0) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string num(double v) {
  if (std::fabs(v) >= 1000) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

struct Axes {
  double x0, x1, y0, y1;
  double w = kW, h = kH;  ///< the chart's size in px (a small multiple is smaller)
  double px(double x) const { return kL + (x1 > x0 ? (x - x0) / (x1 - x0) : 0) * (w - kL - kR); }
  double py(double y) const { return h - kB - (y1 > y0 ? (y - y0) / (y1 - y0) : 0) * (h - kT - kB); }
};

// Frame, grid, ticks and labels of a chart.
std::string frame(const std::string& title, const Axes& a, const std::string& xlabel, const std::string& ylabel,
                  bool xticks = true) {
  std::string s = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}">)",
                              a.w, a.h, a.w, a.h);
  s += fmt::format(R"(<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>)", a.w, a.h);
  s += fmt::format(R"(<text x="{}" y="18" font-size="14" font-weight="bold">{}</text>)", kL, esc(title));
  const double ys = nice_step(a.y1 - a.y0, 5);
  for (double y = std::ceil(a.y0 / ys) * ys; y <= a.y1 + 1e-9; y += ys) {
    s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e0e0e0"/>)", kL, a.py(y),
                     a.w - kR, a.py(y));
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="end">{}</text>)", kL - 4, a.py(y) + 3,
                     ys >= 1 ? fmt::format("{:.0f}", y) : num(y));
  }
  if (xticks) {
    const double xs = nice_step(a.x1 - a.x0, 8);
    for (double x = std::ceil(a.x0 / xs) * xs; x <= a.x1 + 1e-9; x += xs)
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)", a.px(x),
                       a.h - kB + 14, num(x));
  }
  s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333"/>)", kL, a.h - kB, a.w - kR, a.h - kB);
  s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333"/>)", kL, kT, kL, a.h - kB);
  s += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="11" text-anchor="middle">{}</text>)", (kL + a.w - kR) / 2,
                   a.h - 8, esc(xlabel));
  s += fmt::format(
      R"~(<text x="12" y="{:.1f}" font-size="11" text-anchor="middle" transform="rotate(-90 12 {:.1f})">{}</text>)~",
      (kT + a.h - kB) / 2, (kT + a.h - kB) / 2, esc(ylabel));
  return s;
}

std::string histogram(const std::string& title, const std::vector<double>& v, const std::string& xlabel,
                      const char* color) {
  if (v.empty()) return fmt::format("<p>{}: no data</p>", esc(title));
  const auto [mn_it, mx_it] = std::minmax_element(v.begin(), v.end());
  double mn = *mn_it, mx = *mx_it;
  if (mx == mn) {
    mn -= 0.5;
    mx += 0.5;
  }
  constexpr int kBins = 30;
  std::vector<int> counts(kBins, 0);
  for (double x : v) counts[std::min(kBins - 1, static_cast<int>((x - mn) / (mx - mn) * kBins))]++;
  const int top = *std::max_element(counts.begin(), counts.end());
  Axes a{mn, mx, 0, static_cast<double>(top)};
  std::string s = frame(title, a, xlabel, "requests");
  const double bw = (mx - mn) / kBins;
  for (int i = 0; i < kBins; ++i) {
    if (!counts[i]) continue;
    const double x0 = a.px(mn + i * bw), x1 = a.px(mn + (i + 1) * bw), y = a.py(counts[i]);
    s += fmt::format(
        R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} .. {}: {}</title></rect>)",
        x0, y, std::max(1.0, x1 - x0 - 1), kH - kB - y, color, num(mn + i * bw), num(mn + (i + 1) * bw), counts[i]);
  }
  return s + "</svg>";
}

std::string legend(const std::vector<std::string>& workers, const std::map<std::string, std::string>& colors) {
  std::string s = "<p class=\"legend\">";
  for (const auto& w : workers)
    s += fmt::format(
        R"(<span><svg width="12" height="12"><rect width="12" height="12" fill="{}"/></svg> worker {}</span> )",
        colors.at(w), esc(w));
  return s + "</p>";
}

// The "Sessions" section: one row per session (the first opt.max_sessions), one bar per turn
// coloured by the worker that served it; t0 is the first request's start.
std::string sessions_timeline(const RequestSet& set, const Report& rep, const PlotOptions& opt,
                              std::optional<int64_t> t0, const std::vector<std::string>& workers,
                              const std::map<std::string, std::string>& colors) {
  auto color_of = [&](const std::string& w) { return colors.count(w) ? colors.at(w) : colors.at(""); };
  std::string h;
  h += "<h2>Sessions</h2>\n";
  std::vector<const SessionRow*> sessions;
  for (const auto& s : rep.sessions)
    if (sessions.size() < opt.max_sessions) sessions.push_back(&s);
  if (sessions.empty() || !t0) {
    h += "<p>no session ids in the rows</p>\n";
  } else {
    double tmax = 0;
    std::map<std::string, std::vector<const RequestRecord*>> turns;
    for (const auto& r : set.requests)
      if (!r.session_id.empty() && r.start_ns) {
        turns[r.session_id].push_back(&r);
        tmax = std::max(tmax, static_cast<double>(r.end_ns.value_or(*r.start_ns) - *t0) / 1e9);
      }
    const double row_h = 16, top = 30, left = 150;
    const double height = top + row_h * static_cast<double>(sessions.size()) + 30;
    std::string s =
        fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{:.0f}" viewBox="0 0 {} {:.0f}">)",
                    kW, height, kW, height);
    s += fmt::format(R"(<rect x="0" y="0" width="{}" height="{:.0f}" fill="#ffffff"/>)", kW, height);
    s += fmt::format(R"(<text x="{}" y="18" font-size="14" font-weight="bold">Which worker served each turn</text>)",
                     left);
    auto px = [&](double t) { return left + (tmax > 0 ? t / tmax : 0) * (kW - left - kR); };
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      const double y = top + row_h * static_cast<double>(i);
      std::string label = sessions[i]->session_id;
      if (label.size() > 22) label = label.substr(0, 21) + "~";
      s += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="10" text-anchor="end">{}</text>)", left - 6, y + 11,
                       esc(label));
      s += fmt::format(R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#eeeeee"/>)", left, y + 8, kW - kR,
                       y + 8);
      int turn = 0;
      for (const RequestRecord* r : turns[sessions[i]->session_id]) {
        const double a = static_cast<double>(*r->start_ns - *t0) / 1e9;
        const double b = static_cast<double>(r->end_ns.value_or(*r->start_ns) - *t0) / 1e9;
        s += fmt::format(
            R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"{}><title>{} turn {} worker {}{}</title></rect>)",
            px(a), y + 2, std::max(2.0, px(b) - px(a)), row_h - 4, color_of(r->worker),
            r->valid() ? "" : R"( stroke="#000" stroke-dasharray="2")", esc(sessions[i]->session_id),
            r->turn.value_or(turn), r->worker.empty() ? "?" : esc(r->worker), r->valid() ? "" : " (error)");
        ++turn;
      }
    }
    const double axis_y = top + row_h * static_cast<double>(sessions.size()) + 4;
    s += fmt::format(R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#333"/>)", left, axis_y, kW - kR, axis_y);
    const double xs = nice_step(tmax, 8);
    for (double t = 0; t <= tmax + 1e-9 && tmax > 0; t += xs)
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)", px(t),
                       axis_y + 14, num(t));
    s += fmt::format(
        R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="middle">seconds since first request</text>)",
        (left + kW - kR) / 2, axis_y + 26);
    h += s + "</svg>\n";
    if (!workers.empty()) h += legend(workers, colors);
    if (rep.sessions.size() > sessions.size())
      h += fmt::format("<p>showing the first {} of {} sessions</p>\n", sessions.size(), rep.sessions.size());
  }
  return h;
}

}  // namespace

std::string render_html(const RequestSet& set, const Report& rep, const PlotOptions& opt) {
  const double to_ms = set.time_to_ms();
  std::vector<const RequestRecord*> valid;
  for (const auto& r : set.requests)
    if (r.valid()) valid.push_back(&r);
  // Worker colours, in the report's worker order ("?" for rows without a worker).
  std::vector<std::string> workers;
  for (const auto& w : rep.workers) workers.push_back(w.worker);
  std::map<std::string, std::string> colors;
  for (std::size_t i = 0; i < workers.size(); ++i) colors[workers[i]] = series_color(i);
  colors[""] = "#555555";
  auto color_of = [&](const std::string& w) { return colors.count(w) ? colors[w] : colors[""]; };

  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(opt.title) +
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}"
      "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}h2{margin-top:28px}svg{background:#fff}"
      ".legend span{margin-right:12px;font-size:12px}</style></head><body>\n";
  h += "<h1>" + esc(opt.title) + "</h1>\n";

  // Summary table.
  h +=
      "<h2>Summary</h2><table><tr><th>Metric</th><th>avg</th><th>min</th><th>max</th><th>p99</th><th>p90</th><th>p50</th><th>std</th></tr>\n";
  for (const auto& s : rep.series)
    h += fmt::format(
        "<tr><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(s.header), esc(s.unit), format_number(s.stats.avg), format_number(s.stats.min), format_number(s.stats.max),
        format_number(s.stats.pct(99)), format_number(s.stats.pct(90)), format_number(s.stats.pct(50)),
        format_number(s.stats.std));
  for (const auto& s : rep.scalars) {
    if (s.unit == "ns") continue;
    h += fmt::format("<tr><td>{} ({})</td><td>{}</td><td colspan=\"6\"></td></tr>\n", esc(s.header), esc(s.unit),
                     format_number(s.value));
  }
  h += "</table>\n";

  // Distributions.
  std::vector<double> ttft, lat;
  for (const RequestRecord* r : valid) {
    if (r->ttft) ttft.push_back(*r->ttft * to_ms);
    if (r->latency) lat.push_back(*r->latency * to_ms);
  }
  h += "<h2>Distributions</h2>\n" + histogram("Time to first token", ttft, "TTFT (ms)", kPalette[0]) + "\n" +
       histogram("Request latency", lat, "latency (ms)", kPalette[1]) + "\n";

  // Latency over time.
  std::optional<int64_t> t0;
  for (const RequestRecord* r : valid)
    if (r->start_ns && (!t0 || *r->start_ns < *t0)) t0 = r->start_ns;
  {
    std::vector<std::pair<double, const RequestRecord*>> pts;
    for (const RequestRecord* r : valid)
      if (r->start_ns && r->latency) pts.emplace_back(static_cast<double>(*r->start_ns - *t0) / 1e9, r);
    h += "<h2>Latency over time</h2>\n";
    if (pts.empty()) {
      h += "<p>no requests with start times and latencies</p>\n";
    } else {
      double xmax = 0, ymax = 0;
      for (auto& [x, r] : pts) {
        xmax = std::max(xmax, x);
        ymax = std::max(ymax, *r->latency * to_ms);
      }
      Axes a{0, xmax > 0 ? xmax : 1, 0, ymax > 0 ? ymax * 1.05 : 1};
      std::string s =
          frame("Request latency by start time", a, "request start (s since first request)", "latency (ms)");
      for (auto& [x, r] : pts)
        s += fmt::format(
            R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}" fill-opacity="0.75"><title>{} worker {}: {} ms</title></circle>)",
            a.px(x), a.py(*r->latency * to_ms), color_of(r->worker), esc(r->request_id), esc(r->worker),
            num(*r->latency * to_ms));
      h += s + "</svg>\n";
      if (!workers.empty()) h += legend(workers, colors);
    }
  }

  // Per-worker share and hit rate.
  h += "<h2>Workers</h2>\n";
  if (rep.workers.empty()) {
    h += "<p>no worker ids in the rows</p>\n";
  } else {
    Axes a{0, static_cast<double>(rep.workers.size()), 0, 100};
    std::string s = frame("Request share and prompt-cache hit rate per worker", a, "worker", "percent", false);
    const double slot = (kW - kL - kR) / static_cast<double>(rep.workers.size());
    const double bw = std::min(40.0, slot / 3);
    for (std::size_t i = 0; i < rep.workers.size(); ++i) {
      const auto& w = rep.workers[i];
      const double cx = kL + slot * (i + 0.5);
      s += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>worker {} share {:.1f}%</title></rect>)",
          cx - bw - 1, a.py(w.share_pct), bw, kH - kB - a.py(w.share_pct), color_of(w.worker), esc(w.worker),
          w.share_pct);
      if (w.hit_pct)
        s += fmt::format(
            R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" fill-opacity="0.45" stroke="{}"><title>worker {} hit {:.1f}%</title></rect>)",
            cx + 1, a.py(*w.hit_pct), bw, kH - kB - a.py(*w.hit_pct), color_of(w.worker), color_of(w.worker),
            esc(w.worker), *w.hit_pct);
      s += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="11" text-anchor="middle">{}</text>)", cx, kH - kB + 14,
                       esc(w.worker));
    }
    h += s + "</svg>\n<p class=\"legend\">solid: share of requests; light: prompt-cache hit rate</p>\n";
  }

  h += sessions_timeline(set, rep, opt, t0, workers, colors);
  h += "</body></html>\n";
  return h;
}

namespace {

const char* head_style =
    "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}h2{margin-top:28px}svg{background:#fff}"
    ".legend span{margin-right:12px;font-size:12px}</style></head><body>\n";

/// A run-level figure: a series' statistic (avg or a percentile) or a scalar's value.
std::optional<double> figure(const Report& r, const std::string& tag, int pct = -1) {
  if (const Series* s = r.find_series(tag)) {
    if (!s->stats.count) return std::nullopt;
    return pct < 0 ? s->stats.avg : s->stats.pct(pct);
  }
  if (const Scalar* s = r.find_scalar(tag)) return s->value;
  return std::nullopt;
}

std::string run_legend(const std::vector<PlotRun>& runs) {
  std::string s = "<p class=\"legend\">";
  for (std::size_t i = 0; i < runs.size(); ++i)
    s += fmt::format(R"(<span><svg width="12" height="12"><rect width="12" height="12" fill="{}"/></svg> {}</span> )",
                     series_color(i), esc(runs[i].label));
  return s + "</p>";
}

/// The sorted points of one run's empirical CDF as an SVG polyline's points.
std::string cdf_points(std::vector<double> v, const Axes& a) {
  std::sort(v.begin(), v.end());
  std::string pts;
  for (std::size_t k = 0; k < v.size(); ++k)
    pts += fmt::format("{:.1f},{:.1f} ", a.px(v[k]),
                       a.py(100.0 * static_cast<double>(k + 1) / static_cast<double>(v.size())));
  return pts;
}

/// Empirical CDF of one per-request metric, one line per run. Up to kCdfOverlay runs share one
/// chart; more become small multiples (one small chart per run, its line in its colour over the
/// other runs in grey, the same axes in every one): fifteen overlaid lines cannot be told apart.
constexpr std::size_t kCdfOverlay = 6;
std::string cdf_chart(const std::string& title, const std::vector<std::vector<double>>& per_run,
                      const std::string& xlabel, const std::vector<PlotRun>& runs) {
  double mx = 0;
  bool any = false;
  for (const auto& v : per_run)
    for (double x : v) mx = std::max(mx, x), any = true;
  if (!any) return fmt::format("<p>{}: no data</p>", esc(title));
  if (per_run.size() <= kCdfOverlay) {
    Axes a{0, mx > 0 ? mx : 1, 0, 100};
    std::string s = frame(title, a, xlabel, "percent of requests at or below");
    for (std::size_t i = 0; i < per_run.size(); ++i)
      if (!per_run[i].empty())
        s += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>)", series_color(i),
                         series_dash(i), cdf_points(per_run[i], a));
    return s + "</svg>" + run_legend(runs);
  }
  std::string s = fmt::format(
      "<h3>{} — one chart per run (same axes; the other runs in grey)</h3>\n"
      "<div style=\"display:flex;flex-wrap:wrap;gap:8px\">",
      esc(title));
  const Axes a{0, mx > 0 ? mx : 1, 0, 100, 310, 200};
  std::vector<std::string> pts;
  for (const auto& v : per_run) pts.push_back(v.empty() ? std::string() : cdf_points(v, a));
  for (std::size_t i = 0; i < per_run.size(); ++i) {
    s += frame(runs[i].label, a, xlabel, "% at or below");
    for (std::size_t k = 0; k < per_run.size(); ++k)
      if (k != i && !pts[k].empty())
        s += fmt::format(R"(<polyline fill="none" stroke="#d0d0d0" stroke-width="1" points="{}"/>)", pts[k]);
    if (!pts[i].empty())
      s += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>)", series_color(i),
                       series_dash(i), pts[i]);
    s += "</svg>";
  }
  return s + "</div>";
}

/// Metric(s) against the swept parameter. With a swept value (runs' x) each line is drawn through
/// its runs in order of x: one per metric, or with groups one per group (a policy), its dots in
/// its colour. Without one the runs are separate set-ups, not points of a curve: each is a dot
/// above its label, never joined to the next (stroke = metric, fill = run).
std::string sweep_chart(const std::string& title, const std::vector<PlotRun>& runs, const std::string& sweep_name,
                        const std::vector<std::pair<std::string, std::vector<std::optional<double>>>>& lines,
                        const std::string& ylabel, bool grouped) {
  const bool numeric = !runs.empty() && runs.front().x.has_value();
  std::vector<double> xs;
  for (std::size_t i = 0; i < runs.size(); ++i) xs.push_back(numeric ? *runs[i].x : static_cast<double>(i));
  double ymax = 0;
  bool any = false;
  for (const auto& [_, v] : lines)
    for (const auto& y : v)
      if (y) ymax = std::max(ymax, *y), any = true;
  if (!any) return fmt::format("<p>{}: no data</p>", esc(title));
  double x0 = *std::min_element(xs.begin(), xs.end()), x1 = *std::max_element(xs.begin(), xs.end());
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  const double pad = (x1 - x0) * 0.06;
  // Headroom above the data for the line labels (top right, 14 px each), so no label sits on a line.
  const double label_share = std::min(0.5, (14.0 * static_cast<double>(lines.size()) + 8) / (kH - kT - kB));
  Axes a{x0 - pad, x1 + pad, 0, ymax > 0 ? ymax / (1 - label_share) : 1};
  std::string s = frame(title, a, numeric ? sweep_name : "run", ylabel, numeric);
  if (!numeric)
    for (std::size_t i = 0; i < runs.size(); ++i)
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)", a.px(xs[i]),
                       kH - kB + 14 + (runs.size() > 8 ? 10.0 * static_cast<double>(i % 2) : 0.0), esc(runs[i].label));
  constexpr const char* kLineColors[] = {"#333333", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"};
  for (std::size_t m = 0; m < lines.size(); ++m) {
    const std::string lc = grouped ? series_color(m) : kLineColors[m % std::size(kLineColors)];
    // Through the points in order of x (a group's runs need not be given in order).
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (lines[m].second[i]) at.push_back(i);
    std::stable_sort(at.begin(), at.end(), [&](std::size_t p, std::size_t q) { return xs[p] < xs[q]; });
    if (numeric) {
      std::string pts;
      for (std::size_t i : at) pts += fmt::format("{:.1f},{:.1f} ", a.px(xs[i]), a.py(*lines[m].second[i]));
      s += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="{}"{} points="{}"/>)", lc, grouped ? 2 : 1.5,
                       grouped ? series_dash(m) : "", pts);
    }
    for (std::size_t i : at)
      s += fmt::format(
          R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="{}" stroke="{}"><title>{} {}: {}</title></circle>)",
          a.px(xs[i]), a.py(*lines[m].second[i]), grouped ? lc : series_color(i), lc, esc(runs[i].label),
          esc(lines[m].first), num(*lines[m].second[i]));
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" fill="{}">{}</text>)", kW - kR - 150,
                     kT + 14 + 14.0 * m, lc, esc(lines[m].first));
  }
  return s + "</svg>";
}

}  // namespace

std::string render_runs_html(const std::vector<PlotRun>& runs, const std::string& sweep_name, const PlotOptions& opt) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(opt.title) + head_style;
  h += "<h1>" + esc(opt.title) + "</h1>\n";
  h += fmt::format("<p>{} runs, each drawn as its own series (never merged).</p>\n", runs.size());
  h += run_legend(runs);

  // Side by side.
  struct Row {
    const char* name;
    std::string tag;
    int pct;
    bool count;
  };
  const std::vector<Row> rows = {
      {"Requests (valid)", "request_count", -1, true},
      {"Errors", "error_request_count", -1, true},
      {"Prompt-cache hit (%)", "prompt_cache_hit_rate", -1, false},
      {"TTFT p50 (ms)", "time_to_first_token", 50, false},
      {"TTFT p90 (ms)", "time_to_first_token", 90, false},
      {"Request latency p50 (ms)", "request_latency", 50, false},
      {"Request latency p90 (ms)", "request_latency", 90, false},
      {"Inter-token latency avg (ms)", "inter_token_latency", -1, false},
      {"Request throughput (req/s)", "request_throughput", -1, false},
      {"Output token throughput (tok/s)", "output_token_throughput", -1, false},
  };
  h += "<h2>Runs side by side</h2><table><tr><th>Metric</th>";
  for (const auto& r : runs) h += "<th>" + esc(r.label) + "</th>";
  h += "</tr>\n";
  if (!sweep_name.empty() && !runs.empty() && runs.front().x) {
    h += "<tr><td>" + esc(sweep_name) + "</td>";
    for (const auto& r : runs) h += "<td>" + num(*r.x) + "</td>";
    h += "</tr>\n";
  }
  for (const auto& row : rows) {
    h += fmt::format("<tr><td>{}</td>", row.name);
    for (const auto& r : runs) {
      auto v = figure(*r.report, row.tag, row.pct);
      if (!v && row.count && row.tag == "request_count") {
        uint64_t n = 0;
        for (const auto& q : r.set->requests) n += q.valid() ? 1 : 0;
        v = static_cast<double>(n);
      }
      h += "<td>" + (v ? (row.count ? fmt::format("{:.0f}", *v) : format_number(*v)) : std::string("-")) + "</td>";
    }
    h += "</tr>\n";
  }
  h += "</table>\n";

  // Distributions, one line per run.
  std::vector<std::vector<double>> ttft(runs.size()), lat(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double to_ms = runs[i].set->time_to_ms();
    for (const auto& r : runs[i].set->requests) {
      if (!r.valid()) continue;
      if (r.ttft) ttft[i].push_back(*r.ttft * to_ms);
      if (r.latency) lat[i].push_back(*r.latency * to_ms);
    }
  }
  h += "<h2>Distributions</h2>\n" + cdf_chart("Time to first token (CDF)", ttft, "TTFT (ms)", runs) + "\n" +
       cdf_chart("Request latency (CDF)", lat, "latency (ms)", runs) + "\n";

  // Sweep: metrics against the parameter (or the run order).
  auto col = [&](const std::string& tag, int pct) {
    std::vector<std::optional<double>> v;
    for (const auto& r : runs) v.push_back(figure(*r.report, tag, pct));
    return v;
  };
  h += sweep_name.empty() || runs.empty() || !runs.front().x
           ? std::string("<h2>Set-ups side by side (separate runs: points, not a curve)</h2>\n")
           : "<h2>Sweep: metrics against " + esc(sweep_name) + "</h2>\n";
  // One line per metric, or with groups one per group and metric (the other groups' runs left out).
  std::vector<std::string> groups;
  for (const auto& r : runs)
    if (!r.group.empty() && std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
  using Lines = std::vector<std::pair<std::string, std::vector<std::optional<double>>>>;
  auto lines = [&](const std::vector<std::pair<std::string, std::vector<std::optional<double>>>>& metrics) {
    if (groups.empty()) return metrics;
    Lines out;
    for (const auto& g : groups)
      for (const auto& [name, v] : metrics) {
        auto w = v;
        for (std::size_t i = 0; i < runs.size(); ++i)
          if (runs[i].group != g) w[i].reset();
        out.emplace_back(g + " " + name, std::move(w));
      }
    return out;
  };
  h += sweep_chart("Prompt-cache hit rate", runs, sweep_name, lines({{"hit %", col("prompt_cache_hit_rate", -1)}}),
                   "percent", !groups.empty()) +
       "\n";
  h += sweep_chart("Time to first token", runs, sweep_name,
                   lines(groups.empty() ? Lines{{"TTFT p50", col("time_to_first_token", 50)},
                                                {"TTFT p90", col("time_to_first_token", 90)}}
                                        : Lines{{"TTFT p90", col("time_to_first_token", 90)}}),
                   "ms", !groups.empty()) +
       "\n";
  h += sweep_chart("Request throughput", runs, sweep_name, lines({{"req/s", col("request_throughput", -1)}}),
                   "requests/s", !groups.empty()) +
       "\n";
  h += run_legend(runs);
  h += "</body></html>\n";
  return h;
}

}  // namespace dyn::metrics
