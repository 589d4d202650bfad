// Workload loading and validation.
#include "dyn/records/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>

#include "dyn/base/diag.h"
#include "dyn/io/jsonl.h"
#include "dyn/records/aiperf_dataset.h"
#include "dyn/records/reader.h"
#include "dyn/records/record.h"

namespace dyn::records {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// The keys a workload row may carry, found in one pass over the object (the last of duplicate
// keys wins, as with nlohmann).
enum Key {
  kTimestamp,
  kDelay,
  kToolWait,
  kInputLength,
  kOutputLength,
  kHashIds,
  kTextInput,
  kSessionId,
  kParentSessionId,
  kRequestId,
  kPriority,
  kWaitFor,
  kKeyCount
};
constexpr std::string_view kKeyNames[kKeyCount] = {"timestamp",         "delay",      "tool_wait_ms", "input_length",
                                                   "output_length",     "hash_ids",   "text_input",   "session_id",
                                                   "parent_session_id", "request_id", "priority",     "wait_for"};

bool is_number(const element& v) {
  auto t = v.type();
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

// Absent and null read as absent.
const element* present(const std::optional<element>& v) { return v && !v->is_null() ? &*v : nullptr; }

std::optional<uint64_t> u64_of(const element& v) {
  uint64_t u;
  if (v.get_uint64().get(u) == simdjson::SUCCESS) return u;  // also non-negative int64
  return std::nullopt;
}

// A count: an unsigned integer, or an integral non-negative float (e.g. 512.0).
bool count_of(const element& v, const char* key, uint64_t* out, std::string* err) {
  if (auto u = u64_of(v)) return *out = *u, true;
  double d;
  if (v.get_double().get(d) == simdjson::SUCCESS && v.type() == element_type::DOUBLE && d >= 0 && std::floor(d) == d &&
      d < 1.8e19)
    return *out = static_cast<uint64_t>(d), true;
  *err = std::string(key) + " must be a non-negative integer, got " + simdjson::to_string(v);
  return false;
}

std::string id_string(const element& v) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  if (auto u = u64_of(v)) return std::to_string(*u);
  int64_t i;
  if (v.get_int64().get(i) == simdjson::SUCCESS) return std::to_string(i);
  if (is_number(v)) return simdjson::to_string(v);
  return {};
}

}  // namespace

bool parse_workload_object(const simdjson::dom::object& row, uint32_t block_size, WorkloadRow& r, std::string* error) {
  r.reset();
  std::optional<element> f[kKeyCount];
  for (auto field : row) {
    for (int k = 0; k < kKeyCount; ++k)
      if (field.key == kKeyNames[k]) {
        f[k] = field.value;
        break;
      }
  }
  auto fail = [&](std::string msg) {
    *error = std::move(msg);
    return false;
  };
  auto number = [&](Key k, std::optional<double>* out) {
    const element* v = present(f[k]);
    if (!v) return true;
    if (!is_number(*v)) return fail(std::string(kKeyNames[k]) + " is not a number");
    double d = 0;
    if (v->get_double().get(d) != simdjson::SUCCESS) return fail(std::string(kKeyNames[k]) + " is out of range");
    *out = d;
    return true;
  };
  if (!number(kTimestamp, &r.timestamp_ms) || !number(kDelay, &r.delay_ms)) return false;
  // ms since the trace's start or the Unix epoch: a negative one wrapped to 2^64 - 100 in the
  // simulator's records and one of 1e300 overflowed its clock.
  if (r.timestamp_ms && !(*r.timestamp_ms >= 0 && *r.timestamp_ms <= kMaxTimestampMs)) {
    const double t = *r.timestamp_ms;
    r.timestamp_ms.reset();  // the rejected row keeps no arrival time (decide places its error row in order)
    return fail(fmt::format("timestamp {} is out of range (0 to {:.0f} ms)", t, kMaxTimestampMs));
  }
  if (r.delay_ms && *r.delay_ms < 0) return fail("delay is negative");
  if (!number(kToolWait, &r.tool_wait_ms)) return false;
  std::optional<uint64_t> in;
  if (const element* v = present(f[kInputLength])) {
    uint64_t u;
    if (!count_of(*v, "input_length", &u, error)) return false;
    in = u;
  }
  if (const element* v = present(f[kOutputLength])) {
    uint64_t u;
    if (!count_of(*v, "output_length", &u, error)) return false;
    r.output_length = u;
  }
  if (const element* v = present(f[kHashIds])) {
    simdjson::dom::array ids;
    if (v->get_array().get(ids) != simdjson::SUCCESS) return fail("hash_ids is not an array");
    r.hash_ids.reserve(ids.size());
    for (auto x : ids) {
      uint64_t u;
      if (x.get_uint64().get(u) != simdjson::SUCCESS)
        return fail("hash_ids[" + std::to_string(r.hash_ids.size()) + "] = " + simdjson::to_string(x) +
                    " is not an unsigned 64-bit integer");
      r.hash_ids.push_back(u);
    }
  }
  std::string_view text;
  if (f[kTextInput] && f[kTextInput]->get_string().get(text) == simdjson::SUCCESS) r.text_input = std::string(text);
  if (in) r.input_length = *in;
  else if (r.text_input) r.input_length = (r.text_input->size() + 3) / 4;
  else return fail("row has neither input_length nor text_input");
  if (f[kSessionId]) r.session_id = id_string(*f[kSessionId]);
  if (f[kParentSessionId]) r.parent_session_id = id_string(*f[kParentSessionId]);
  if (f[kRequestId]) r.request_id = id_string(*f[kRequestId]);
  if (f[kPriority]) {
    int64_t i;
    uint64_t u;
    if (f[kPriority]->get_int64().get(i) == simdjson::SUCCESS) r.priority = i;
    else if (f[kPriority]->get_uint64().get(u) == simdjson::SUCCESS) r.priority = static_cast<int64_t>(u);
  }
  if (f[kWaitFor]) {
    simdjson::dom::array waits;
    if (f[kWaitFor]->get_array().get(waits) == simdjson::SUCCESS)
      for (auto w : waits) r.wait_for.push_back(id_string(w));
    else if (!f[kWaitFor]->is_null()) r.wait_for.push_back(id_string(*f[kWaitFor]));
  }
  if (!r.hash_ids.empty() && !r.text_input) {
    uint64_t n = r.hash_ids.size();
    r.hash_ids_consistent = (n - 1) * block_size < r.input_length && r.input_length <= n * block_size;
  }
  return true;
}

