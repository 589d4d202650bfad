// Timing profiles: reading the three forms, checking them, resampling raw profiler points, and
// the step time of each kind.
#include "dyn/engine/profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "dyn/engine/npz.h"

namespace dyn::engine {
namespace {

namespace fs = std::filesystem;
using Arrays = std::map<std::string, NpyArray>;

constexpr size_t kDecodeGrid = 100;  // KV points per profiled context length after resampling

const char* const kCoefNames[StepCoefficients::kCount] = {
    "base", "prefill_step", "prefill_token", "prefill_attention", "prefill_seq", "decode_seq", "kv_token"};

Error key_error(const std::string& file, const std::string& key, const std::string& what) {
  return bad_data(fmt::format("{}: key '{}': {}", file, key, what));
}

// The array `key` of `a` as a flat vector of finite numbers; `dims` = its required rank (0 = any).
Expected<std::vector<double>> take(const Arrays& a, const std::string& file, const std::string& key, size_t dims = 1) {
  auto it = a.find(key);
  if (it == a.end()) return key_error(file, key, "missing");
  const NpyArray& v = it->second;
  if (dims && v.shape.size() != dims && !(dims == 1 && v.shape.empty()))
    return key_error(file, key, fmt::format("expected {} dimension(s), found {}", dims, v.shape.size()));
  for (size_t i = 0; i < v.values.size(); ++i)
    if (!std::isfinite(v.values[i])) return key_error(file, key, fmt::format("value {} is not a finite number", i));
  if (v.values.empty()) return key_error(file, key, "empty");
  return v.values;
}

// Several keys at once, in order; the first missing or bad one is the error.
Expected<std::vector<std::vector<double>>> take_all(const Arrays& a, const std::string& file,
                                                    std::initializer_list<std::pair<const char*, size_t>> keys) {
  std::vector<std::vector<double>> out;
  for (const auto& [key, dims] : keys) {
    auto v = take(a, file, key, dims);
    if (!v) return v.error();
    out.push_back(std::move(*v));
  }
  return out;
}

std::optional<Error> check_increasing(const std::vector<double>& xs, const std::string& file, const std::string& key) {
  for (size_t i = 1; i < xs.size(); ++i)
    if (!(xs[i] > xs[i - 1]))
      return key_error(file, key,
                       fmt::format("axis not strictly increasing at index {} ({} after {})", i, xs[i], xs[i - 1]));
  return std::nullopt;
}

std::optional<Error> check_times(const std::vector<double>& ms, const std::string& file, const std::string& key) {
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] < 0) return key_error(file, key, fmt::format("negative time {} at index {}", ms[i], i));
  return std::nullopt;
}

bool has_all(const Arrays& a, std::initializer_list<const char*> keys) {
  return std::all_of(keys.begin(), keys.end(), [&a](const char* k) { return a.count(k) > 0; });
}
bool is_raw_prefill(const Arrays& a) { return a.count("prefill_ttft") > 0 || a.count("prefill_thpt_per_gpu") > 0; }
bool is_raw_decode(const Arrays& a) { return a.count("x_kv_usage") > 0 || a.count("z_itl") > 0; }

// The mocker's converted npz (Dynamo perf_model.rs from_npz).
Expected<ProfileTables> converted_tables(const Arrays& a, const std::string& file) {
  auto v = take_all(a, file,
                    {{"prefill_isl", 1},
                     {"prefill_ttft_ms", 1},
                     {"decode_active_kv_tokens", 1},
                     {"decode_context_length", 1},
                     {"decode_itl", 2}});
  if (!v) return v.error();
  ProfileTables t{std::move((*v)[0]), std::move((*v)[1]), std::move((*v)[2]), std::move((*v)[3]), std::move((*v)[4])};
  if (t.prefill_tokens.size() != t.prefill_ms.size())
    return key_error(file, "prefill_ttft_ms",
                     fmt::format("{} values for {} prefill_isl points", t.prefill_ms.size(), t.prefill_tokens.size()));
  const auto& shape = a.at("decode_itl").shape;
  if (shape[0] != t.decode_kv_tokens.size() || shape[1] != t.decode_context.size())
    return key_error(
        file, "decode_itl",
        fmt::format("shape ({}, {}) does not match decode_active_kv_tokens ({}) x decode_context_length ({})", shape[0],
                    shape[1], t.decode_kv_tokens.size(), t.decode_context.size()));
  for (auto [xs, key] : {std::pair{&t.prefill_tokens, "prefill_isl"},
                         {&t.decode_kv_tokens, "decode_active_kv_tokens"},
                         {&t.decode_context, "decode_context_length"}})
    if (auto e = check_increasing(*xs, file, key)) return *e;
  if (auto e = check_times(t.prefill_ms, file, "prefill_ttft_ms")) return *e;
  if (auto e = check_times(t.decode_ms, file, "decode_itl")) return *e;
  return t;
}

