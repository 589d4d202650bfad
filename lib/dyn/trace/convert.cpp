// Workload converters. Dynamo input goes through load_workload so the SPEC 6.2 mapping has one
// implementation; the Azure CSV reader streams because the week-long releases are large.
#include "dyn/trace/convert.h"

#include <charconv>
#include <cmath>
#include <unordered_map>

#include "dyn/base/diag.h"
#include "dyn/io/line_reader.h"
#include "dyn/trace/sessionize.h"
#include "dyn/trace/weka.h"

namespace dyn::trace {

namespace {

/// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (the era/day-of-era method).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool read_int(std::string_view s, size_t pos, size_t len, int64_t* v) {
  if (pos + len > s.size()) return false;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, *v);
  return ec == std::errc() && p == s.data() + pos + len;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '"' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  for (;;) {
    size_t c = line.find(',', pos);
    out.push_back(trim(line.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos)));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

Json ms_number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

Expected<int64_t> parse_azure_timestamp(std::string_view s) {
  // YYYY-MM-DD HH:MM:SS[.f{1,9}]  ('T' accepted as the separator)
  int64_t y, mo, d, h, mi, se;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' ||
      !read_int(s, 0, 4, &y) || !read_int(s, 5, 2, &mo) || !read_int(s, 8, 2, &d) || !read_int(s, 11, 2, &h) ||
      !read_int(s, 14, 2, &mi) || !read_int(s, 17, 2, &se) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || se > 60)
    return bad_data("bad timestamp '" + std::string(s) + "' (want YYYY-MM-DD HH:MM:SS.fffffff)");
  int64_t ticks = 0;  // 100 ns units
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20 || s.size() > 29)
      return bad_data("bad timestamp '" + std::string(s) + "' (fraction)");
    int64_t scale = 1000000;  // first fractional digit = 10^6 ticks
    for (size_t i = 20; i < s.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(s[i]))) return bad_data("bad timestamp '" + std::string(s) + "'");
      ticks += (s[i] - '0') * scale;  // digits beyond the 7th (scale 0) are dropped
      scale /= 10;
    }
  }
  int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return ((days * 86400 + h * 3600 + mi * 60 + se) * 10000000) + ticks;
}

uint64_t read_azure_csv(const std::vector<std::string>& inputs, uint32_t block_size, io::Output& out) {
  const uint64_t B = block_size ? block_size : records::kMooncakeBlockSize;
  io::LineReader reader(inputs);
  io::Line line;
  int col_time = -1, col_in = -1, col_out = -1;
  bool header = false;
  bool have_first = false;
  int64_t first = 0;
  uint64_t next_id = 0, rejected = 0;
  const std::string* header_file = nullptr;
  auto reject = [&](const std::string& what) {
    if (++rejected <= 20) diag::error(line.where(), what);
  };
  while (reader.next(line)) {
    if (line.file != header_file) {  // each file starts with its header
      header_file = line.file;
      header = false;
    }
    std::string_view t = line.text;
    if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
    if (trim(t).empty()) continue;
    auto cols = split_csv(t);
    if (!header) {
      col_time = col_in = col_out = -1;
      for (size_t i = 0; i < cols.size(); ++i) {
        if (iequals(cols[i], "TIMESTAMP")) col_time = static_cast<int>(i);
        else if (iequals(cols[i], "ContextTokens")) col_in = static_cast<int>(i);
        else if (iequals(cols[i], "GeneratedTokens")) col_out = static_cast<int>(i);
      }
      if (col_time < 0 || col_in < 0 || col_out < 0)
        throw Fatal(kExitBadData, line.where() + ": header must name TIMESTAMP, ContextTokens and GeneratedTokens");
      header = true;
      continue;
    }
    int need = std::max(col_time, std::max(col_in, col_out));
    if (static_cast<int>(cols.size()) <= need) {
      reject("expected " + std::to_string(need + 1) + " columns, got " + std::to_string(cols.size()));
      continue;
    }
    auto ts = parse_azure_timestamp(cols[static_cast<size_t>(col_time)]);
    if (!ts) {
      reject(ts.error().message);
      continue;
    }
    uint64_t in = 0, gen = 0;
    auto num = [](std::string_view s, uint64_t* v) {
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
      return ec == std::errc() && p == s.data() + s.size();
    };
    if (!num(cols[static_cast<size_t>(col_in)], &in) || !num(cols[static_cast<size_t>(col_out)], &gen)) {
      reject("ContextTokens and GeneratedTokens must be non-negative integers");
      continue;
    }
    if (!have_first) {
      first = *ts;
      have_first = true;
    }
    if (*ts < first) {
      reject("timestamp is earlier than the first row's; sort the file first");
      continue;
    }
    Json row = Json::object();
    row["timestamp"] = ms_number(static_cast<double>(*ts - first) / 10000.0);
    row["input_length"] = in;
    row["output_length"] = gen;
    Json ids = Json::array();
    uint64_t n = (in + B - 1) / B;
    for (uint64_t i = 0; i < n; ++i) ids.push_back(next_id++);
    row["hash_ids"] = std::move(ids);
    out.line(row.dump());
  }
  if (rejected > 20) diag::error("", std::to_string(rejected) + " rows rejected");
  return rejected;
}

