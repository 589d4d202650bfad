// Parsing request rows (request_end records and AIPerf records) into per-request metrics.
#include "dyn/metrics/request.h"

#include <cmath>
#include <cstdint>

#include "dyn/base/error.h"
#include "dyn/records/reader.h"
#include "dyn/records/record.h"

namespace dyn::metrics {
namespace {

using records::as_number;
using records::as_u64;
using records::find_path;

std::optional<double> num_at(const Json& row, std::string_view path) {
  const Json* v = find_path(row, path);
  return v ? as_number(*v) : std::nullopt;
}

std::string text_of(const Json* v) {
  if (!v || v->is_null()) return {};
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}

std::vector<uint64_t> u64_array(const Json* v) {
  std::vector<uint64_t> out;
  if (!v || !v->is_array()) return out;
  out.reserve(v->size());
  for (const Json& x : *v) {
    if (auto u = as_u64(x)) out.push_back(*u);
    else return {};
  }
  return out;
}

// A number read from a row as int64 when it is finite and fits, else nullopt: such times and codes
// are bad data, and converting them would be undefined behaviour (found by fuzz_request_end).
std::optional<int64_t> to_i64(double v) {
  if (!(v > -9.2e18 && v < 9.2e18)) return std::nullopt;
  return std::llround(v);
}

std::optional<int64_t> ms_to_ns(double ms) { return to_i64(ms * 1e6); }

// a + b and a - b, nullopt on overflow. GCC 12 at -O3 in the unity build warns that the optional
// arguments' payloads "may be used uninitialized" once inlined into a caller that builds them with
// a conditional; every read is guarded by has_value(), so the warning is a known false positive.
#if defined(__GNUC__) && !defined(__clang__)  // clang (the fuzz build) has no such warning
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
std::optional<int64_t> add_ns(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t r;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> sub_ns(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t r;
  if (!a || !b || __builtin_sub_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Exact integer ns from a JSON number in ns (u64 kept exact up to 2^63-1; floats rounded).
std::optional<int64_t> exact_ns(const Json& v) {
  if (auto u = as_u64(v)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (auto d = as_number(v)) return to_i64(*d);
  return std::nullopt;
}

// AIPerf time values in `unit` to integer ns, as AIPerf held them before converting for display.
double to_ns(double v, const std::string& unit) {
  if (unit == "ns") return v;
  // std::round = llround for every value an int64 holds, and stays defined beyond.
  if (unit == "us") return std::round(v * 1e3);
  if (unit == "sec" || unit == "s") return std::round(v * 1e9);
  return std::round(v * 1e6);  // ms, AIPerf's display unit for latencies
}

void derive_itl(RequestRecord& r, double time_to_s) {
  if (r.latency && r.ttft && r.osl && *r.osl >= 2) r.itl = (*r.latency - *r.ttft) / (*r.osl - 1);
  if (r.itl && *r.itl > 0) r.per_user_tps = 1.0 / (*r.itl * time_to_s);
}

}  // namespace

bool is_aiperf_record(const Json& row) {
  return row.is_object() && !row.contains("event_type") && row.contains("metrics") && row["metrics"].is_object() &&
         row.contains("metadata");
}

std::optional<RequestRecord> parse_request_end(const Json& row, std::string where, bool* warmup) {
  if (warmup) *warmup = false;
  const Json* et = find_path(row, "event_type");
  if (!et || !et->is_string() || et->get<std::string>() != "request_end") return std::nullopt;
  if (const Json* w = find_path(row, "dyn.warmup"); w && w->is_boolean() && w->get<bool>()) {
    if (warmup) *warmup = true;
    return std::nullopt;
  }
  RequestRecord r;
  r.where = std::move(where);
  r.request_id = text_of(find_path(row, "request.request_id"));
  r.session_id = records::session_of(row);
  r.parent_session_id = records::parent_of(row);
  r.worker = records::worker_of(row);
  if (const Json* t = find_path(row, "dyn.turn"); t && t->is_number_integer()) r.turn = t->get<int64_t>();
  r.binding = text_of(find_path(row, "dyn.binding"));

  const std::string status = text_of(find_path(row, "dyn.status"));
  if (status == "error" || status == "cancelled") {
    ErrorInfo e;
    if (status == "cancelled") {
      e.code = 499;
      e.type = "cancelled";
      e.message = "client cancelled the request";
    }
    if (const Json* err = find_path(row, "dyn.error"); err && err->is_object()) {
      if (auto c = num_at(*err, "code"))
        if (auto i = to_i64(*c)) e.code = *i;
      if (err->contains("type")) e.type = text_of(&(*err)["type"]);
      if (err->contains("message")) e.message = text_of(&(*err)["message"]);
    }
    if (e.type.empty()) e.type = status;
    r.error = std::move(e);
  }

  const auto total = num_at(row, "request.total_time_ms");
  const Json* ev = find_path(row, "event_time_unix_ms");
  std::optional<int64_t> event_ns;
  if (ev) {
    if (auto u = as_u64(*ev)) {  // exact for integer ms; unrepresentable in ns (after 2262): unknown
      if (*u <= static_cast<uint64_t>(INT64_MAX / 1'000'000)) event_ns = static_cast<int64_t>(*u) * 1'000'000;
    } else if (auto d = as_number(*ev)) {
      event_ns = ms_to_ns(*d);
    }
  }
  const std::optional<int64_t> total_ns = total ? ms_to_ns(*total) : std::nullopt;
  if (auto recv = num_at(row, "request.request_received_ms")) r.start_ns = ms_to_ns(*recv);
  else r.start_ns = sub_ns(event_ns, total_ns);
  if (r.start_ns && total_ns) r.end_ns = add_ns(r.start_ns, total_ns);
  else r.end_ns = event_ns;

  r.ttft = num_at(row, "request.ttft_ms");
  r.ttst = num_at(row, "dyn.ttst_ms");
  r.latency = num_at(row, "dyn.request_latency_ms");
  if (!r.latency) r.latency = total;
  r.isl = num_at(row, "request.input_tokens");
  r.osl = num_at(row, "request.output_tokens");
  r.cached = num_at(row, "request.cached_tokens");
  r.schedule_lag_ms = num_at(row, "dyn.schedule_lag_ms");
  if (const Json* ic = find_path(row, "dyn.inter_chunk_ms"); ic && ic->is_array())
    for (const Json& x : *ic)
      if (auto d = as_number(x)) r.inter_chunk.push_back(*d);
  r.itl = num_at(row, "request.avg_itl_ms");
  derive_itl(r, 1e-3);
  // Per-token ITL (issue 21.4): the first chunk's tokens are part of TTFT, not of any gap.
  if (r.latency && r.ttft && r.osl && *r.osl >= 2) {
    double first = 1;
    r.itl_per_token_estimated = true;
    if (const Json* ct = find_path(row, "dyn.chunk_tokens");
        ct && ct->is_array() && !ct->empty() && ct->size() == r.inter_chunk.size() + 1) {
      if (auto f = as_number((*ct)[0])) {
        first = *f;
        r.itl_per_token_estimated = false;
      }
    }
    if (*r.osl - first >= 1) r.itl_per_token = (*r.latency - *r.ttft) / (*r.osl - first);
  }
  if (auto p = num_at(row, "dyn.pause_ms"); p && *p > 0) r.pause_ms = *p;
  r.hash_ids = u64_array(find_path(row, "dyn.hash_ids"));
  if (r.hash_ids.empty()) r.hash_ids = u64_array(find_path(row, "request.replay.input_sequence_hashes"));
  else if (auto b = num_at(row, "dyn.block_size"); b && *b >= 1 && *b <= UINT32_MAX)
    r.hash_block_size = static_cast<uint32_t>(*b);
  r.source = row;
  return r;
}

RequestRecord parse_aiperf_record(const Json& row, std::string where) {
  RequestRecord r;
  r.where = std::move(where);
  const Json& md = row.contains("metadata") && row["metadata"].is_object() ? row["metadata"] : Json::object();
  r.request_id = text_of(md.contains("x_request_id") ? &md["x_request_id"] : nullptr);
  r.session_id = text_of(md.contains("x_correlation_id") ? &md["x_correlation_id"] : nullptr);
  if (md.contains("turn_index") && md["turn_index"].is_number_integer()) r.turn = md["turn_index"].get<int64_t>();
  if (md.contains("request_start_ns")) r.start_ns = exact_ns(md["request_start_ns"]);
  else if (md.contains("timestamp_ns")) r.start_ns = exact_ns(md["timestamp_ns"]);
  if (md.contains("request_end_ns")) r.end_ns = exact_ns(md["request_end_ns"]);

  if (row.contains("error") && row["error"].is_object()) {
    const Json& e = row["error"];
    ErrorInfo info;
    if (e.contains("code") && e["code"].is_number())
      if (auto i = to_i64(e["code"].get<double>())) info.code = *i;
    info.type = text_of(e.contains("type") ? &e["type"] : nullptr);
    info.message = text_of(e.contains("message") ? &e["message"] : nullptr);
    r.error = std::move(info);
  }

  for (const auto& [raw_tag, entry] : row["metrics"].items()) {
    if (!entry.is_object() || !entry.contains("value")) continue;
    std::string tag = raw_tag == "ttft" ? "time_to_first_token" : raw_tag == "ttst" ? "time_to_second_token" : raw_tag;
    const std::string unit = text_of(entry.contains("unit") ? &entry["unit"] : nullptr);
    const Json& v = entry["value"];
    auto one = [&]() -> std::optional<double> { return as_number(v); };
    if (tag == "time_to_first_token") {
      if (auto d = one()) r.ttft = to_ns(*d, unit);
    } else if (tag == "time_to_second_token") {
      if (auto d = one()) r.ttst = to_ns(*d, unit);
    } else if (tag == "request_latency") {
      if (auto d = one()) r.latency = to_ns(*d, unit);
    } else if (tag == "inter_token_latency") {
      if (auto d = one()) r.itl = unit == "ns" ? *d : *d * (unit == "sec" ? 1e9 : 1e6);
    } else if (tag == "inter_chunk_latency") {
      if (v.is_array())
        for (const Json& x : v)
          if (auto d = as_number(x)) r.inter_chunk.push_back(to_ns(*d, unit));
    } else if (tag == "output_token_throughput_per_user") {
      if (auto d = one()) r.per_user_tps = *d;
    } else if (tag == "input_sequence_length") r.isl = one();
    else if (tag == "output_sequence_length") r.osl = one();
    else if (tag == "output_token_count") r.output_token_count = one();
    else if (tag == "reasoning_token_count") r.reasoning_token_count = one();
    else if (tag == "min_request_timestamp") {
      if (auto ns = exact_ns(v)) r.start_ns = *ns;
    } else if (tag == "max_response_timestamp") {
      if (auto ns = exact_ns(v)) r.end_ns = *ns;
    } else if (tag == "request_count" || tag == "error_request_count") {
    } else {
      std::vector<double> vals;
      if (v.is_array()) {
        for (const Json& x : v)
          if (auto d = as_number(x)) vals.push_back(*d);
      } else if (auto d = one()) {
        vals.push_back(*d);
      }
      if (!vals.empty()) r.extra.emplace_back(tag, unit, std::move(vals));
    }
  }
  derive_itl(r, 1e-9);
  r.source = row;
  return r;
}

void add_request_row(RequestSet& set, const Json& row, std::string where) {
  if (const Json* src = records::find_path(row, "event_source"); src && src->is_string()) {
    const std::string& v = src->get_ref<const std::string&>();
    if (set.event_source.empty()) set.event_source = v;
    else if (set.event_source != v) set.event_source = "mixed";
  }
  bool warmup = false;
  if (auto r = parse_request_end(row, std::move(where), &warmup)) set.requests.push_back(std::move(*r));
  else if (warmup) ++set.warmup_skipped;
  else ++set.other_rows;
}

RequestSet load_requests(const std::vector<std::string>& paths) {
  RequestSet set;
  records::RowReader reader(paths);
  Json row;
  std::string where;
  bool decided = false;
  while (reader.next(row, &where)) {
    const bool aiperf = is_aiperf_record(row);
    if (!decided) {
      set.kind = aiperf ? RowKind::kAiperf : RowKind::kDyn;
      decided = true;
    } else if (aiperf != (set.kind == RowKind::kAiperf)) {
      throw Fatal(kExitBadData,
                  where + ": " + (aiperf ? "an AIPerf record among trace rows" : "a trace row among AIPerf records") +
                      " (report one kind per run)");
    }
    if (aiperf) {
      set.requests.push_back(parse_aiperf_record(row, where));
      continue;
    }
    add_request_row(set, row, where);
  }
  reader.summarize();
  set.malformed = reader.malformed();
  return set;
}

std::string describe_view(const RequestSet& set) {
  if (set.kind == RowKind::kAiperf) return "client view (AIPerf records: timed at the client)";
  const std::string& s = set.event_source;
  if (s == "client") return "client view (dyn-replay rows: timed at the client, router and network included)";
  if (s == "router" || s == "dynamo")
    return "router view (a router trace: timed at the proxy, the client's network not included)";
  if (s == "simulator") return "simulated (dyn-replay --sim rows: virtual clock)";
  if (s == "mixed") return "mixed views (rows from several sources)";
  return s.empty() ? "" : s + " rows";
}

RequestRecord metrics_from_timeline(const ChunkTimeline& t) {
  RequestRecord r;
  if (t.chunk_ms.empty()) return r;
  r.ttft = t.chunk_ms.front();
  if (t.chunk_ms.size() >= 2) r.ttst = t.chunk_ms[1] - t.chunk_ms[0];
  r.latency = t.chunk_ms.back();
  for (std::size_t i = 1; i < t.chunk_ms.size(); ++i) r.inter_chunk.push_back(t.chunk_ms[i] - t.chunk_ms[i - 1]);
  double osl = 0;
  for (double n : t.tokens) osl += n;
  r.osl = osl;
  derive_itl(r, 1e-3);
  if (!t.tokens.empty() && osl - t.tokens.front() >= 1)
    r.itl_per_token = (*r.latency - *r.ttft) / (osl - t.tokens.front());
  return r;
}

}  // namespace dyn::metrics