namespace {

// Eight bytes of a line at a time (issue 17: the byte-by-byte digit loop was a quarter of the
// scanner). digit_run(): how many of the 8 bytes (first byte lowest) are ASCII digits before the
// first other byte, with `digits` set to each byte minus '0'. A byte below '0' wraps to >= 0xd0,
// one above '9' carries to >= 0x80, so the first non-digit byte has its high bit set; borrows and
// carries move only toward later bytes, so that first one is exact.
inline int digit_run(uint64_t w, uint64_t& digits) {
  digits = w - 0x3030303030303030ull;
  const uint64_t stop = (digits | (w + 0x4646464646464646ull)) & 0x8080808080808080ull;
  return stop ? __builtin_ctzll(stop) >> 3 : 8;
}
// The value of the first n (1..8) digits digit_run() found: they are moved to the top bytes
// (zeros before them), then pairs, quads and octets are combined with three multiplies.
inline uint64_t digits_value(uint64_t digits, int n) {
  uint64_t x = digits << (8 * (8 - n));
  x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
  x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
  return (x * 10000 + (x >> 32)) & 0xffffffffull;
}

// The line scanner of parse_workload_line_fast. Every helper returns false for anything outside
// the subset (the caller then takes the simdjson path), never for an error of its own.
struct Scan {
  const char* p;
  const char* e;
  __attribute__((always_inline)) void ws() {
    // Most rows have no space at all, or one after a comma: the first test ends the call.
    while (p < e && static_cast<unsigned char>(*p) <= ' ' && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool digit() const { return p < e && *p >= '0' && *p <= '9'; }
  // A string of printable ASCII without escapes (`"` already current).
  bool plain_string(std::string_view& out) {
    const char* b = ++p;
    // Eight bytes at a time: the first byte that is '"', '\\', a control character or not ASCII
    // (the same tests as the byte loop below) ends the run.
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
    while (e - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      const uint64_t q = w ^ (kOnes * '"'), bs = w ^ (kOnes * '\\');
      const uint64_t hit = ((q - kOnes) & ~q) | ((bs - kOnes) & ~bs) | ((w - kOnes * 0x20) & ~w) | w;
      if (const uint64_t m = hit & kHigh) {
        p += __builtin_ctzll(m) >> 3;  // exact: a false hit can only follow a true one
        break;
      }
      p += 8;
    }
    while (p < e) {
      const unsigned char c = static_cast<unsigned char>(*p);
      if (c == '"') {
        out = std::string_view(b, static_cast<size_t>(p - b));
        ++p;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p;
    }
    return false;
  }
  // One hash id of 1..7 digits followed by ',' (and at most one space) or ']', with at least 16
  // bytes left: the id in u, p past the separator, `last` set at ']'. Anything else (a longer
  // number, a leading zero, other spacing, the end of the line near) returns false with p
  // unmoved, and the caller takes the general path (integer() and ws()). Why: Mooncake's ids are
  // a few digits each, and this case is one 8-byte load and a few operations an id, a third of
  // what the general path costs (issue 17).
  __attribute__((always_inline)) bool short_id(uint64_t& u, bool& last) {
    if (e - p < 16) return false;
    uint64_t w, digits;
    std::memcpy(&w, p, 8);
    const int n = digit_run(w, digits);
    if (n == 0 || n == 8 || (n > 1 && *p == '0')) return false;  // 8 digits or more: integer()
    const char sep = p[n];
    const char* next = p + n + 1;
    if (sep == ',') {
      if (*next == ' ') ++next;
      if (static_cast<unsigned char>(*next) <= ' ') return false;  // more spacing: the general path
      last = false;
    } else if (sep == ']') {
      last = true;
    } else {
      return false;
    }
    u = digits_value(digits, n);
    p = next;
    return true;
  }
  // A JSON integer of 1..19 digits without a leading zero (below 2^64, so simdjson types it INT64
  // or UINT64 with this value), not followed by a fraction or exponent.
  __attribute__((always_inline)) bool integer(uint64_t& u) {
    const char* b = p;
    uint64_t v = 0;
    // Eight bytes at a time while eight are left; a run of more than 19 digits is refused below.
    while (e - p >= 8) {
      uint64_t w, digits;
      std::memcpy(&w, p, 8);
      const int n = digit_run(w, digits);
      if (n > 0) {
        static constexpr uint64_t kPow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
        v = v * kPow10[n] + digits_value(digits, n);  // wraps only past 19 digits, which are refused
        p += n;
      }
      if (n < 8 || p - b > 19) break;
    }
    if (e - p < 8) {
      while (p < e) {
        const unsigned d = static_cast<unsigned char>(*p) - unsigned{'0'};
        if (d > 9) break;
        v = v * 10 + d;
        ++p;
      }
    }
    const size_t n = static_cast<size_t>(p - b);
    if (n == 0 || n > 19 || (n > 1 && *b == '0')) return false;
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return false;
    u = v;
    return true;
  }
  // Any non-negative JSON number: `is_int` as for integer(), else a float parsed with correct
  // rounding (as simdjson does); out of range (simdjson: a number error) -> slow path.
  bool number(bool& is_int, uint64_t& u, double& d) {
    const char* b = p;
    if (integer(u)) {
      d = static_cast<double>(u);
      is_int = true;
      return true;
    }
    p = b;
    if (p >= e) return false;
    if (*p == '0') ++p;
    else if (*p >= '1' && *p <= '9')
      while (digit()) ++p;
    else return false;
    bool fraction_or_exponent = false;
    if (p < e && *p == '.') {
      ++p;
      if (!digit()) return false;
      while (digit()) ++p;
      fraction_or_exponent = true;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < e && (*p == '+' || *p == '-')) ++p;
      if (!digit()) return false;
      while (digit()) ++p;
      fraction_or_exponent = true;
    }
    // An integer literal integer() refused (more than 19 digits) is simdjson's to judge: past
    // 2^64 - 1 it rejects the whole line (found by fuzz_workload's fast-versus-DOM check: a
    // 22-digit value under an unknown key was read here as a double and the row was routed).
    if (!fraction_or_exponent) return false;
    if (p == b || (p - b > 1 && *b == '0' && b[1] != '.' && b[1] != 'e' && b[1] != 'E')) return false;
    auto r = std::from_chars(b, p, d);
    if (r.ec != std::errc() || r.ptr != p || !std::isfinite(d)) return false;
    is_int = false;
    return true;
  }
  bool literal(std::string_view word) {
    if (static_cast<size_t>(e - p) < word.size() || std::string_view(p, word.size()) != word) return false;
    p += word.size();
    return true;
  }
};

// The Key of a workload key, kNotWorkload for the keys of other row kinds (trace records, header
// rows, envelopes: the slow path tells them apart), -1 for any other key. One length switch and
// at most two compares instead of a compare with every name.
constexpr int kNotWorkload = -2;
int key_index(std::string_view key) {
  auto is = [&](std::string_view name) { return key == name; };
  switch (key.size()) {
    case 5: return is("delay") ? kDelay : is("event") ? kNotWorkload : -1;
    case 6: return is("schema") ? kNotWorkload : -1;
    case 7: return is("headers") ? kNotWorkload : -1;
    case 8: return is("hash_ids") ? kHashIds : is("priority") ? kPriority : is("wait_for") ? kWaitFor : -1;
    case 9: return is("timestamp") ? kTimestamp : -1;
    case 10:
      return is("text_input")   ? kTextInput
             : is("session_id") ? kSessionId
             : is("request_id") ? kRequestId
             : is("event_type") ? kNotWorkload
                                : -1;
    case 12: return is("tool_wait_ms") ? kToolWait : is("input_length") ? kInputLength : -1;
    case 13: return is("output_length") ? kOutputLength : -1;
    case 17: return is("parent_session_id") ? kParentSessionId : -1;
    default: return -1;
  }
}

}  // namespace

bool parse_workload_line_fast(std::string_view line, uint32_t block_size, WorkloadRow& r) {
  struct Val {
    char type = 0;  // 0 absent, 'n' null, 'b' bool, 'i' integer, 'f' float, 's' string, 'a' array
    uint64_t u = 0;
    double d = 0;
    std::string_view str;
  };
  Val v[kKeyCount];
  r.reset();  // a reused row (decide's scratch row) keeps its buffers
  Scan s{line.data(), line.data() + line.size()};
  s.ws();
  if (s.p >= s.e || *s.p != '{') return false;
  ++s.p;
  s.ws();
  if (s.p < s.e && *s.p == '}') {
    ++s.p;
  } else {
    for (;;) {
      s.ws();
      std::string_view key;
      if (s.p >= s.e || *s.p != '"' || !s.plain_string(key)) return false;
      s.ws();
      if (s.p >= s.e || *s.p != ':') return false;
      ++s.p;
      s.ws();
      const int k = key_index(key);
      if (k == kWaitFor || k == kNotWorkload) return false;
      if (k >= 0 && v[k].type != 0) return false;  // duplicate: the slow path applies "last wins"
      if (s.p >= s.e) return false;
      Val x;
      const char c = *s.p;
      if (c == '"') {
        if (!s.plain_string(x.str)) return false;
        x.type = 's';
      } else if (c == '[') {
        if (k != kHashIds) return false;
        std::vector<uint64_t>& ids = r.hash_ids;  // kept capacity: no allocation once it is large enough
        size_t n = 0;
        ++s.p;
        s.ws();
        if (s.p < s.e && *s.p == ']') {
          ++s.p;
        } else {
          for (;;) {
            uint64_t u = 0;
            bool last = false;
            if (s.short_id(u, last)) {
              if (n == ids.size()) ids.resize(std::max<size_t>(16, 2 * n));
              ids[n++] = u;
              if (last) break;
              continue;
            }
            s.ws();
            if (!s.integer(u)) return false;
            if (n == ids.size()) ids.resize(std::max<size_t>(16, 2 * n));
            ids[n++] = u;
            s.ws();
            if (s.p >= s.e) return false;
            if (*s.p == ',') {
              ++s.p;
              continue;
            }
            if (*s.p != ']') return false;
            ++s.p;
            break;
          }
        }
        ids.resize(n);
        x.type = 'a';
      } else if (c == 'n') {
        if (!s.literal("null")) return false;
        x.type = 'n';
      } else if (c == 't' || c == 'f') {
        if (!s.literal(c == 't' ? "true" : "false")) return false;
        x.type = 'b';
      } else {
        bool is_int = false;
        if (!s.number(is_int, x.u, x.d)) return false;
        x.type = is_int ? 'i' : 'f';
      }
      if (k >= 0) v[k] = x;
      s.ws();
      if (s.p >= s.e) return false;
      if (*s.p == ',') {
        ++s.p;
        continue;
      }
      if (*s.p != '}') return false;
      ++s.p;
      break;
    }
  }
  s.ws();
  if (s.p != s.e) return false;

  // The happy path of parse_workload_object, field by field; anything it would reject or treat
  // specially goes to the slow path.
  auto number = [&](Key k, std::optional<double>* out) {
    const Val& x = v[k];
    if (x.type == 0 || x.type == 'n') return true;
    if (x.type != 'i' && x.type != 'f') return false;
    if (k == kTimestamp && x.d > kMaxTimestampMs) return false;  // the slow path says why
    *out = x.d;
    return true;
  };
  auto count = [&](Key k, std::optional<uint64_t>* out) {
    const Val& x = v[k];
    if (x.type == 0 || x.type == 'n') return true;
    if (x.type == 'i') return *out = x.u, true;
    if (x.type == 'f' && x.d >= 0 && std::floor(x.d) == x.d && x.d < 1.8e19)
      return *out = static_cast<uint64_t>(x.d), true;
    return false;
  };
  auto id = [&](Key k, std::string* out) {
    const Val& x = v[k];
    if (x.type == 0 || x.type == 'n' || x.type == 'b') return true;  // id_string gives ""
    if (x.type == 's') return out->assign(x.str), true;
    if (x.type == 'i') return *out = std::to_string(x.u), true;
    return false;
  };
  if (!number(kTimestamp, &r.timestamp_ms) || !number(kDelay, &r.delay_ms) || !number(kToolWait, &r.tool_wait_ms))
    return false;
  std::optional<uint64_t> in;
  if (!count(kInputLength, &in) || !count(kOutputLength, &r.output_length)) return false;
  if (v[kHashIds].type != 0 && v[kHashIds].type != 'a' && v[kHashIds].type != 'n') return false;
  if (v[kTextInput].type == 's') r.text_input = std::string(v[kTextInput].str);
  else if (v[kTextInput].type != 0 && v[kTextInput].type != 'n') return false;
  if (in) r.input_length = *in;
  else if (r.text_input) r.input_length = (r.text_input->size() + 3) / 4;
  else return false;
  if (!id(kSessionId, &r.session_id) || !id(kParentSessionId, &r.parent_session_id) || !id(kRequestId, &r.request_id))
    return false;
  if (v[kPriority].type == 'i') r.priority = static_cast<int64_t>(v[kPriority].u);
  else if (v[kPriority].type == 'f' || v[kPriority].type == 's') return false;
  if (!r.hash_ids.empty() && !r.text_input) {
    uint64_t n = r.hash_ids.size();
    r.hash_ids_consistent = (n - 1) * block_size < r.input_length && r.input_length <= n * block_size;
  }
  return true;
}

std::optional<WorkloadRow> parse_workload_row(const Json& row, uint32_t block_size, std::string where,
                                              std::string* error) {
  if (!row.is_object()) {
    *error = "row is not a JSON object";
    return std::nullopt;
  }
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(row.dump()).get_object().get(obj) != simdjson::SUCCESS) {
    *error = "row is not a JSON object";
    return std::nullopt;
  }
  WorkloadRow r;
  r.where = std::move(where);
  if (!parse_workload_object(obj, block_size, r, error)) return std::nullopt;
  return r;
}

Json workload_row_to_json(const WorkloadRow& r) {
  auto num = [](double v) -> Json {
    if (std::floor(v) == v && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
    return v;
  };
  Json o = Json::object();
  if (r.timestamp_ms) o["timestamp"] = num(*r.timestamp_ms);
  if (!r.session_id.empty()) o["session_id"] = r.session_id;
  if (!r.parent_session_id.empty()) o["parent_session_id"] = r.parent_session_id;
  if (!r.request_id.empty()) o["request_id"] = r.request_id;
  if (r.delay_ms) o["delay"] = num(*r.delay_ms);
  o["input_length"] = r.input_length;
  if (r.output_length) o["output_length"] = *r.output_length;
  if (!r.hash_ids.empty() || !r.text_input) o["hash_ids"] = r.hash_ids;
  if (r.text_input) o["text_input"] = *r.text_input;
  if (!r.wait_for.empty()) o["wait_for"] = r.wait_for;
  if (r.tool_wait_ms) o["tool_wait_ms"] = num(*r.tool_wait_ms);
  if (r.priority) o["priority"] = *r.priority;
  return o;
}

std::optional<std::string> dynamo_start_error(double start_ms) {
  if (start_ms >= 0 && start_ms <= kMaxTimestampMs) return std::nullopt;
  return fmt::format(
      "request start {} ms (request.request_received_ms, or event_time_unix_ms - "
      "request.total_time_ms) is out of range (0 to {:.0f} ms)",
      start_ms, kMaxTimestampMs);
}

Workload workload_from_dynamo(const std::vector<std::pair<Json, std::string>>& records, uint32_t block_size) {
  Workload w;
  w.from_dynamo = true;
  std::unordered_map<uint64_t, uint64_t> compact;
  struct Pending {
    WorkloadRow row;
    double start;
    double end;
  };
  std::vector<Pending> pending;
  std::optional<uint32_t> bs;
  std::string bs_where;
  for (const auto& [rec, where] : records) {
    const Json* et = find_path(rec, "event_type");
    if (!et || !et->is_string() || et->get<std::string>() != event::kRequestEnd) continue;
    const Json* replay = find_path(rec, "request.replay");
    if (!replay || !replay->is_object()) {
      ++w.no_replay_rows;
      continue;
    }
    WorkloadRow r;
    r.where = where;
    const Json* tbs = find_path(*replay, "trace_block_size");
    auto tb = tbs ? as_u64(*tbs) : std::nullopt;
    if (!tb || *tb == 0 || *tb > (1u << 20)) {
      w.errors.push_back(where + ": request.replay.trace_block_size missing or invalid");
      continue;
    }
    if (!bs) {
      bs = static_cast<uint32_t>(*tb);
      bs_where = where;
    } else if (*bs != *tb) {
      w.errors.push_back(where + ": trace_block_size " + std::to_string(*tb) + " differs from " + std::to_string(*bs) +
                         " at " + bs_where + " (mixed block sizes)");
      continue;
    }
    const Json* il = find_path(*replay, "input_length");
    auto ilv = il ? as_u64(*il) : std::nullopt;
    if (!ilv) {
      w.errors.push_back(where + ": request.replay.input_length missing or invalid");
      continue;
    }
    r.input_length = *ilv;
    if (const Json* ot = find_path(rec, "request.output_tokens")) r.output_length = as_u64(*ot);
    const Json* hs = find_path(*replay, "input_sequence_hashes");
    bool bad = false;
    if (hs && hs->is_array()) {
      for (size_t i = 0; i < hs->size(); ++i) {
        auto v = as_u64((*hs)[i]);
        if (!v) {
          w.errors.push_back(where + ": input_sequence_hashes[" + std::to_string(i) + "] = " + (*hs)[i].dump() +
                             " is not an unsigned 64-bit integer");
          bad = true;
          break;
        }
        auto [it, fresh] = compact.emplace(*v, compact.size());
        r.hash_ids.push_back(it->second);
      }
    }
    if (bad) continue;
    r.session_id = session_of(rec);
    r.parent_session_id = parent_of(rec);
    if (const Json* rid = find_path(rec, "request.request_id"); rid && rid->is_string())
      r.request_id = rid->get<std::string>();
    double total = 0;
    if (const Json* tt = find_path(rec, "request.total_time_ms"); tt && tt->is_number()) total = tt->get<double>();
    double start;
    if (const Json* rr = find_path(rec, "request.request_received_ms"); rr && rr->is_number())
      start = rr->get<double>();
    else if (const Json* ev = find_path(rec, "event_time_unix_ms"); ev && ev->is_number())
      start = ev->get<double>() - total;
    else {
      w.errors.push_back(where + ": no request_received_ms or event_time_unix_ms");
      continue;
    }
    // Found by fuzz_workload: a record 1.8e16 ms after the others simulated 17 trillion seconds.
    if (auto e = dynamo_start_error(start)) {
      w.errors.push_back(where + ": " + *e);
      continue;
    }
    pending.push_back({std::move(r), start, start + total});
  }
  if (bs) {
    if (block_size != 0 && block_size != *bs)
      w.errors.push_back(bs_where + ": trace block size " + std::to_string(*bs) + " differs from --block-size " +
                         std::to_string(block_size));
    w.block_size = *bs;
  } else {
    w.block_size = block_size ? block_size : kMooncakeBlockSize;
  }
  double earliest = 0;
  for (size_t i = 0; i < pending.size(); ++i)
    earliest = i == 0 ? pending[i].start : std::min(earliest, pending[i].start);
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.start < b.start; });
  std::unordered_map<std::string, double> last_end;
  for (auto& p : pending) {
    p.row.timestamp_ms = p.start - earliest;
    if (!p.row.session_id.empty()) {
      auto it = last_end.find(p.row.session_id);
      if (it != last_end.end()) p.row.delay_ms = std::max(0.0, p.start - it->second);
      last_end[p.row.session_id] = p.end;
    }
    uint64_t n = p.row.hash_ids.size();
    p.row.hash_ids_consistent =
        n == 0 || ((n - 1) * w.block_size < p.row.input_length && p.row.input_length <= n * w.block_size);
    p.row.index = w.rows.size();
    w.rows.push_back(std::move(p.row));
  }
  w.has_timestamps = !w.rows.empty();
  return w;
}

