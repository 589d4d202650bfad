// Calibration: the step model's coefficients by non-negative least squares over linear closed
// loops, the scheduler settings by search, every score from the simulator.
#include "dyn/fidelity/calibrate.h"
#include "dyn/fidelity/loop.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace dyn::fidelity {
namespace {

// Solves the small dense system m x = r (Gaussian elimination, partial pivoting); a singular
// column gets a tiny ridge so collinear features split the weight instead of failing.
std::vector<double> solve(std::vector<std::vector<double>> m, std::vector<double> r) {
  const size_t n = r.size();
  double scale = 0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(m[i][i]));
  for (size_t i = 0; i < n; ++i) m[i][i] += 1e-12 * (scale > 0 ? scale : 1);
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t i = c + 1; i < n; ++i)
      if (std::fabs(m[i][c]) > std::fabs(m[piv][c])) piv = i;
    std::swap(m[c], m[piv]);
    std::swap(r[c], r[piv]);
    if (m[c][c] == 0) continue;
    for (size_t i = c + 1; i < n; ++i) {
      const double f = m[i][c] / m[c][c];
      for (size_t k = c; k < n; ++k) m[i][k] -= f * m[c][k];
      r[i] -= f * r[c];
    }
  }
  std::vector<double> x(n, 0);
  for (size_t c = n; c-- > 0;) {
    double s = r[c];
    for (size_t k = c + 1; k < n; ++k) s -= m[c][k] * x[k];
    x[c] = m[c][c] != 0 ? s / m[c][c] : 0;
  }
  return x;
}

// Least squares on the columns in `set` (the others held at 0).
std::vector<double> ls_on(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                          const std::vector<size_t>& set, size_t n) {
  const size_t k = set.size();
  std::vector<std::vector<double>> m(k, std::vector<double>(k, 0));
  std::vector<double> r(k, 0);
  for (size_t row = 0; row < a.size(); ++row)
    for (size_t i = 0; i < k; ++i) {
      r[i] += a[row][set[i]] * b[row];
      for (size_t j = 0; j < k; ++j) m[i][j] += a[row][set[i]] * a[row][set[j]];
    }
  auto z = solve(m, r);
  std::vector<double> out(n, 0);
  for (size_t i = 0; i < k; ++i) out[set[i]] = z[i];
  return out;
}

// A scheduler setting tried by calibrate. seqs 0 = the options' max_num_seqs; blocks 0 = a pool
// that never runs out for the points.
struct Setting {
  uint32_t budget = 8192;
  bool chunked = true;
  uint32_t partial = 0;
  uint32_t interval = 1;
  uint32_t seqs = 0;
  uint64_t blocks = 0;
  auto key() const { return std::tuple(budget, chunked, partial, interval, seqs, blocks); }
};

struct Fit {
  Setting setting;
  engine::StepCoefficients coef;
  double error = INFINITY;  // mean of the TTFT and TPOT mean absolute relative errors (linear model)
};

// How many of the best token budget x chunking x partial-prefill settings (found with an unbounded
// pool) go on to the KV pool and max_num_seqs searches.
constexpr size_t kRefined = 3;

class Calibrator {
 public:
  Calibrator(const std::vector<LoadPoint>& pts, const CalibrateOptions& o) : pts_(pts), o_(o) {
    const uint64_t bs = o.engine.block_size;
    for (const auto& p : pts_) {
      const uint64_t one = (p.isl + p.osl + bs - 1) / bs;
      largest_ = std::max(largest_, one);
      demand_.push_back(one * p.concurrency);
      most_ = std::max(most_, one * p.concurrency);
      most_c_ = std::max<uint64_t>(most_c_, p.concurrency);
      least_c_ = std::min<uint64_t>(least_c_, p.concurrency);
    }
  }