// Raw profiler prefill points: sorted by ISL, which must be distinct.
std::optional<Error> raw_prefill(const Arrays& a, const std::string& file, ProfileTables& t) {
  auto v = take_all(a, file, {{"prefill_isl", 1}, {"prefill_ttft", 1}, {"prefill_thpt_per_gpu", 1}});
  if (!v) return v.error();
  const auto &isl = (*v)[0], &ttft = (*v)[1], &thpt = (*v)[2];
  if (ttft.size() != isl.size() || thpt.size() != isl.size())
    return key_error(file, "prefill_ttft", fmt::format("{} values for {} prefill_isl points", ttft.size(), isl.size()));
  if (auto e = check_times(ttft, file, "prefill_ttft")) return *e;
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < isl.size(); ++i) pts.emplace_back(isl[i], ttft[i]);
  std::sort(pts.begin(), pts.end());
  for (auto& [x, y] : pts) {
    t.prefill_tokens.push_back(x);
    t.prefill_ms.push_back(y);
  }
  return check_increasing(t.prefill_tokens, file, "prefill_isl");
}

// Raw profiler decode points (x_kv_usage, y_context_length, z_itl) -> grid: per distinct context
// length, ITL linear in KV tokens, sampled at kDecodeGrid points over [0, max_kv_tokens].
std::optional<Error> raw_decode(const Arrays& a, const std::string& file, ProfileTables& t, double& max_kv) {
  auto v = take_all(
      a, file, {{"x_kv_usage", 1}, {"y_context_length", 1}, {"z_itl", 1}, {"z_thpt_per_gpu", 1}, {"max_kv_tokens", 0}});
  if (!v) return v.error();
  const auto &x = (*v)[0], &y = (*v)[1], &z = (*v)[2], &thpt = (*v)[3];
  if (y.size() != x.size() || z.size() != x.size() || thpt.size() != x.size())
    return key_error(file, "z_itl", fmt::format("{} values for {} x_kv_usage points", z.size(), x.size()));
  max_kv = (*v)[4][0];
  if (!(max_kv > 0)) return key_error(file, "max_kv_tokens", "must be > 0");
  if (auto e = check_times(z, file, "z_itl")) return *e;
  std::map<double, std::vector<std::pair<double, double>>> by_ctx;
  for (size_t i = 0; i < x.size(); ++i) by_ctx[y[i]].emplace_back(x[i] * max_kv, z[i]);
  for (size_t i = 0; i < kDecodeGrid; ++i)
    t.decode_kv_tokens.push_back(max_kv * static_cast<double>(i) / static_cast<double>(kDecodeGrid - 1));
  for (auto& [ctx, pts] : by_ctx) t.decode_context.push_back(ctx);
  t.decode_ms.assign(kDecodeGrid * by_ctx.size(), 0.0);
  size_t j = 0;
  for (auto& [ctx, pts] : by_ctx) {
    std::sort(pts.begin(), pts.end());
    std::vector<double> xs, zs;
    for (auto& [kv, itl] : pts) {
      if (!xs.empty() && !(kv > xs.back()))
        return key_error(file, "x_kv_usage",
                         fmt::format("two points at KV usage {} for context length {}", kv / max_kv, ctx));
      xs.push_back(kv);
      zs.push_back(itl);
    }
    for (size_t i = 0; i < kDecodeGrid; ++i)
      t.decode_ms[i * by_ctx.size() + j] = interp1(xs, zs, t.decode_kv_tokens[i]);
    ++j;
  }
  return std::nullopt;
}

Expected<Arrays> read_arrays(const std::string& path) { return read_npz(path); }