struct WorkloadReader::State {
  State(const std::vector<std::string>& paths, const WorkloadOptions& o, bool second)
      : opts(o),
        quiet(o.quiet || second),
        second_pass(second),
        reader(paths, quiet ? io::JsonlOptions{.lines = {.quiet = true}, .max_reports = 0} : io::JsonlOptions{}) {
    w.block_size = opts.block_size ? opts.block_size : kMooncakeBlockSize;
  }
  WorkloadOptions opts;
  bool quiet, second_pass;
  RowReader reader;
  simdjson::dom::object obj;
  Workload w;
  std::vector<std::pair<Json, std::string>> dynamo;
  bool done = false, in_order = true, first = true, need_ts = false;
  uint64_t rows = 0;
  std::optional<double> last_ts;  // the latest timestamp so far
  // Session validation (SPEC 6.1): every session seen, and the kind of timing its later turns use
  // with the line that set it. One small entry a session (two maps, one of them holding a
  // "file:line" string, were most of --sim's first pass on 16 copies of the sessionized trace).
  struct Later {
    int kind = 0;  // 0 none yet, 1 delay, 2 timestamp
    const std::string* file = nullptr;
    uint64_t line = 0;
  };
  std::unordered_map<std::string, Later> seen;
  std::deque<WorkloadRow> pending;  // the further rows of an AIPerf multi_turn line

