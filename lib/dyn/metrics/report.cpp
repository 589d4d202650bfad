// Run-level metrics and their renderings (SPEC 7; AIPerf's export shapes).
#include "dyn/metrics/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dyn/io/output.h"
#include "dyn/tokens/hash.h"

namespace dyn::metrics {
namespace {

struct Def {
  const char* tag;
  const char* header;
  const char* unit;
  bool larger;
};

// Per-request metrics in report order (AIPerf tags and headers where AIPerf has the metric).
constexpr Def kTtft{"time_to_first_token", "Time to First Token", "ms", false};
constexpr Def kTtst{"time_to_second_token", "Time to Second Token", "ms", false};
constexpr Def kLatency{"request_latency", "Request Latency", "ms", false};
constexpr Def kItl{"inter_token_latency", "Inter Token Latency", "ms", false};
constexpr Def kIcl{"inter_chunk_latency", "Inter Chunk Latency", "ms", false};
// Issue 21.4: kItl keeps AIPerf's definition (parity); this one excludes the first chunk's tokens.
constexpr Def kItlTok{"inter_token_latency_per_token", "Inter Token Latency per Token (first chunk's tokens excluded)",
                      "ms", false};
constexpr Def kItlTokEst{"inter_token_latency_per_token",
                         "Inter Token Latency per Token (estimated: no per-chunk usage)", "ms", false};
constexpr Def kPerUser{"output_token_throughput_per_user", "Output Token Throughput Per User", "tokens/sec/user", true};
constexpr Def kIsl{"input_sequence_length", "Input Sequence Length", "tokens", false};
constexpr Def kOsl{"output_sequence_length", "Output Sequence Length", "tokens", false};
constexpr Def kOtc{"output_token_count", "Output Token Count", "tokens", false};
constexpr Def kRtc{"reasoning_token_count", "Reasoning Token Count", "tokens", false};
constexpr Def kCached{"cached_tokens", "Cached Tokens", "tokens", false};
constexpr Def kLag{"schedule_lag", "Schedule Lag", "ms", false};

std::string title_from_tag(const std::string& tag) {
  std::string out;
  bool up = true;
  for (char c : tag) {
    if (c == '_') {
      out += ' ';
      up = true;
    } else {
      out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
  }
  return out;
}

// Display-unit value of a goodput metric for one request; nullopt when the request lacks it.
std::optional<double> slo_value(const RequestRecord& r, const std::string& tag, double to_ms) {
  auto ms = [&](const std::optional<double>& v) -> std::optional<double> {
    if (!v) return std::nullopt;
    return *v * to_ms;
  };
  if (tag == kTtft.tag) return ms(r.ttft);
  if (tag == kTtst.tag) return ms(r.ttst);
  if (tag == kLatency.tag) return ms(r.latency);
  if (tag == kItl.tag) return ms(r.itl);
  if (tag == kPerUser.tag) return r.per_user_tps;
  return std::nullopt;
}

bool slo_larger_is_better(const std::string& tag) { return tag == kPerUser.tag; }

bool numeric_key(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Worker ids sort as numbers when they are numbers ("2" before "10").
bool worker_less(const std::string& a, const std::string& b) {
  if (numeric_key(a) && numeric_key(b)) return std::stoll(a) < std::stoll(b);
  if (numeric_key(a) != numeric_key(b)) return numeric_key(a);
  return a < b;
}

Json stats_json(const Series& s) {
  Json j = Json::object();
  j["unit"] = s.unit;
  j["avg"] = s.stats.avg;
  for (std::size_t i = 0; i < std::size(kPercentiles); ++i)
    j[fmt::format("p{}", static_cast<int>(kPercentiles[i]))] = s.stats.p[i];
  j["min"] = s.stats.min;
  j["max"] = s.stats.max;
  j["std"] = s.stats.std;
  j["count"] = s.stats.count;
  return j;
}

std::string csv_label(const std::string& header, const std::string& unit) {
  if (unit.empty() || unit == "count" || unit == "requests") return header;
  return header + " (" + unit + ")";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string pad_left(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string pad_right(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

// Renders rows as an aligned text table: first column left-aligned, the rest right-aligned.
std::string render_table(const std::string& title, const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return {};
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out = title.empty() ? "" : title + "\n";
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (std::size_t i = 0; i < rows[k].size(); ++i) {
      if (i) line += "  ";
      line += i == 0 ? pad_right(rows[k][i], width[i]) : pad_left(rows[k][i], width[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (k == 0) {
      std::size_t total = 0;
      for (std::size_t i = 0; i < width.size(); ++i) total += width[i] + (i ? 2 : 0);
      out += std::string(total, '-') + "\n";
    }
  }
  return out;
}

}  // namespace

std::string format_number(double v, int decimals) {
  if (std::isnan(v)) return "-";
  std::string s = fmt::format("{:.{}f}", std::fabs(v), decimals);
  const auto dot = s.find('.');
  std::string intpart = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string grouped;
  for (std::size_t i = 0; i < intpart.size(); ++i) {
    if (i && (intpart.size() - i) % 3 == 0) grouped += ',';
    grouped += intpart[i];
  }
  return (v < 0 && s.find_first_not_of("0.,") != std::string::npos ? "-" : "") + grouped + frac;
}

const Series* Report::find_series(std::string_view tag) const {
  for (const auto& s : series)
    if (s.tag == tag) return &s;
  return nullptr;
}

const Scalar* Report::find_scalar(std::string_view tag) const {
  for (const auto& s : scalars)
    if (s.tag == tag) return &s;
  return nullptr;
}

Expected<std::vector<Slo>> parse_goodput(const std::string& text) {
  static const std::map<std::string, std::string> kAlias = {
      {"ttft", kTtft.tag},       {"ttst", kTtst.tag},          {"itl", kItl.tag},           {"e2e", kLatency.tag},
      {"latency", kLatency.tag}, {"tpot", kItl.tag},           {kTtft.tag, kTtft.tag},      {kTtst.tag, kTtst.tag},
      {kItl.tag, kItl.tag},      {kLatency.tag, kLatency.tag}, {kPerUser.tag, kPerUser.tag}};
  std::vector<Slo> out;
  std::string norm = text;
  std::replace(norm.begin(), norm.end(), ',', ' ');
  std::size_t pos = 0;
  while (pos < norm.size()) {
    while (pos < norm.size() && norm[pos] == ' ') ++pos;
    if (pos >= norm.size()) break;
    std::size_t end = norm.find(' ', pos);
    if (end == std::string::npos) end = norm.size();
    std::string item = norm.substr(pos, end - pos);
    pos = end;
    const auto colon = item.find(':');
    if (colon == std::string::npos) return Error{fmt::format("--goodput: '{}' is not metric:value", item), kExitUsage};
    const std::string name = item.substr(0, colon), value = item.substr(colon + 1);
    auto it = kAlias.find(name);
    if (it == kAlias.end())
      return Error{fmt::format("--goodput: unknown metric '{}' (time_to_first_token, time_to_second_token, "
                               "inter_token_latency, request_latency, output_token_throughput_per_user)",
                               name),
                   kExitUsage};
    char* endp = nullptr;
    const double v = std::strtod(value.c_str(), &endp);
    if (value.empty() || *endp != '\0' || !std::isfinite(v) || v < 0)
      return Error{fmt::format("--goodput: '{}' is not a non-negative number", value), kExitUsage};
    out.push_back({it->second, v});
  }
  if (out.empty()) return Error{"--goodput: no metric:value pairs given", kExitUsage};
  return out;
}

namespace {

// ReportOptions::references: the rows that have blocks and times, through the pooled caches.
template <class Scalar>
void reference_scalars(const std::vector<const RequestRecord*>& rows, const ReportOptions& options, Scalar&& scalar) {
  std::vector<tokens::ReferenceRequest> v;
  double input = 0, cached = 0;
  for (const RequestRecord* r : rows) {
    if (!r->start_ns || !r->end_ns) continue;
    const auto isl = static_cast<uint64_t>(std::max(0.0, *r->isl));
    // A request that waited in admission held no KV until it was dispatched.
    const double start_ms = static_cast<double>(*r->start_ns) / 1e6 + r->pause_ms.value_or(0);
    v.push_back({start_ms, static_cast<double>(*r->end_ns) / 1e6, isl,
                 tokens::sequence_from_ids(r->hash_ids, r->hash_block_size, false, isl, options.kv_block_size)});
    input += static_cast<double>(isl);
    cached += r->cached.value_or(0);
  }
  if (input <= 0) return;
  struct Tags {
    tokens::ReferencePolicy policy;
    const char *rate, *rate_header, *ratio, *ratio_header;
  };
  static constexpr Tags kTags[] = {
      {tokens::ReferencePolicy::kLru, "pooled_cache_hit_rate", "Pooled LRU Cache Hit Rate", "hit_rate_vs_pooled",
       "Hit Rate / Pooled LRU"},
      {tokens::ReferencePolicy::kBelady, "belady_cache_hit_rate", "Belady Cache Hit Rate", "hit_rate_vs_belady",
       "Hit Rate / Belady"},
  };
  for (tokens::ReferencePolicy p : options.references)
    for (const Tags& t : kTags) {
      if (t.policy != p) continue;
      const double ref =
          static_cast<double>(tokens::reference_hit_tokens(v, options.reference_kv_blocks, options.kv_block_size, p));
      scalar(t.rate, t.rate_header, "percent", 100.0 * ref / input);
      if (ref > 0) scalar(t.ratio, t.ratio_header, "ratio", cached / ref);
    }
}

// Valid requests in completion order (stable; requests without an end time last).
std::vector<const RequestRecord*> valid_by_end(const std::vector<const RequestRecord*>& all) {
  std::vector<const RequestRecord*> valid;
  for (const RequestRecord* r : all)
    if (r->valid()) valid.push_back(r);
  std::stable_sort(valid.begin(), valid.end(), [](const RequestRecord* a, const RequestRecord* b) {
    if (a->end_ns.has_value() != b->end_ns.has_value()) return a->end_ns.has_value();
    return a->end_ns && *a->end_ns < *b->end_ns;
  });
  return valid;
}

// The per-request series of SPEC 7 in report order, then AIPerf metrics this toolkit does not
// model (in first-seen order).
void add_request_series(Report& rep, const std::vector<const RequestRecord*>& valid, double to_ms) {
  auto add_series = [&](const Def& d, auto get, double scale) {
    std::vector<double> v;
    for (const RequestRecord* r : valid) get(*r, v);
    if (v.empty()) return;
    rep.series.push_back({d.tag, d.header, d.unit, d.larger, compute_stats(v, scale)});
  };
  auto opt = [](std::optional<double> RequestRecord::*f) {
    return [f](const RequestRecord& r, std::vector<double>& v) {
      if (r.*f) v.push_back(*(r.*f));
    };
  };
  add_series(kTtft, opt(&RequestRecord::ttft), to_ms);
  add_series(kTtst, opt(&RequestRecord::ttst), to_ms);
  add_series(kLatency, opt(&RequestRecord::latency), to_ms);
  add_series(kItl, opt(&RequestRecord::itl), to_ms);
  {
    bool estimated = false;
    for (const RequestRecord* r : valid) estimated = estimated || (r->itl_per_token && r->itl_per_token_estimated);
    add_series(estimated ? kItlTokEst : kItlTok, opt(&RequestRecord::itl_per_token), to_ms);
  }
  add_series(
      kIcl,
      [](const RequestRecord& r, std::vector<double>& v) {
        v.insert(v.end(), r.inter_chunk.begin(), r.inter_chunk.end());
      },
      to_ms);
  add_series(kPerUser, opt(&RequestRecord::per_user_tps), 1.0);
  add_series(kIsl, opt(&RequestRecord::isl), 1.0);
  add_series(kOsl, opt(&RequestRecord::osl), 1.0);
  add_series(kOtc, opt(&RequestRecord::output_token_count), 1.0);
  add_series(kRtc, opt(&RequestRecord::reasoning_token_count), 1.0);
  add_series(kCached, opt(&RequestRecord::cached), 1.0);
  add_series(kLag, opt(&RequestRecord::schedule_lag_ms), 1.0);
  std::vector<std::pair<std::string, std::string>> extra_tags;
  for (const RequestRecord* r : valid)
    for (const auto& [tag, unit, vals] : r->extra)
      // Named capture: clang before 16 cannot capture a structured binding (the fuzz build).
      if (std::none_of(extra_tags.begin(), extra_tags.end(), [&name = tag](const auto& e) { return e.first == name; }))
        extra_tags.emplace_back(tag, unit);
  for (const auto& [tag, unit] : extra_tags) {
    std::vector<double> v;
    for (const RequestRecord* r : valid)
      for (const auto& [t, u, vals] : r->extra)
        if (t == tag) v.insert(v.end(), vals.begin(), vals.end());
    rep.series.push_back({tag, title_from_tag(tag), unit, false, compute_stats(v)});
  }
}

// Theoretical hit rate (SPEC 7): an infinite prefix cache of the engines' blocks, requests in
// order of start. Rows that record their ids' block size (dyn.block_size) are mapped to engine
// blocks of options.kv_block_size exactly as the simulator maps them (tokens::sequence_from_ids):
// the figure is the share of input tokens in full engine blocks whose sequence hash an earlier
// request had, so no run of engines with that block size can beat it. Counting whole hash-id
// blocks instead (512 tokens, a trailing partial block counted whole and never hit) let a run
// beat its own "theoretical" figure (issue 18). Rows without a block size (Dynamo's
// input_sequence_hashes) keep the share of hash ids seen before, their only defined meaning.
// Then the reference yardsticks (--reference) over the same rows.
template <class Scalar>
void add_cache_yardsticks(const std::vector<const RequestRecord*>& valid, const ReportOptions& options,
                          const Scalar& scalar) {
  std::vector<const RequestRecord*> by_start;
  bool sized = options.kv_block_size > 0;
  for (const RequestRecord* r : valid)
    if (!r->hash_ids.empty()) {
      by_start.push_back(r);
      sized = sized && r->hash_block_size > 0 && r->isl;
    }
  std::stable_sort(by_start.begin(), by_start.end(), [](const RequestRecord* a, const RequestRecord* b) {
    return a->start_ns.value_or(0) < b->start_ns.value_or(0);
  });
  tokens::InfiniteCache infinite;
  double hits = 0, total = 0;
  for (const RequestRecord* r : by_start) {
    if (sized) {
      const auto isl = static_cast<uint64_t>(std::max(0.0, *r->isl));
      total += static_cast<double>(isl);
      hits += static_cast<double>(infinite.add(r->hash_ids, r->hash_block_size, isl, options.kv_block_size));
    } else {
      for (uint64_t h : r->hash_ids) {
        ++total;
        hits += infinite.add_id(h) ? 1 : 0;
      }
    }
  }
  if (total > 0) scalar("theoretical_cache_hit_rate", "Theoretical Cache Hit Rate", "percent", 100.0 * hits / total);
  if (sized && !options.references.empty()) reference_scalars(by_start, options, scalar);
}

// Requests meeting every SLO (SPEC 7 goodput).
uint64_t good_requests(const std::vector<const RequestRecord*>& valid, const std::vector<Slo>& slos, double to_ms) {
  uint64_t good = 0;
  for (const RequestRecord* r : valid) {
    bool ok = true;
    for (const Slo& s : slos) {
      auto v = slo_value(*r, s.tag, to_ms);
      if (!v || (slo_larger_is_better(s.tag) ? *v < s.value : *v > s.value)) {
        ok = false;
        break;
      }
    }
    good += ok ? 1 : 0;
  }
  return good;
}

// Run-level values (SPEC 7): counts, duration and throughputs, token totals, hit rates, goodput.
void add_run_scalars(Report& rep, const std::vector<const RequestRecord*>& all,
                     const std::vector<const RequestRecord*>& valid, const ReportOptions& options, double to_ms) {
  auto scalar = [&](const char* tag, const char* header, const char* unit, double v) {
    rep.scalars.push_back({tag, header, unit, v});
  };
  const double n_valid = static_cast<double>(valid.size());
  uint64_t n_errors = 0;
  for (const RequestRecord* r : all) n_errors += r->valid() ? 0 : 1;
  scalar("request_count", "Request Count", "requests", n_valid);
  scalar("error_request_count", "Error Request Count", "requests", static_cast<double>(n_errors));
  std::optional<int64_t> min_start, max_end;
  for (const RequestRecord* r : valid) {
    if (r->start_ns && (!min_start || *r->start_ns < *min_start)) min_start = r->start_ns;
    if (r->end_ns && (!max_end || *r->end_ns > *max_end)) max_end = r->end_ns;
  }
  auto sum_of = [&](std::optional<double> RequestRecord::*f, bool* any) {
    double s = 0;
    *any = false;
    for (const RequestRecord* r : valid)
      if (r->*f) {
        s += *(r->*f);
        *any = true;
      }
    return s;
  };
  bool any_isl = false, any_osl = false, any_otc = false, any_rtc = false, any_cached = false;
  const double total_isl = sum_of(&RequestRecord::isl, &any_isl);
  const double total_osl = sum_of(&RequestRecord::osl, &any_osl);
  const double total_otc = sum_of(&RequestRecord::output_token_count, &any_otc);
  const double total_rtc = sum_of(&RequestRecord::reasoning_token_count, &any_rtc);
  double cached_sum = 0, cached_input = 0;
  for (const RequestRecord* r : valid)
    if (r->cached && r->isl) {
      any_cached = true;
      cached_sum += *r->cached;
      cached_input += *r->isl;
    }
  std::optional<double> duration_s;
  if (min_start && max_end && *max_end > *min_start) {
    duration_s = static_cast<double>(*max_end - *min_start) / 1e9;
    scalar("min_request_timestamp", "Minimum Request Timestamp", "ns", static_cast<double>(*min_start));
    scalar("max_response_timestamp", "Maximum Response Timestamp", "ns", static_cast<double>(*max_end));
    scalar("benchmark_duration", "Benchmark Duration", "sec", *duration_s);
    scalar("request_throughput", "Request Throughput", "requests/sec", n_valid / *duration_s);
    if (any_osl) scalar("output_token_throughput", "Output Token Throughput", "tokens/sec", total_osl / *duration_s);
  }
  if (any_isl) scalar("total_isl", "Total Input Sequence Length", "tokens", total_isl);
  if (any_osl) scalar("total_osl", "Total Output Sequence Length", "tokens", total_osl);
  if (any_otc) scalar("total_output_tokens", "Total Output Tokens", "tokens", total_otc);
  if (any_rtc) scalar("total_reasoning_tokens", "Total Reasoning Tokens", "tokens", total_rtc);
  if (any_cached) {
    scalar("total_cached_tokens", "Total Cached Tokens", "tokens", cached_sum);
    if (cached_input > 0)
      scalar("prompt_cache_hit_rate", "Prompt Cache Hit Rate", "percent", 100.0 * cached_sum / cached_input);
  }
  add_cache_yardsticks(valid, options, scalar);
  if (!options.goodput.empty()) {
    const uint64_t good = good_requests(valid, options.goodput, to_ms);
    scalar("good_request_count", "Good Request Count", "requests", static_cast<double>(good));
    if (duration_s) scalar("goodput", "Goodput", "requests/sec", static_cast<double>(good) / *duration_s);
  }
}

// Errors by (code, type), first-seen order.
void add_errors(Report& rep, const std::vector<const RequestRecord*>& all) {
  for (const RequestRecord* r : all) {
    if (r->valid()) continue;
    auto it = std::find_if(rep.errors.begin(), rep.errors.end(), [&](const ErrorCount& e) {
      return e.info.code == r->error->code && e.info.type == r->error->type;
    });
    if (it == rep.errors.end()) rep.errors.push_back({*r->error, 1});
    else ++it->count;
  }
}

// One row per worker, workers in worker_less order.
void add_workers(Report& rep, const std::vector<const RequestRecord*>& all, double n_valid, double to_ms) {
  std::vector<std::string> keys;
  for (const RequestRecord* r : all)
    if (!r->worker.empty() && std::find(keys.begin(), keys.end(), r->worker) == keys.end()) keys.push_back(r->worker);
  std::sort(keys.begin(), keys.end(), worker_less);
  for (const auto& k : keys) {
    WorkerRow w;
    w.worker = k;
    std::vector<double> ttft, lat;
    bool cached_known = false;
    for (const RequestRecord* r : all) {
      if (r->worker != k) continue;
      if (!r->valid()) {
        ++w.errors;
        continue;
      }
      ++w.requests;
      if (r->ttft) ttft.push_back(*r->ttft);
      if (r->latency) lat.push_back(*r->latency);
      if (r->isl) w.input_tokens += *r->isl;
      if (r->cached && r->isl) {
        cached_known = true;
        w.cached_tokens += *r->cached;
      }
    }
    w.share_pct = n_valid > 0 ? 100.0 * static_cast<double>(w.requests) / n_valid : 0;
    w.ttft_ms = compute_stats(ttft, to_ms);
    w.latency_ms = compute_stats(lat, to_ms);
    if (cached_known && w.input_tokens > 0) w.hit_pct = 100.0 * w.cached_tokens / w.input_tokens;
    rep.workers.push_back(std::move(w));
  }
}

// One session's row from its turns (ordered by start).
SessionRow session_row(const std::string& id, const std::vector<const RequestRecord*>& turns, double to_ms) {
  SessionRow s;
  s.session_id = id;
  double ttft_sum = 0, lat_sum = 0, in = 0, cached = 0;
  uint64_t n_ttft = 0, n_lat = 0;
  bool cached_known = false;
  std::string prev;
  for (const RequestRecord* r : turns) {
    if (s.parent_session_id.empty()) s.parent_session_id = r->parent_session_id;
    ++s.turns;
    if (!r->valid()) ++s.errors;
    if (!r->worker.empty()) {
      if (std::find(s.workers.begin(), s.workers.end(), r->worker) == s.workers.end()) s.workers.push_back(r->worker);
      if (!prev.empty() && prev != r->worker) ++s.worker_changes;
      prev = r->worker;
    }
    if (r->start_ns && (!s.first_start_ms || *r->start_ns / 1e6 < *s.first_start_ms))
      s.first_start_ms = *r->start_ns / 1e6;
    if (r->end_ns && (!s.last_end_ms || *r->end_ns / 1e6 > *s.last_end_ms)) s.last_end_ms = *r->end_ns / 1e6;
    if (!r->valid()) continue;
    if (r->ttft) {
      ttft_sum += *r->ttft * to_ms;
      ++n_ttft;
    }
    if (r->latency) {
      lat_sum += *r->latency * to_ms;
      ++n_lat;
    }
    if (r->isl) in += *r->isl;
    if (r->cached && r->isl) {
      cached_known = true;
      cached += *r->cached;
    }
  }
  if (n_ttft) s.ttft_avg_ms = ttft_sum / static_cast<double>(n_ttft);
  if (n_lat) s.latency_avg_ms = lat_sum / static_cast<double>(n_lat);
  if (cached_known && in > 0) s.hit_pct = 100.0 * cached / in;
  return s;
}

// Per session, sessions in order of first start, turns by start.
void add_sessions(Report& rep, const std::vector<const RequestRecord*>& all, double to_ms) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const RequestRecord*>> turns;
  for (const RequestRecord* r : all) {
    if (r->session_id.empty()) continue;
    auto& v = turns[r->session_id];
    if (v.empty()) keys.push_back(r->session_id);
    v.push_back(r);
  }
  for (auto& [k, v] : turns)
    std::stable_sort(v.begin(), v.end(), [](const RequestRecord* a, const RequestRecord* b) {
      return a->start_ns.value_or(0) < b->start_ns.value_or(0);
    });
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return turns[a].front()->start_ns.value_or(0) < turns[b].front()->start_ns.value_or(0);
  });
  for (const auto& k : keys) rep.sessions.push_back(session_row(k, turns[k], to_ms));
}

}  // namespace

Report build_report(const RequestSet& set, const ReportOptions& options) {
  Report rep;
  rep.kind = set.kind;
  rep.goodput = options.goodput;
  rep.warmup_skipped = set.warmup_skipped;
  const double to_ms = set.time_to_ms();
  std::vector<const RequestRecord*> all;
  for (const auto& r : set.requests) all.push_back(&r);
  const std::vector<const RequestRecord*> valid = valid_by_end(all);
  add_request_series(rep, valid, to_ms);
  add_run_scalars(rep, all, valid, options, to_ms);
  add_errors(rep, all);
  add_workers(rep, all, static_cast<double>(valid.size()), to_ms);
  add_sessions(rep, all, to_ms);
  return rep;
}

Json report_json(const Report& rep) {
  Json j = Json::object();
  for (const auto& s : rep.series) j[s.tag] = stats_json(s);
  for (const auto& s : rep.scalars) j[s.tag] = Json{{"unit", s.unit}, {"avg", s.value}};
  Json errs = Json::array();
  for (const auto& e : rep.errors)
    errs.push_back(Json{{"error_details", {{"code", e.info.code}, {"type", e.info.type}, {"message", e.info.message}}},
                        {"count", e.count}});
  j["error_summary"] = errs;
  Json dyn = Json::object();
  dyn["row_kind"] = rep.kind == RowKind::kAiperf ? "aiperf" : "request_end";
  dyn["warmup_rows_skipped"] = rep.warmup_skipped;
  if (!rep.goodput.empty()) {
    Json g = Json::object();
    for (const auto& s : rep.goodput) g[s.tag] = s.value;
    dyn["goodput_slos"] = g;
  }
  Json workers = Json::array();
  for (const auto& w : rep.workers) {
    Json o = {{"worker", w.worker}, {"requests", w.requests}, {"errors", w.errors}, {"share_pct", w.share_pct}};
    o["ttft_avg_ms"] = w.ttft_ms.count ? Json(w.ttft_ms.avg) : Json();
    o["ttft_p50_ms"] = w.ttft_ms.count ? Json(w.ttft_ms.pct(50)) : Json();
    o["ttft_p99_ms"] = w.ttft_ms.count ? Json(w.ttft_ms.pct(99)) : Json();
    o["latency_avg_ms"] = w.latency_ms.count ? Json(w.latency_ms.avg) : Json();
    o["latency_p99_ms"] = w.latency_ms.count ? Json(w.latency_ms.pct(99)) : Json();
    o["input_tokens"] = w.input_tokens;
    o["cached_tokens"] = w.cached_tokens;
    o["hit_pct"] = w.hit_pct ? Json(*w.hit_pct) : Json();
    workers.push_back(o);
  }
  dyn["per_worker"] = workers;
  Json sessions = Json::array();
  for (const auto& s : rep.sessions) {
    Json o = {{"session_id", s.session_id}};
    o["parent_session_id"] = s.parent_session_id.empty() ? Json() : Json(s.parent_session_id);
    o["turns"] = s.turns;
    o["errors"] = s.errors;
    o["workers"] = s.workers;
    o["worker_changes"] = s.worker_changes;
    o["ttft_avg_ms"] = s.ttft_avg_ms ? Json(*s.ttft_avg_ms) : Json();
    o["latency_avg_ms"] = s.latency_avg_ms ? Json(*s.latency_avg_ms) : Json();
    o["hit_pct"] = s.hit_pct ? Json(*s.hit_pct) : Json();
    o["first_start_unix_ms"] = s.first_start_ms ? Json(*s.first_start_ms) : Json();
    o["last_end_unix_ms"] = s.last_end_ms ? Json(*s.last_end_ms) : Json();
    sessions.push_back(o);
  }
  dyn["per_session"] = sessions;
  j["dyn"] = dyn;
  return j;
}

std::string report_csv(const Report& rep) {
  // AIPerf writes with Python's csv module: CRLF line ends, rows sorted by tag.
  std::string out;
  std::vector<const Series*> series;
  for (const auto& s : rep.series) series.push_back(&s);
  std::sort(series.begin(), series.end(), [](const Series* a, const Series* b) { return a->tag < b->tag; });
  std::vector<const Scalar*> scalars;
  for (const auto& s : rep.scalars) scalars.push_back(&s);
  std::sort(scalars.begin(), scalars.end(), [](const Scalar* a, const Scalar* b) { return a->tag < b->tag; });
  if (!series.empty()) {
    out += "Metric,avg,min,max";
    for (double p : kPercentiles) out += fmt::format(",p{}", static_cast<int>(p));
    out += ",std\r\n";
    for (const Series* s : series) {
      out += csv_field(csv_label(s->header, s->unit));
      out += fmt::format(",{:.2f},{:.2f},{:.2f}", s->stats.avg, s->stats.min, s->stats.max);
      for (double v : s->stats.p) out += fmt::format(",{:.2f}", v);
      out += fmt::format(",{:.2f}\r\n", s->stats.std);
    }
    if (!scalars.empty()) out += "\r\n";
  }
  if (!scalars.empty()) {
    out += "Metric,Value\r\n";
    for (const Scalar* s : scalars)
      out += csv_field(csv_label(s->header, s->unit)) + fmt::format(",{:.2f}\r\n", s->value);
  }
  return out;
}

std::string report_table(const Report& rep, bool per_session) {
  std::string out;
  std::vector<std::vector<std::string>> rows{{"Metric", "avg", "min", "max", "p99", "p90", "p50", "std"}};
  for (const auto& s : rep.series) {
    const auto& st = s.stats;
    rows.push_back({csv_label(s.header, s.unit), format_number(st.avg), format_number(st.min), format_number(st.max),
                    format_number(st.pct(99)), format_number(st.pct(90)), format_number(st.pct(50)),
                    format_number(st.std)});
  }
  for (const auto& s : rep.scalars) {
    if (s.tag == "min_request_timestamp" || s.tag == "max_response_timestamp") continue;
    rows.push_back({csv_label(s.header, s.unit), format_number(s.value), "", "", "", "", "", ""});
  }
  out += render_table("", rows);
  if (!rep.errors.empty()) {
    std::vector<std::vector<std::string>> er{{"Error", "code", "count", "message"}};
    for (const auto& e : rep.errors)
      er.push_back({e.info.type, std::to_string(e.info.code), std::to_string(e.count), e.info.message});
    out += "\n" + render_table("", er);
  }
  if (!rep.workers.empty()) {
    std::vector<std::vector<std::string>> wr{
        {"Worker", "requests", "share %", "errors", "TTFT avg ms", "TTFT p99 ms", "latency avg ms", "hit %"}};
    for (const auto& w : rep.workers)
      wr.push_back({w.worker, std::to_string(w.requests), format_number(w.share_pct, 1), std::to_string(w.errors),
                    w.ttft_ms.count ? format_number(w.ttft_ms.avg) : "-",
                    w.ttft_ms.count ? format_number(w.ttft_ms.pct(99)) : "-",
                    w.latency_ms.count ? format_number(w.latency_ms.avg) : "-",
                    w.hit_pct ? format_number(*w.hit_pct, 1) : "-"});
    out += "\n" + render_table("", wr);
  }
  if (per_session && !rep.sessions.empty()) {
    std::vector<std::vector<std::string>> sr{
        {"Session", "turns", "errors", "workers", "changes", "TTFT avg ms", "latency avg ms", "hit %"}};
    for (const auto& s : rep.sessions) {
      std::string ws;
      for (const auto& w : s.workers) ws += (ws.empty() ? "" : ",") + w;
      sr.push_back({s.session_id, std::to_string(s.turns), std::to_string(s.errors), ws.empty() ? "-" : ws,
                    std::to_string(s.worker_changes), s.ttft_avg_ms ? format_number(*s.ttft_avg_ms) : "-",
                    s.latency_avg_ms ? format_number(*s.latency_avg_ms) : "-",
                    s.hit_pct ? format_number(*s.hit_pct, 1) : "-"});
    }
    out += "\n" + render_table("", sr);
  }
  return out;
}

Json aiperf_record(const RequestRecord& r, RowKind kind) {
  if (kind == RowKind::kAiperf) return r.source;
  Json md = Json::object();
  md["x_request_id"] = r.request_id;
  md["x_correlation_id"] = r.session_id.empty() ? Json() : Json(r.session_id);
  md["conversation_id"] = r.session_id.empty() ? Json() : Json(r.session_id);
  md["turn_index"] = r.turn.value_or(0);
  md["request_start_ns"] = r.start_ns ? Json(*r.start_ns) : Json();
  md["request_end_ns"] = r.end_ns ? Json(*r.end_ns) : Json();
  md["worker_id"] = r.worker.empty() ? Json() : Json(r.worker);
  md["benchmark_phase"] = "profiling";
  md["was_cancelled"] = r.error && r.error->code == 499;
  Json m = Json::object();
  auto put = [&](const char* tag, const std::optional<double>& v, const char* unit) {
    if (v) m[tag] = Json{{"value", *v}, {"unit", unit}};
  };
  if (!r.error) {
    put(kIsl.tag, r.isl, "tokens");
    put(kTtft.tag, r.ttft, "ms");
    put(kTtst.tag, r.ttst, "ms");
    put(kLatency.tag, r.latency, "ms");
    if (!r.inter_chunk.empty()) m[kIcl.tag] = Json{{"value", r.inter_chunk}, {"unit", "ms"}};
    put(kOsl.tag, r.osl, "tokens");
    put(kItl.tag, r.itl, "ms");
    put(kPerUser.tag, r.per_user_tps, "tokens/sec/user");
    put(kCached.tag, r.cached, "tokens");
  } else {
    put("error_isl", r.isl, "tokens");
  }
  Json err;
  if (r.error) err = Json{{"code", r.error->code}, {"type", r.error->type}, {"message", r.error->message}};
  return Json{{"metadata", md}, {"metrics", m}, {"error", err}};
}

void write_aiperf_export(const RequestSet& set, const Report& rep, const std::string& dir, const Json& input_config) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Fatal(kExitIo, dir + ": cannot create directory: " + ec.message());
  {
    io::Output out(dir + "/profile_export.jsonl");
    for (const auto& r : set.requests) out.line(aiperf_record(r, set.kind).dump());
    out.close();
  }
  {
    io::Output out(dir + "/profile_export_aiperf.json");
    Json j = report_json(rep);
    if (!input_config.is_null()) j["input_config"] = input_config;
    out.write(j.dump(2));
    out.write("\n");
    out.close();
  }
  {
    io::Output out(dir + "/profile_export_aiperf.csv");
    out.write(report_csv(rep));
    out.close();
  }
}

}  // namespace dyn::metrics