  // The best setting and coefficients for the points in `train` (indices).
  Fit best(const std::vector<size_t>& train) {
    std::vector<Fit> shapes;
    for (uint32_t b : o_.budgets)
      for (bool ch : o_.chunked)
        for (uint32_t pp : o_.partials)
          for (uint32_t iv : o_.intervals)
            shapes.push_back(fit({b, ch, pp, iv, 0, o_.fit_kv ? 0 : o_.engine.num_blocks}, train));
    std::stable_sort(shapes.begin(), shapes.end(), [](const Fit& a, const Fit& b) { return a.error < b.error; });
    Fit top = shapes.front();
    for (size_t i = 0; i < std::min(kRefined, shapes.size()) && std::isfinite(shapes[i].error); ++i) {
      Fit k = o_.fit_kv ? best_kv(train, shapes[i]) : shapes[i];
      if (o_.fit_seqs) k = best_seqs(train, k);
      if (k.error < top.error) top = k;
    }
    return top;
  }

  engine::EngineConfig engine_for(const Setting& s) const {
    engine::EngineConfig e = o_.engine;
    e.max_num_batched_tokens = s.budget;
    e.enable_chunked_prefill = s.chunked;
    e.max_num_partial_prefills = s.partial;
    e.prefill_schedule_interval = s.interval;
    if (s.seqs) e.max_num_seqs = s.seqs;
    e.num_blocks = s.blocks ? s.blocks : std::max<uint64_t>(most_, 1);
    e.speedup_ratio = 1;
    return e;
  }

 private:
  // The KV pool: a geometric ladder between the largest request (twice over) and the largest
  // demand, refined around the best rung; `f` (an unbounded pool) stays when none beats it.
  Fit best_kv(const std::vector<size_t>& train, Fit top) {
    const double lo = static_cast<double>(2 * largest_), hi = static_cast<double>(most_);
    if (!(hi > lo)) return top;
    constexpr int kRungs = 14;
    const double step = std::pow(hi / lo, 1.0 / kRungs);
    double best_rung = 0;
    Setting s = top.setting;
    for (int i = 0; i < kRungs; ++i) {
      s.blocks = static_cast<uint64_t>(lo * std::pow(step, i));
      Fit f = fit(s, train);
      if (f.error < top.error) top = f, best_rung = lo * std::pow(step, i);
    }
    if (best_rung > 0)
      for (double k : {-0.75, -0.5, -0.25, 0.25, 0.5, 0.75}) {
        s.blocks = static_cast<uint64_t>(best_rung * std::pow(step, k));
        Fit f = fit(s, train);
        if (f.error < top.error) top = f;
      }
    return top;
  }

  // max_num_seqs below the largest concurrency: a geometric ladder from half the smallest.
  Fit best_seqs(const std::vector<size_t>& train, Fit top) {
    const double lo = std::max(1.0, static_cast<double>(least_c_) / 2), hi = static_cast<double>(most_c_);
    if (!(hi > lo + 1)) return top;
    constexpr int kRungs = 10;
    Setting s = top.setting;
    uint32_t last = 0;
    for (int i = 0; i < kRungs; ++i) {
      s.seqs = static_cast<uint32_t>(lo * std::pow(hi / lo, static_cast<double>(i) / kRungs));
      if (s.seqs == last || s.seqs >= most_c_) continue;
      last = s.seqs;
      Fit f = fit(s, train);
      if (f.error < top.error) top = f;
    }
    return top;
  }

  // Point i's loop under setting s; settings that cannot bind for it (a pool that holds its whole
  // demand, a sequence cap at or above its concurrency) share one run.
  const LinearLoop& loop(size_t i, const Setting& s) {
    Setting eff = s;
    if (eff.blocks && eff.blocks >= demand_[i]) eff.blocks = 0;
    if (eff.seqs && eff.seqs >= pts_[i].concurrency) eff.seqs = 0;
    auto key = std::tuple_cat(std::tuple(i), eff.key());
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    engine::EngineConfig e = engine_for(eff);
    if (!eff.blocks) e.num_blocks = std::max<uint64_t>(demand_[i], 1);
    return cache_.emplace(key, linear_loop(pts_[i], e)).first->second;
  }