// The raw pair: `a` and `b` hold the prefill and decode key sets in either order (or `a` both).
Expected<std::shared_ptr<const PerfProfile>> from_raw(const std::vector<std::pair<std::string, Arrays>>& files,
                                                      const std::string& source) {
  const std::pair<std::string, Arrays>*pre = nullptr, *dec = nullptr;
  for (const auto& f : files) {
    if (is_raw_prefill(f.second) && !pre) pre = &f;
    if (is_raw_decode(f.second) && !dec) dec = &f;
  }
  if (!pre)
    return bad_data(
        fmt::format("{}: no raw prefill data (keys prefill_isl, prefill_ttft, prefill_thpt_per_gpu)", source));
  if (!dec)
    return bad_data(fmt::format(
        "{}: no raw decode data (keys x_kv_usage, y_context_length, z_itl, z_thpt_per_gpu, max_kv_tokens)", source));
  ProfileTables t;
  if (auto e = raw_prefill(pre->second, pre->first, t)) return *e;
  double max_kv = 0;
  if (auto e = raw_decode(dec->second, dec->first, t, max_kv)) return *e;
  PerfProfile::Info info;
  info.format = "profiler-raw";
  info.source = source;
  ProfileEngine eng;
  eng.kv_tokens = static_cast<uint64_t>(max_kv);
  return PerfProfile::tables(std::move(t), std::move(info), eng);
}

Expected<std::shared_ptr<const PerfProfile>> load_npz_file(const std::string& path) {
  auto a = read_arrays(path);
  if (!a) return a.error();
  if (has_all(*a, {"decode_itl"}) || has_all(*a, {"prefill_ttft_ms"})) {
    auto t = converted_tables(*a, path);
    if (!t) return t.error();
    PerfProfile::Info info;
    info.format = "mocker-npz";
    info.source = path;
    return PerfProfile::tables(std::move(*t), std::move(info), {});
  }
  if (is_raw_prefill(*a) || is_raw_decode(*a)) return from_raw({{path, std::move(*a)}}, path);
  return bad_data(fmt::format(
      "{}: not a timing profile: no key 'prefill_ttft_ms' (mocker npz) nor 'prefill_ttft' / 'z_itl' (profiler raw data)",
      path));
}

Expected<std::shared_ptr<const PerfProfile>> load_dir(const fs::path& dir) {
  std::vector<std::string> paths;
  const fs::path pre = dir / "selected_prefill_interpolation" / "raw_data.npz";
  const fs::path dec = dir / "selected_decode_interpolation" / "raw_data.npz";
  if (fs::exists(pre) || fs::exists(dec)) {
    paths = {pre.string(), dec.string()};
  } else {
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".npz") found.push_back(e.path());
    std::sort(found.begin(), found.end());
    for (const auto& f : found) paths.push_back(f.string());
  }
  if (paths.empty())
    return bad_data(
        fmt::format("{}: no profile in this directory (selected_prefill_interpolation/raw_data.npz and "
                    "selected_decode_interpolation/raw_data.npz, or .npz files)",
                    dir.string()));
  std::vector<std::pair<std::string, Arrays>> files;
  for (const auto& p : paths) {
    auto a = read_arrays(p);
    if (!a) return a.error();
    files.emplace_back(p, std::move(*a));
  }
  return from_raw(files, dir.string());
}

std::string read_text(const std::string& path, bool& ok) {
  std::ifstream in(path, std::ios::binary);
  ok = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A dyn JSON number array that must be finite (and, for axes, strictly increasing).
Expected<std::vector<double>> json_numbers(const Json& j, const std::string& file, const std::string& key) {
  if (!j.is_array() || j.empty()) return key_error(file, key, "must be a non-empty array of numbers");
  std::vector<double> v;
  for (const auto& x : j) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) return key_error(file, key, "must hold finite numbers only");
    v.push_back(x.get<double>());
  }
  return v;
}

}  // namespace

double StepCoefficients::operator[](size_t i) const {
  const double* v[] = {&base, &prefill_step, &prefill_token, &prefill_attention, &prefill_seq, &decode_seq, &kv_token};
  return *v[i];
}
double& StepCoefficients::operator[](size_t i) {
  double* v[] = {&base, &prefill_step, &prefill_token, &prefill_attention, &prefill_seq, &decode_seq, &kv_token};
  return *v[i];
}
const char* StepCoefficients::name(size_t i) { return kCoefNames[i]; }

std::vector<double> StepCoefficients::features(const StepShape& s) {
  return {1.0,
          s.prefill_tokens > 0 ? 1.0 : 0.0,
          static_cast<double>(s.prefill_tokens),
          s.prefill_attention,
          static_cast<double>(s.prefill_seqs),
          static_cast<double>(s.decode_seqs),
          static_cast<double>(s.decode_kv_tokens)};
}