  /// The format of a row's line (its shape, or the declared type), or nullopt with the error
  /// reported when it is not the workload's: one format per workload.
  std::optional<DatasetType> format_of(const Json& row, const std::string& where) {
    DatasetType shape = row_shape(row);
    DatasetType declared = opts.dataset_type;
    if (declared == DatasetType::kRandomPool && shape == DatasetType::kSingleTurn) shape = DatasetType::kRandomPool;
    if (w.dataset_type == DatasetType::kAuto) w.dataset_type = declared == DatasetType::kAuto ? shape : declared;
    if (shape == w.dataset_type) return shape;
    // The first such row is reported with its line, the rest counted (finish): a whole file of
    // another format is one mistake, not one per line.
    if (format_mismatches++ == 0) {
      auto name = [](DatasetType t) { return std::string(name_in(kDatasetTypes, t)); };
      report(where + ": a " + name(shape) + " row in a " + name(w.dataset_type) + " workload" +
             (declared == DatasetType::kAuto ? " (the first row decides; one format per workload)"
                                             : " (--custom-dataset-type " + name(declared) + ")"));
    }
    return std::nullopt;
  }
  uint64_t format_mismatches = 0;

  void report(const std::string& msg) {
    if (!quiet) diag::error("", msg);
    w.errors.push_back(msg);
  }
  void warn(const std::string& msg) {
    if (!quiet) diag::warning("", msg);
    ++w.warnings;
  }
  // One parsed row's checks; false when it is rejected.
  bool check(WorkloadRow& r) {
    if (!r.hash_ids_consistent) {
      uint64_t need = (r.input_length + w.block_size - 1) / w.block_size;
      std::string msg = r.where + ": input_length " + std::to_string(r.input_length) + " needs " +
                        std::to_string(need) + " hash_ids at block size " + std::to_string(w.block_size) +
                        ", row has " + std::to_string(r.hash_ids.size());
      if (opts.strict_hash_ids) return report(msg), false;
      warn(msg + " (lenient: sending exactly input_length tokens)");
    }
    if (first) {
      first = false;
      w.has_timestamps = r.timestamp_ms.has_value();
      need_ts = opts.require_timestamps || (opts.require_timestamps_if_first_has && w.has_timestamps);
    }
    if (r.timestamp_ms) {
      if (last_ts && *r.timestamp_ms < *last_ts) in_order = false;
      last_ts = r.timestamp_ms;
    }
    if (second_pass) return true;  // the first pass validated the sessions
    Later* later = nullptr;
    if (!r.session_id.empty()) {
      auto [it, fresh] = seen.try_emplace(r.session_id);
      if (!fresh) later = &it->second;
    }
    if (!later) {  // a first turn
      if (need_ts && !r.timestamp_ms) report(r.where + ": missing field 'timestamp' (required in fixed-schedule mode)");
      return true;
    }
    const int kind = r.delay_ms ? 1 : r.timestamp_ms ? 2 : 0;
    if (kind == 0) return true;
    if (later->kind == 0) {
      *later = Later{kind, reader.line().file, reader.line().number};
    } else if (later->kind != kind) {
      report(r.where + ": session '" + r.session_id + "' mixes 'delay' and 'timestamp' on later turns (" +
             io::Line{{}, later->file, later->line}.where() + " uses '" + (later->kind == 1 ? "delay" : "timestamp") +
             "'): ambiguous");
    }
    return true;
  }
  void finish() {
    done = true;
    if (format_mismatches > 1)
      report(std::to_string(format_mismatches) + " rows in all are not " + name_in(kDatasetTypes, w.dataset_type) +
             " rows (the first is named above)");
    if (!quiet) reader.summarize();
    w.skipped_rows = reader.malformed();
    if (reader.out_of_range())  // each was reported with its file:line and field; the run is refused
      report(std::to_string(reader.out_of_range()) + " row(s) with an integer out of 64-bit range");
  }
};