std::vector<Json> to_agentic_rows(const records::Workload& w, const engine::PerfProfile* profile) {
  std::vector<Json> out;
  out.reserve(w.rows.size());
  struct Last {
    std::string request_id;
    const records::WorkloadRow* row;
    uint64_t turns;
  };
  std::unordered_map<std::string, Last> last;
  for (size_t n = 0; n < w.rows.size(); ++n) {
    const records::WorkloadRow& r = w.rows[n];
    std::string rid = r.request_id;
    std::vector<std::string> wait_for = r.wait_for;
    std::optional<double> tool_wait = r.tool_wait_ms;
    bool dependent = !wait_for.empty();
    if (!r.session_id.empty()) {
      auto it = last.find(r.session_id);
      uint64_t turn = it == last.end() ? 0 : it->second.turns;
      if (rid.empty()) rid = r.session_id + ":" + std::to_string(turn);
      if (it != last.end()) {
        const std::string& prev = it->second.request_id;
        if (std::find(wait_for.begin(), wait_for.end(), prev) == wait_for.end()) wait_for.push_back(prev);
        dependent = true;
        if (!tool_wait) {
          if (r.delay_ms) {
            tool_wait = *r.delay_ms;
          } else if (r.timestamp_ms && it->second.row->timestamp_ms) {
            const records::WorkloadRow& p = *it->second.row;
            double gap = *r.timestamp_ms - *p.timestamp_ms -
                         estimate_service_ms(p.input_length, 0, p.output_length.value_or(0), profile);
            tool_wait = std::round(std::max(0.0, gap));  // whole ms: the estimate is coarse
          }
        }
      }
      last[r.session_id] = Last{rid, &r, turn + 1};
    } else if (rid.empty()) {
      rid = "row-" + std::to_string(n);
    }
    Json o = Json::object();
    o["request_id"] = rid;
    if (!r.session_id.empty()) o["session_id"] = r.session_id;
    if (!r.parent_session_id.empty()) o["parent_session_id"] = r.parent_session_id;
    o["input_length"] = r.input_length;
    if (r.output_length) o["output_length"] = *r.output_length;
    if (!r.hash_ids.empty() || !r.text_input) o["hash_ids"] = r.hash_ids;
    if (r.text_input) o["text_input"] = *r.text_input;
    if (!dependent && r.timestamp_ms) o["timestamp"] = ms_number(*r.timestamp_ms);
    if (!wait_for.empty()) o["wait_for"] = wait_for;
    if (tool_wait) o["tool_wait_ms"] = ms_number(*tool_wait);
    if (r.priority) o["priority"] = *r.priority;
    out.push_back(std::move(o));
  }
  return out;
}

int convert_workload(const ConvertOptions& o, io::Output& out) {
  if (o.from == ConvertFrom::kAzureCsv) {
    if (o.to != ConvertTo::kMooncake) {
      // Azure rows have no sessions: the agentic form would only add request ids. Go through
      // a Mooncake file first if that is wanted.
      throw Fatal(kExitUsage, "--from azure-csv converts to mooncake only (pipe into --from mooncake --to agentic)");
    }
    return read_azure_csv(o.inputs, o.block_size, out) > 0 ? kExitBadData : kExitOk;
  }
  records::Workload w;
  if (o.from == ConvertFrom::kWeka) {
    if (o.block_size != 0 && o.block_size != kWekaBlockSize)
      throw Fatal(kExitUsage, "--from weka: the traces hash 64-token blocks; --block-size " +
                                  std::to_string(o.block_size) + " cannot apply");
    w = read_weka(o.inputs, o.profile.get());
  } else {
    records::WorkloadOptions wo;
    wo.block_size = o.block_size;
    w = records::load_workload(o.inputs, wo);
  }
  if (o.from == ConvertFrom::kDynamo && !w.from_dynamo && !w.rows.empty())
    throw Fatal(kExitBadData, "--from dynamo: input has no dynamo.request.trace.v1 request_end records");
  if (o.from == ConvertFrom::kMooncake && w.from_dynamo)
    throw Fatal(kExitBadData, "--from mooncake: input holds Dynamo trace records (use --from dynamo)");
  if (!w.ok()) {
    diag::error("",
                std::to_string(w.errors.size()) + " error" + (w.errors.size() == 1 ? "" : "s") + "; nothing converted");
    return kExitBadData;
  }
  if (o.to == ConvertTo::kAgentic) {
    for (const auto& row : to_agentic_rows(w, o.profile.get())) out.line(row.dump());
  } else {
    for (const auto& row : w.rows) out.line(records::workload_row_to_json(row).dump());
  }
  if (o.from == ConvertFrom::kWeka)
    diag::note("converted " + std::to_string(w.rows.size()) +
               " WEKA requests at block size 64 (replay with --block-size 64)");
  if (w.from_dynamo)
    diag::note("converted " + std::to_string(w.rows.size()) + " request_end records at block size " +
               std::to_string(w.block_size));
  return kExitOk;
}

}  // namespace dyn::trace