double interp1(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (xs.size() == 1) return ys[0];
  // The segment holding x, or the first / last one past the ends (extrapolation).
  size_t i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  i = std::clamp<size_t>(i, 1, xs.size() - 1);
  const double x0 = xs[i - 1], x1 = xs[i];
  return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0);
}

namespace {
// Bilinear over the [kv][context] grid with linear extrapolation on both axes.
double interp2(const ProfileTables& t, double kv, double ctx) {
  const size_t nc = t.decode_context.size();
  std::vector<double> along(t.decode_kv_tokens.size());
  std::vector<double> col(nc);
  for (size_t i = 0; i < t.decode_kv_tokens.size(); ++i) {
    for (size_t j = 0; j < nc; ++j) col[j] = t.decode_ms[i * nc + j];
    along[i] = interp1(t.decode_context, col, ctx);
  }
  return interp1(t.decode_kv_tokens, along, kv);
}
}  // namespace

double PerfProfile::step_ms(const StepShape& s) const {
  if (kind_ == Kind::kParametric) {
    const double t = coef_.base + (s.prefill_tokens > 0 ? coef_.prefill_step : 0.0) +
                     coef_.prefill_token * static_cast<double>(s.prefill_tokens) +
                     coef_.prefill_attention * s.prefill_attention +
                     coef_.prefill_seq * static_cast<double>(s.prefill_seqs) +
                     coef_.decode_seq * static_cast<double>(s.decode_seqs) +
                     coef_.kv_token * static_cast<double>(s.decode_kv_tokens);
    return std::max(1.0, t);
  }
  double ms = 0;
  if (s.prefill_tokens > 0)
    ms += std::max(0.0, interp1(tables_.prefill_tokens, tables_.prefill_ms, static_cast<double>(s.prefill_tokens)));
  if (s.decode_seqs > 0) {
    const double kv = static_cast<double>(s.decode_kv_tokens);
    ms += std::max(1.0, interp2(tables_, kv, kv / static_cast<double>(s.decode_seqs)));
  }
  return std::max(1.0, ms);
}

double PerfProfile::request_ms(uint64_t prompt, uint64_t cached, uint64_t output, uint64_t chunk,
                               double other_kv_tokens) const {
  double t = 0;
  uint64_t done = std::min(cached, prompt);
  while (done < prompt) {
    const uint64_t take = chunk ? std::min(chunk, prompt - done) : prompt - done;
    StepShape s;
    s.prefill_tokens = take;
    s.prefill_seqs = 1;
    s.prefill_attention = static_cast<double>(take) * (static_cast<double>(done) + static_cast<double>(take) / 2);
    t += step_ms(s);
    done += take;
    // Past a million chunks the rest are alike but for attention: counted at once (a bad length
    // of 2^63 must not loop for ever).
    if (chunk && (prompt - done) / chunk > (uint64_t{1} << 20)) {
      const uint64_t full = (prompt - done) / chunk;
      t += static_cast<double>(full) * step_ms(s);
      done += full * chunk;
    }
  }
  if (output == 0) return t;
  const double ctx = static_cast<double>(prompt) + static_cast<double>(output) / 2;
  StepShape d;
  d.decode_seqs = 1 + static_cast<uint64_t>(std::llround(std::max(0.0, other_kv_tokens) / std::max(ctx, 1.0)));
  d.decode_kv_tokens = static_cast<uint64_t>(ctx + std::max(0.0, other_kv_tokens));
  return t + static_cast<double>(output) * step_ms(d);
}

uint32_t PerfProfile::gpus() const { return info_.gpus ? info_.gpus : info_.tp ? info_.tp : 1; }

std::shared_ptr<const PerfProfile> PerfProfile::parametric(const StepCoefficients& c, Info info, ProfileEngine engine) {
  auto p = std::make_shared<PerfProfile>();
  p->kind_ = Kind::kParametric;
  p->coef_ = c;
  p->info_ = std::move(info);
  if (p->info_.format.empty()) p->info_.format = "dyn-json";
  p->engine_ = engine;
  return p;
}

std::shared_ptr<const PerfProfile> PerfProfile::tables(ProfileTables t, Info info, ProfileEngine engine) {
  auto p = std::make_shared<PerfProfile>();
  p->kind_ = Kind::kTables;
  p->tables_ = std::move(t);
  p->info_ = std::move(info);
  p->engine_ = engine;
  return p;
}

