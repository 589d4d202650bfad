// Load points from a silicon-sample CSV or from request_end rows, one configuration selected.
#include "dyn/fidelity/rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "dyn/base/json.h"
#include "dyn/io/line_reader.h"

namespace dyn::fidelity {
namespace {

// request_end runs: requests whose starts and ends leave a gap below this (all clients idle at
// once) are one closed loop; separate loops need a longer pause between them.
constexpr double kBridgeMs = 100;

// Columns that vary within one configuration (the load point and its measurement) or only name it.
const std::set<std::string> kPerRow = {
    "id", "silicon_data_source", "isl", "osl", "batch_size", "silicon_ttft_ms", "silicon_tpot_ms"};

std::optional<double> number(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool matches(const std::string& have, const std::string& want) {
  if (have == want) return true;
  auto a = number(have), b = number(want);
  return a && b && *a == *b;
}

// One CSV record (RFC 4180 quoting; no newline inside quotes, as the sample has none).
std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

struct Candidate {
  LoadPoint point;
  std::vector<std::pair<std::string, std::string>> config;
};

// The error for rows of several configurations: each named by the columns whose values differ.
Error several(const std::string& path, const std::vector<std::vector<std::pair<std::string, std::string>>>& configs,
              const std::vector<size_t>& counts) {
  std::vector<size_t> differing;
  for (size_t c = 0; c < configs[0].size(); ++c)
    for (const auto& cfg : configs)
      if (cfg[c].second != configs[0][c].second) {
        differing.push_back(c);
        break;
      }
  std::string msg =
      fmt::format("{}: {} configurations match; narrow the selection with --where COLUMN=VALUE:", path, configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    std::string line;
    for (size_t c : differing)
      line += fmt::format("{}{}={}", line.empty() ? "" : " ", configs[i][c].first,
                          configs[i][c].second.empty() ? "\"\"" : configs[i][c].second);
    msg += fmt::format("\n  {} ({} rows)", line, counts[i]);
  }
  return bad_data(msg);
}

// Groups candidates by configuration: one is the selection, several an error.
Expected<Selection> one_config(const std::string& path, std::vector<Candidate> cands) {
  if (cands.empty()) return bad_data(fmt::format("{}: no row matches the selection", path));
  std::vector<std::vector<std::pair<std::string, std::string>>> configs;
  std::vector<size_t> counts;
  for (const auto& c : cands) {
    auto it = std::find(configs.begin(), configs.end(), c.config);
    if (it == configs.end()) {
      configs.push_back(c.config);
      counts.push_back(1);
    } else {
      ++counts[static_cast<size_t>(it - configs.begin())];
    }
  }
  if (configs.size() > 1) return several(path, configs, counts);
  Selection sel;
  sel.config = configs[0];
  std::set<std::tuple<uint64_t, uint64_t, uint64_t, double, double>> seen;
  for (auto& c : cands) {
    const LoadPoint& p = c.point;
    if (!seen.emplace(p.isl, p.osl, p.concurrency, p.ttft_ms, p.tpot_ms).second) {
      ++sel.duplicates;
      continue;
    }
    sel.points.push_back(std::move(c.point));
  }
  return sel;
}

Expected<Selection> from_csv(const std::string& path, const Where& where) {
  io::LineReader in({path});
  io::Line line;
  std::vector<std::string> header;
  std::map<std::string, size_t> col;
  std::vector<Candidate> cands;
  auto need = [&](const char* name) -> std::optional<Error> {
    if (!col.count(name))
      return bad_data(
          fmt::format("{}: no column '{}' (a silicon-sample CSV needs isl, osl, "
                      "batch_size, silicon_ttft_ms, silicon_tpot_ms)",
                      path, name));
    return std::nullopt;
  };
  while (in.next(line)) {
    if (line.text.empty()) continue;
    auto f = split_csv(line.text);
    if (header.empty()) {
      header = f;
      for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
      for (const char* n : {"isl", "osl", "batch_size", "silicon_ttft_ms", "silicon_tpot_ms"})
        if (auto e = need(n)) return *e;
      for (const auto& [k, v] : where)
        if (!col.count(k)) return Error{fmt::format("--where {}={}: {} has no column '{}'", k, v, path, k), kExitUsage};
      continue;
    }
    if (f.size() != header.size())
      return bad_data(fmt::format("{}: {} fields, the header has {}", line.where(), f.size(), header.size()));
    if (!std::all_of(where.begin(), where.end(), [&](const auto& w) { return matches(f[col[w.first]], w.second); }))
      continue;
    Candidate c;
    auto num = [&](const char* name) -> Expected<double> {
      auto v = number(f[col[name]]);
      if (!v || *v < 0)
        return bad_data(fmt::format("{}: column {}: '{}' is not a number >= 0", line.where(), name, f[col[name]]));
      return *v;
    };
    auto isl = num("isl"), osl = num("osl"), bs = num("batch_size"), ttft = num("silicon_ttft_ms"),
         tpot = num("silicon_tpot_ms");
    for (auto* v : {&isl, &osl, &bs, &ttft, &tpot})
      if (!*v) return v->error();
    if (*isl < 1 || *osl < 2 || *bs < 1 || !(*ttft > 0) || !(*tpot > 0))
      return bad_data(fmt::format("{}: needs isl >= 1, osl >= 2, batch_size >= 1 and times > 0", line.where()));
    c.point = {static_cast<uint64_t>(*isl),
               static_cast<uint64_t>(*osl),
               static_cast<uint64_t>(*bs),
               *ttft,
               *tpot,
               1,
               line.where()};
    uint32_t gpus = 1;
    for (const char* n : {"tp_size", "pp_size", "attention_dp_size"})
      if (col.count(n))
        if (auto v = number(f[col[n]]); v && *v >= 1) gpus *= static_cast<uint32_t>(*v);
    c.point.gpus = gpus;
    for (size_t i = 0; i < header.size(); ++i)
      if (!kPerRow.count(header[i])) c.config.emplace_back(header[i], f[i]);
    cands.push_back(std::move(c));
  }
  if (header.empty()) return bad_data(fmt::format("{}: empty file", path));
  return one_config(path, std::move(cands));
}

// request_end rows -> closed-loop runs.
Expected<Selection> from_request_end(const std::string& path, const Where& where, uint32_t gpus) {
  struct Req {
    double start, end, ttft, itl;
  };
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::vector<Req>> groups;
  io::LineReader in({path});
  io::Line line;
  for (const auto& [k, v] : where)
    if (k != "model" && k != "isl" && k != "osl" && k != "concurrency")
      return Error{fmt::format("--where {}={}: request_end rows have the columns model, isl, osl, concurrency", k, v),
                   kExitUsage};
  while (in.next(line)) {
    if (line.text.empty()) continue;
    Json j = Json::parse(line.text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad_data(fmt::format("{}: not a JSON object", line.where()));
    if (j.value("event_type", std::string()) != "request_end") continue;
    const Json& d = j.contains("dyn") && j["dyn"].is_object() ? j["dyn"] : Json::object();
    if (d.value("status", std::string("ok")) != "ok" || d.value("warmup", false)) continue;
    if (!j.contains("request") || !j["request"].is_object()) continue;
    const Json& r = j["request"];
    auto num = [&r](const char* k) -> std::optional<double> {
      if (!r.contains(k) || !r[k].is_number()) return std::nullopt;
      return r[k].get<double>();
    };
    auto in_tok = num("input_tokens"), out_tok = num("output_tokens"), start = num("request_received_ms"),
         total = num("total_time_ms"), ttft = num("ttft_ms"), itl = num("avg_itl_ms");
    if (!in_tok || !out_tok || !start || !total || !ttft || !itl || *out_tok < 2) continue;
    groups[{r.value("model", std::string()), static_cast<uint64_t>(*in_tok), static_cast<uint64_t>(*out_tok)}]
        .push_back({*start, *start + *total, *ttft, *itl});
  }
  std::vector<Candidate> cands;
  for (auto& [key, reqs] : groups) {
    std::sort(reqs.begin(), reqs.end(), [](const Req& a, const Req& b) { return a.start < b.start; });
    // Runs: requests connected by overlap in time, a pause shorter than kBridgeMs bridged (a
    // closed-loop client sends its next request a round trip after the last one ended).
    size_t i = 0;
    while (i < reqs.size()) {
      size_t j = i;
      double reach = reqs[i].end;
      while (j + 1 < reqs.size() && reqs[j + 1].start < reach + kBridgeMs) reach = std::max(reach, reqs[++j].end);
      std::vector<std::pair<double, int>> edges;  // (time, +1 start / -1 end); ends first at a tie
      double ttft = 0, itl = 0;
      for (size_t k = i; k <= j; ++k) {
        edges.emplace_back(reqs[k].start, 1);
        edges.emplace_back(reqs[k].end, -1);
        ttft += reqs[k].ttft;
        itl += reqs[k].itl;
      }
      std::sort(edges.begin(), edges.end());
      // The concurrency: the number in flight for the longest time in all (the peak would count
      // a request that starts in the millisecond its predecessor ended, as logged, twice).
      std::map<int, double> held;
      int live = 0;
      for (size_t k = 0; k + 1 < edges.size(); ++k) {
        live += edges[k].second;
        held[live] += edges[k + 1].first - edges[k].first;
      }
      int concurrency = 0;
      double longest = -1;
      for (const auto& [n, t] : held)
        if (t > longest) concurrency = n, longest = t;
      const double n = static_cast<double>(j - i + 1);
      Candidate c;
      c.point = {std::get<1>(key),
                 std::get<2>(key),
                 static_cast<uint64_t>(concurrency),
                 ttft / n,
                 itl / n,
                 gpus,
                 fmt::format("{}: {} requests", path, j - i + 1)};
      c.config = {{"model", std::get<0>(key)}};
      const std::map<std::string, std::string> cols = {{"model", std::get<0>(key)},
                                                       {"isl", std::to_string(c.point.isl)},
                                                       {"osl", std::to_string(c.point.osl)},
                                                       {"concurrency", std::to_string(concurrency)}};
      if (std::all_of(where.begin(), where.end(), [&](const auto& w) { return matches(cols.at(w.first), w.second); }))
        cands.push_back(std::move(c));
      i = j + 1;
    }
  }
  return one_config(path, std::move(cands));
}

}  // namespace

double LoadPoint::tps_gpu() const {
  return 1000.0 * static_cast<double>(concurrency) / tpot_ms / static_cast<double>(gpus ? gpus : 1);
}

std::string Selection::column(const std::string& name) const {
  for (const auto& [k, v] : config)
    if (k == name) return v;
  return {};
}

Expected<std::pair<std::string, std::string>> parse_where(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return Error{fmt::format("--where '{}': expected COLUMN=VALUE", text), kExitUsage};
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

Expected<Selection> select_points(const std::string& path, const Where& where, uint32_t gpus) {
  std::error_code ec;
  if (path != "-" && !std::filesystem::is_regular_file(path, ec))
    return Error{fmt::format("{}: no such file", path), kExitIo};
  bool json = false;
  {
    io::LineReader peek({path});
    io::Line line;
    while (peek.next(line))
      if (!line.text.empty()) {
        json = line.text.front() == '{';
        break;
      }
  }
  return json ? from_request_end(path, where, gpus) : from_csv(path, where);
}

std::vector<std::pair<uint64_t, uint64_t>> pairs_of(const std::vector<LoadPoint>& points) {
  std::set<std::pair<uint64_t, uint64_t>> s;
  for (const auto& p : points) s.emplace(p.isl, p.osl);
  return {s.begin(), s.end()};
}

}  // namespace dyn::fidelity