  // Coefficients for setting s on the points `train`, and the setting's score: the fit's mean
  // absolute relative error over them.
  Fit fit(const Setting& s, const std::vector<size_t>& train) {
    Fit f;
    f.setting = s;
    std::vector<std::vector<double>> a;  // two rows per point: TTFT, TPOT (relative)
    std::vector<double> b;
    for (size_t i : train) {
      const LinearLoop& l = loop(i, s);
      if (!l.ok) return f;  // this pool cannot hold one of the requests
      const LoadPoint& p = pts_[i];
      a.emplace_back(l.ttft.begin(), l.ttft.end());
      for (double& v : a.back()) v /= p.ttft_ms;
      b.push_back(1 - l.ttft_offset / p.ttft_ms);
      a.emplace_back(l.tpot.begin(), l.tpot.end());
      for (double& v : a.back()) v /= p.tpot_ms;
      b.push_back(1 - l.tpot_offset / p.tpot_ms);
    }
    // Columns scaled to unit size: the features span ten orders of magnitude.
    std::vector<double> sc(kCoefficients, 0);
    for (const auto& row : a)
      for (size_t j = 0; j < kCoefficients; ++j) sc[j] = std::max(sc[j], std::fabs(row[j]));
    for (auto& row : a)
      for (size_t j = 0; j < kCoefficients; ++j) row[j] = sc[j] > 0 ? row[j] / sc[j] : 0;
    const auto x = nnls(a, b);
    for (size_t j = 0; j < kCoefficients; ++j) f.coef[j] = sc[j] > 0 ? x[j] / sc[j] : 0;
    double err = 0;
    for (size_t r = 0; r < a.size(); ++r) {
      double pred = 0;
      for (size_t j = 0; j < kCoefficients; ++j) pred += a[r][j] * x[j];
      err += std::fabs(pred - b[r]);
    }
    f.error = err / static_cast<double>(a.size());
    return f;
  }

  const std::vector<LoadPoint>& pts_;
  const CalibrateOptions& o_;
  uint64_t largest_ = 0, most_ = 0, most_c_ = 0, least_c_ = UINT64_MAX;
  std::vector<uint64_t> demand_;
  std::map<std::tuple<size_t, uint32_t, bool, uint32_t, uint32_t, uint32_t, uint64_t>, LinearLoop> cache_;
};

std::shared_ptr<const engine::PerfProfile> make_profile(const Fit& f, const engine::EngineConfig& e,
                                                        const engine::PerfProfile::Info& info) {
  engine::ProfileEngine pe;
  pe.block_size = e.block_size;
  pe.num_gpu_blocks = e.num_blocks;
  pe.max_num_seqs = e.max_num_seqs;
  pe.max_num_batched_tokens = e.max_num_batched_tokens;
  pe.enable_chunked_prefill = e.enable_chunked_prefill;
  pe.prefill_schedule_interval = e.prefill_schedule_interval;
  pe.max_num_partial_prefills = e.max_num_partial_prefills;
  return engine::PerfProfile::parametric(f.coef, info, pe);
}

double pct(double pred, double truth) { return std::fabs(pred - truth) / truth * 100; }

}  // namespace

std::vector<double> nnls(const std::vector<std::vector<double>>& a, const std::vector<double>& b) {
  const size_t n = a.empty() ? 0 : a[0].size();
  std::vector<double> x(n, 0);
  std::vector<bool> passive(n, false);
  auto gradient = [&] {
    std::vector<double> w(n, 0);
    for (size_t r = 0; r < a.size(); ++r) {
      double res = b[r];
      for (size_t j = 0; j < n; ++j) res -= a[r][j] * x[j];
      for (size_t j = 0; j < n; ++j) w[j] += a[r][j] * res;
    }
    return w;
  };
  for (size_t outer = 0; outer < 4 * n + 4; ++outer) {
    auto w = gradient();
    size_t pick = n;
    for (size_t j = 0; j < n; ++j)
      if (!passive[j] && w[j] > 1e-12 && (pick == n || w[j] > w[pick])) pick = j;
    if (pick == n) break;
    passive[pick] = true;
    for (size_t inner = 0; inner < 4 * n + 4; ++inner) {
      std::vector<size_t> set;
      for (size_t j = 0; j < n; ++j)
        if (passive[j]) set.push_back(j);
      auto z = ls_on(a, b, set, n);
      bool feasible = true;
      for (size_t j : set) feasible = feasible && z[j] > 0;
      if (feasible) {
        x = z;
        break;
      }
      double alpha = 1;
      for (size_t j : set)
        if (z[j] <= 0) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      for (size_t j = 0; j < n; ++j) {
        x[j] += alpha * (z[j] - x[j]);
        if (passive[j] && x[j] <= 1e-15) passive[j] = false, x[j] = 0;
      }
    }
  }
  return x;
}