std::string PerfProfile::describe() const {
  std::string s = info_.model.empty() ? "model not recorded" : info_.model;
  s += " on " + (info_.gpu.empty() ? std::string("GPU not recorded") : info_.gpu);
  if (info_.tp) s += fmt::format(" TP{}", info_.tp);
  if (!info_.engine.empty())
    s += ", " + info_.engine + (info_.engine_version.empty() ? "" : " " + info_.engine_version);
  return s + fmt::format(" ({} profile {})", info_.format, info_.source);
}

Json PerfProfile::to_json() const {
  Json j;
  j["schema"] = "dyn.perf_profile.v1";
  j["model"] = info_.model;
  j["gpu"] = info_.gpu;
  j["tp"] = info_.tp;
  j["gpus"] = gpus();
  j["engine"] = info_.engine;
  j["engine_version"] = info_.engine_version;
  if (kind_ == Kind::kParametric) {
    Json c = Json::object();
    for (size_t i = 0; i < StepCoefficients::kCount; ++i) c[StepCoefficients::name(i)] = coef_[i];
    j["step_ms"] = c;
  } else {
    j["prefill"] = {{"tokens", tables_.prefill_tokens}, {"ms", tables_.prefill_ms}};
    j["decode"] = {
        {"kv_tokens", tables_.decode_kv_tokens}, {"context", tables_.decode_context}, {"ms", tables_.decode_ms}};
  }
  Json e = Json::object();
  if (engine_.block_size) e["block_size"] = *engine_.block_size;
  if (engine_.num_gpu_blocks) e["num_gpu_blocks"] = *engine_.num_gpu_blocks;
  if (engine_.max_num_seqs) e["max_num_seqs"] = *engine_.max_num_seqs;
  if (engine_.max_num_batched_tokens) e["max_num_batched_tokens"] = *engine_.max_num_batched_tokens;
  if (engine_.enable_chunked_prefill) e["enable_chunked_prefill"] = *engine_.enable_chunked_prefill;
  if (engine_.prefill_schedule_interval) e["prefill_schedule_interval"] = *engine_.prefill_schedule_interval;
  if (engine_.max_num_partial_prefills) e["max_num_partial_prefills"] = *engine_.max_num_partial_prefills;
  if (engine_.kv_tokens) e["kv_tokens"] = *engine_.kv_tokens;
  j["engine_settings"] = e;
  return j;
}