WorkloadReader::WorkloadReader(const std::vector<std::string>& paths, const WorkloadOptions& options, bool second_pass)
    : s_(std::make_unique<State>(paths, options, second_pass)) {}
WorkloadReader::~WorkloadReader() = default;

bool WorkloadReader::next(WorkloadRow& r) {
  State& s = *s_;
  if (s.done) return false;
  std::string_view text;
  for (;;) {
    if (!s.pending.empty()) {
      r = std::move(s.pending.front());
      s.pending.pop_front();
    } else if (!s.reader.next_line(text)) {
      break;
    } else {
      r.where = s.reader.line().where();
      if (s.w.dataset_type == DatasetType::kAuto && s.opts.dataset_type != DatasetType::kAuto)
        s.w.dataset_type = s.opts.dataset_type;
      const bool mooncake = s.w.dataset_type == DatasetType::kAuto || s.w.dataset_type == DatasetType::kMooncakeTrace;
      if (mooncake && parse_workload_line_fast(text, s.w.block_size, r)) {
        s.reader.accept_line();
        if (s.w.dataset_type == DatasetType::kAuto) s.w.dataset_type = DatasetType::kMooncakeTrace;
      } else {
        if (!s.reader.parse_line_dom(s.obj)) continue;
        if (!s.obj["event_type"].error() || !s.obj["schema"].error()) {  // is_trace_record: Dynamo records are rare
          s.dynamo.emplace_back(io::to_json(s.obj), r.where);
          continue;
        }
        if (!s.obj["turns"].error() || !s.obj["text"].error() || !s.obj["texts"].error() || !mooncake) {
          // An AIPerf line (or one in a workload declared as such): its rows, the first now.
          const Json row = io::to_json(s.obj);
          const auto format = s.format_of(row, r.where);
          if (!format) continue;
          if (*format != DatasetType::kMooncakeTrace) {
            std::vector<WorkloadRow> rows;
            std::string err;
            if (!aiperf_rows(row, *format, r.where, rows, &err)) {
              s.report(r.where + ": " + err);
              continue;
            }
            s.pending.assign(std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
            continue;
          }
        }
        std::string err;
        if (!parse_workload_object(s.obj, s.w.block_size, r, &err)) {
          s.report(r.where + ": " + err);
          continue;
        }
        if (s.w.dataset_type == DatasetType::kAuto) s.w.dataset_type = DatasetType::kMooncakeTrace;
      }
    }
    if (!s.check(r)) continue;
    r.index = s.rows++;
    return true;
  }
  s.finish();
  return false;
}

Workload& WorkloadReader::meta() { return s_->w; }
bool WorkloadReader::in_time_order() const { return s_->in_order; }
std::vector<std::pair<Json, std::string>>& WorkloadReader::dynamo() { return s_->dynamo; }

Workload load_workload(const std::vector<std::string>& paths, const WorkloadOptions& opts) {
  WorkloadReader in(paths, opts);
  WorkloadRow r;
  std::vector<WorkloadRow> rows;
  while (in.next(r)) rows.push_back(std::move(r));
  Workload& w = in.meta();
  w.rows = std::move(rows);
  auto report = [&](const std::string& msg) {
    diag::error("", msg);
    w.errors.push_back(msg);
  };
  auto& dynamo = in.dynamo();
  if (!dynamo.empty()) {
    if (!w.rows.empty()) report("input mixes Dynamo trace records and workload rows");
    Workload d = workload_from_dynamo(dynamo, opts.block_size);
    d.skipped_rows = w.skipped_rows;
    if (d.no_replay_rows) {
      // Never silently: each such record is a request the replay would lose.
      std::string msg = std::to_string(d.no_replay_rows) + " request_end record" + (d.no_replay_rows == 1 ? "" : "s") +
                        " without request.replay (the prompt's sequence hashes a replay needs; dyn-route serve and "
                        "dyn-trace capture write them)";
      if (d.rows.empty()) d.errors.push_back(msg + ": nothing to replay");
      else diag::warning("", msg + " left out"), ++d.warnings;
    }
    for (auto& e : d.errors) diag::error("", e);
    d.errors.insert(d.errors.begin(), w.errors.begin(), w.errors.end());
    for (auto& r : d.rows) {
      if (!r.hash_ids_consistent) {
        uint64_t need = (r.input_length + d.block_size - 1) / d.block_size;
        std::string msg = r.where + ": input_length " + std::to_string(r.input_length) + " needs " +
                          std::to_string(need) + " sequence hashes at block size " + std::to_string(d.block_size) +
                          ", row has " + std::to_string(r.hash_ids.size());
        if (opts.strict_hash_ids) report(msg), d.errors.push_back(msg);
        else diag::warning("", msg), ++d.warnings;
      }
    }
    return d;
  }
  if (w.dataset_type == DatasetType::kRandomPool && !w.rows.empty()) {
    const size_t pool = w.rows.size();
    w.rows = sample_pool(w.rows, opts.pool_samples, opts.pool_seed);
    if (!opts.quiet)
      diag::note(fmt::format("random_pool: {} requests drawn with replacement from {} entries (seed {})", w.rows.size(),
                             pool, opts.pool_seed));
  }
  if (opts.sort_by_timestamp && w.has_timestamps) {
    bool sorted = true;
    for (size_t i = 1; i < w.rows.size(); ++i)
      if (w.rows[i].timestamp_ms && w.rows[i - 1].timestamp_ms && *w.rows[i].timestamp_ms < *w.rows[i - 1].timestamp_ms)
        sorted = false;
    if (!sorted) {
      std::stable_sort(w.rows.begin(), w.rows.end(), [](const WorkloadRow& a, const WorkloadRow& b) {
        return a.timestamp_ms.value_or(0) < b.timestamp_ms.value_or(0);
      });
      w.reordered = true;
      diag::warning("", "rows are not in timestamp order; sorted stably by timestamp");
    }
  }
  return w;
}

}  // namespace dyn::records