Json Scores::to_json() const {
  return {{"rows", rows},
          {"ttft_mape_pct", ttft_mape_pct},
          {"tpot_mape_pct", tpot_mape_pct},
          {"tps_gpu_mape_pct", tps_gpu_mape_pct}};
}

Scores score(const std::vector<Prediction>& rows) {
  Scores s;
  s.rows = rows.size();
  for (const auto& r : rows) {
    const bool ran = r.predicted.requests > r.predicted.errors;
    s.ttft_mape_pct += ran ? pct(r.predicted.ttft_ms, r.point.ttft_ms) : 100;
    s.tpot_mape_pct += ran ? pct(r.predicted.tpot_ms, r.point.tpot_ms) : 100;
    s.tps_gpu_mape_pct += ran ? pct(r.predicted.tps_gpu, r.point.tps_gpu()) : 100;
  }
  if (s.rows) {
    const double n = static_cast<double>(s.rows);
    s.ttft_mape_pct /= n;
    s.tpot_mape_pct /= n;
    s.tps_gpu_mape_pct /= n;
  }
  return s;
}

Json prediction_json(const Prediction& p) {
  return {{"isl", p.point.isl},
          {"osl", p.point.osl},
          {"concurrency", p.point.concurrency},
          {"ttft_ms", p.point.ttft_ms},
          {"ttft_pred_ms", p.predicted.ttft_ms},
          {"tpot_ms", p.point.tpot_ms},
          {"tpot_pred_ms", p.predicted.tpot_ms},
          {"tps_gpu", p.point.tps_gpu()},
          {"tps_gpu_pred", p.predicted.tps_gpu}};
}

std::vector<Prediction> predict(const std::vector<LoadPoint>& points, const engine::EngineConfig& engine) {
  std::vector<Prediction> out;
  for (const auto& p : points) out.push_back({p, simulate_point(p, engine)});
  return out;
}

Expected<CalibrateResult> calibrate(const std::vector<LoadPoint>& points, const CalibrateOptions& o) {
  const auto pairs = pairs_of(points);
  if (pairs.size() < 3)
    return bad_data(
        fmt::format("calibration needs at least three ISL/OSL pairs (one held out at a time, two left to "
                    "fit); the selection has {}",
                    pairs.size()));
  Calibrator cal(points, o);
  std::vector<size_t> all(points.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const Fit f = cal.best(all);
  if (!std::isfinite(f.error))
    return bad_data("no engine setting can run every load point (a prompt larger than the KV pool?)");
  CalibrateResult res;
  const engine::EngineConfig e = cal.engine_for(f.setting);
  res.profile = make_profile(f, e, o.info);
  engine::EngineConfig run = e;
  run.profile = res.profile;
  res.train = predict(points, run);
  res.train_scores = score(res.train);
  if (o.held_out) {
    for (const auto& pr : pairs) {
      std::vector<size_t> train;
      std::vector<LoadPoint> test;
      for (size_t i = 0; i < points.size(); ++i) {
        if (std::pair(points[i].isl, points[i].osl) == pr) test.push_back(points[i]);
        else train.push_back(i);
      }
      const Fit h = cal.best(train);
      if (!std::isfinite(h.error)) {
        for (const auto& p : test) res.held_out.push_back({p, {}});
        continue;
      }
      engine::EngineConfig he = cal.engine_for(h.setting);
      he.profile = make_profile(h, he, o.info);
      for (auto& p : predict(test, he)) res.held_out.push_back(std::move(p));
    }
    res.held_out_scores = score(res.held_out);
  }
  return res;
}

}  // namespace dyn::fidelity