Expected<std::shared_ptr<const PerfProfile>> parse_profile_json(const std::string& text, const std::string& file) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_data(fmt::format("{}: not a JSON object (dyn profile)", file));
  if (j.value("schema", std::string()) != "dyn.perf_profile.v1")
    return key_error(file, "schema", "must be \"dyn.perf_profile.v1\"");
  PerfProfile::Info info;
  info.format = "dyn-json";
  info.source = file;
  for (auto [key, dst] : {std::pair{"model", &info.model},
                          {"gpu", &info.gpu},
                          {"engine", &info.engine},
                          {"engine_version", &info.engine_version}}) {
    if (!j.contains(key) || !j[key].is_string())
      return key_error(file, key, "missing (a string naming the hardware or software)");
    *dst = j[key].get<std::string>();
  }
  for (auto [key, dst] : {std::pair{"tp", &info.tp}, {"gpus", &info.gpus}}) {
    if (!j.contains(key)) {
      if (std::string(key) == "gpus") continue;
      return key_error(file, key, "missing (tensor-parallel size, an integer >= 1)");
    }
    if (!j[key].is_number_unsigned() || j[key].get<uint64_t>() < 1 || j[key].get<uint64_t>() > 1u << 20)
      return key_error(file, key, "must be an integer >= 1");
    *dst = j[key].get<uint32_t>();
  }
  ProfileEngine eng;
  if (j.contains("engine_settings")) {
    const Json& e = j["engine_settings"];
    if (!e.is_object()) return key_error(file, "engine_settings", "must be an object");
    auto uint_field = [&](const char* key, auto& dst, uint64_t max, uint64_t min = 1) -> std::optional<Error> {
      if (!e.contains(key)) return std::nullopt;
      if (!e[key].is_number_unsigned() || e[key].get<uint64_t>() < min || e[key].get<uint64_t>() > max)
        return key_error(file, std::string("engine_settings.") + key,
                         fmt::format("must be an integer in {}..{}", min, max));
      dst = static_cast<typename std::remove_reference_t<decltype(dst)>::value_type>(e[key].get<uint64_t>());
      return std::nullopt;
    };
    for (auto err : {uint_field("block_size", eng.block_size, 1u << 20),
                     uint_field("num_gpu_blocks", eng.num_gpu_blocks, uint64_t{1} << 40),
                     uint_field("max_num_seqs", eng.max_num_seqs, 1u << 24),
                     uint_field("max_num_batched_tokens", eng.max_num_batched_tokens, 1u << 30),
                     uint_field("prefill_schedule_interval", eng.prefill_schedule_interval, 1u << 20),
                     uint_field("max_num_partial_prefills", eng.max_num_partial_prefills, 1u << 20, 0),
                     uint_field("kv_tokens", eng.kv_tokens, uint64_t{1} << 50)})
      if (err) return *err;
    if (e.contains("enable_chunked_prefill")) {
      if (!e["enable_chunked_prefill"].is_boolean())
        return key_error(file, "engine_settings.enable_chunked_prefill", "must be true or false");
      eng.enable_chunked_prefill = e["enable_chunked_prefill"].get<bool>();
    }
  }
  if (j.contains("step_ms")) {
    const Json& c = j["step_ms"];
    if (!c.is_object()) return key_error(file, "step_ms", "must be an object of coefficients");
    StepCoefficients co;
    for (size_t i = 0; i < StepCoefficients::kCount; ++i) {
      const std::string key = StepCoefficients::name(i);
      if (!c.contains(key)) return key_error(file, "step_ms." + key, "missing");
      if (!c[key].is_number() || !std::isfinite(c[key].get<double>()) || c[key].get<double>() < 0)
        return key_error(file, "step_ms." + key, "must be a finite number >= 0");
      co[i] = c[key].get<double>();
    }
    for (auto it = c.begin(); it != c.end(); ++it)
      if (std::none_of(std::begin(kCoefNames), std::end(kCoefNames), [&](const char* n) { return it.key() == n; }))
        return key_error(file, "step_ms." + it.key(), "unknown coefficient");
    return PerfProfile::parametric(co, std::move(info), eng);
  }
  if (!j.contains("prefill") || !j.contains("decode"))
    return key_error(file, "step_ms", "missing (or tables \"prefill\" and \"decode\")");
  ProfileTables t;
  for (auto [obj, key, dst] : {std::tuple{"prefill", "tokens", &t.prefill_tokens},
                               {"prefill", "ms", &t.prefill_ms},
                               {"decode", "kv_tokens", &t.decode_kv_tokens},
                               {"decode", "context", &t.decode_context},
                               {"decode", "ms", &t.decode_ms}}) {
    const std::string name = std::string(obj) + "." + key;
    if (!j[obj].is_object() || !j[obj].contains(key)) return key_error(file, name, "missing");
    auto v = json_numbers(j[obj][key], file, name);
    if (!v) return v.error();
    *dst = std::move(*v);
  }
  if (auto e = check_increasing(t.prefill_tokens, file, "prefill.tokens")) return *e;
  if (auto e = check_increasing(t.decode_kv_tokens, file, "decode.kv_tokens")) return *e;
  if (auto e = check_increasing(t.decode_context, file, "decode.context")) return *e;
  if (t.prefill_ms.size() != t.prefill_tokens.size())
    return key_error(file, "prefill.ms", "needs one value per prefill.tokens point");
  if (t.decode_ms.size() != t.decode_kv_tokens.size() * t.decode_context.size())
    return key_error(file, "decode.ms", "needs kv_tokens x context values (row-major)");
  if (auto e = check_times(t.prefill_ms, file, "prefill.ms")) return *e;
  if (auto e = check_times(t.decode_ms, file, "decode.ms")) return *e;
  return PerfProfile::tables(std::move(t), std::move(info), eng);
}

Expected<std::shared_ptr<const PerfProfile>> PerfProfile::load(const std::string& path) {
  if (auto comma = path.find(','); comma != std::string::npos) {
    std::vector<std::pair<std::string, Arrays>> files;
    for (const std::string& p : {path.substr(0, comma), path.substr(comma + 1)}) {
      auto a = read_arrays(p);
      if (!a) return a.error();
      files.emplace_back(p, std::move(*a));
    }
    return from_raw(files, path);
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_dir(path);
  if (!fs::exists(path, ec)) return Error{fmt::format("{}: no such file or directory", path), kExitIo};
  if (fs::path(path).extension() == ".json") {
    bool ok = false;
    std::string text = read_text(path, ok);
    if (!ok) return Error{fmt::format("{}: cannot read", path), kExitIo};
    return parse_profile_json(text, path);
  }
  return load_npz_file(path);
}

}  // namespace dyn::engine
