// dyn-trace filter. The hot path is one simdjson DOM parse per line (several GB/s, well above
// zlib inflate) and a handful of key lookups; selected rows are written as the bytes that were
// read, so u64 values and number spellings survive untouched (case 26).
#include "dyn/trace/filter.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "dyn/base/diag.h"
#include "dyn/base/json_write.h"
#include "dyn/records/reader.h"

namespace dyn::trace {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

bool valid_segment(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '$' || c == '@')) return false;
  return true;
}

Expected<std::vector<std::string>> split_path(std::string_view p) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t dot = p.find('.', pos);
    std::string_view seg = p.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    if (!valid_segment(seg))
      return Error{"bad field path '" + std::string(p) + "': segments are [A-Za-z0-9_-] separated by '.'", kExitUsage};
    out.emplace_back(seg);
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return out;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Walks a split path from a row (split_path gives at least one segment). All-digit segments
/// index arrays.
bool lookup(simdjson::dom::object row, const std::vector<std::string>& path, element* out) {
  element e;
  if (row.at_key(path.front()).get(e) != simdjson::SUCCESS) return false;
  for (size_t i = 1; i < path.size(); ++i) {
    const std::string& seg = path[i];
    if (e.type() == element_type::OBJECT) {
      if (e.get_object().value_unsafe().at_key(seg).get(e) != simdjson::SUCCESS) return false;
    } else if (e.type() == element_type::ARRAY && !seg.empty() && std::isdigit(static_cast<unsigned char>(seg[0]))) {
      size_t idx = 0;
      auto [p, ec] = std::from_chars(seg.data(), seg.data() + seg.size(), idx);
      if (ec != std::errc() || p != seg.data() + seg.size()) return false;
      if (e.get_array().value_unsafe().at(idx).get(e) != simdjson::SUCCESS) return false;
    } else {
      return false;
    }
  }
  *out = e;
  return true;
}

bool lookup_string(simdjson::dom::object root, const std::vector<std::string>& path, std::string_view* out) {
  element e;
  if (!lookup(root, path, &e)) return false;
  return e.get_string().get(*out) == simdjson::SUCCESS;
}

/// Decimal text of a scalar id (string as-is, integers exactly); false for other types.
bool id_text(element e, std::string& buf, std::string_view* out) {
  switch (e.type()) {
    case element_type::STRING: *out = e.get_string().value_unsafe(); return true;
    case element_type::INT64: buf = std::to_string(e.get_int64().value_unsafe()); break;
    case element_type::UINT64: buf = std::to_string(e.get_uint64().value_unsafe()); break;
    default: return false;
  }
  *out = buf;
  return true;
}

template <class T>
int cmp3(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

bool apply_order(Where::Op op, int c) {
  switch (op) {
    case Where::Op::kEq: return c == 0;
    case Where::Op::kNe: return c != 0;
    case Where::Op::kLt: return c < 0;
    case Where::Op::kLe: return c <= 0;
    case Where::Op::kGt: return c > 0;
    case Where::Op::kGe: return c >= 0;
    case Where::Op::kContains: return false;
  }
  return false;
}

/// Exact comparison of a JSON number with the VALUE number: integer against integer through
/// __int128 (covers every int64 and uint64), anything involving a fraction through long double.
int compare_numbers(element v, const Where& w) {
  __int128 a = 0;
  bool a_int = true;
  long double ad = 0;
  switch (v.type()) {
    case element_type::INT64:
      a = v.get_int64().value_unsafe();
      ad = static_cast<long double>(a);
      break;
    case element_type::UINT64:
      a = v.get_uint64().value_unsafe();
      ad = static_cast<long double>(a);
      break;
    default:
      a_int = false;
      ad = v.get_double().value_unsafe();
      break;
  }
  if (a_int && w.num != Where::Num::kDouble) {
    __int128 b = w.num == Where::Num::kInt ? static_cast<__int128>(w.i) : static_cast<__int128>(w.u);
    return cmp3(a, b);
  }
  long double bd = w.num == Where::Num::kInt    ? static_cast<long double>(w.i)
                   : w.num == Where::Num::kUint ? static_cast<long double>(w.u)
                                                : static_cast<long double>(w.d);
  return cmp3(ad, bd);
}

bool eval_where(const Where& w, bool present, element v) {
  if (!present) return w.op == Where::Op::kNe;
  switch (v.type()) {
    case element_type::STRING: {
      std::string_view s = v.get_string().value_unsafe();
      if (w.op == Where::Op::kContains) return s.find(w.text) != std::string_view::npos;
      return apply_order(w.op, cmp3(s.compare(w.text), 0));
    }
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: {
      if (w.op == Where::Op::kContains) {
        std::string t = simdjson::minify(v);
        return t.find(w.text) != std::string::npos;
      }
      if (w.quoted || w.num == Where::Num::kNone) return w.op == Where::Op::kNe;
      return apply_order(w.op, compare_numbers(v, w));
    }
    default: {
      std::string t = simdjson::minify(v);
      if (w.op == Where::Op::kContains) return t.find(w.text) != std::string::npos;
      if (w.op == Where::Op::kEq) return t == w.text;
      if (w.op == Where::Op::kNe) return t != w.text;
      return false;
    }
  }
}

// --- output helpers ---------------------------------------------------------------------------

void append_tsv(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
}

void append_csv_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

/// Shortest round-trip text of a double, integral values without a fraction (as jq and
/// JavaScript print them: 110.000 in the input becomes 110).
void append_double(std::string& out, double d) {
  char b[64];
  auto [p, ec] = std::abs(d) < 1e17 && std::floor(d) == d ? std::to_chars(b, b + sizeof b, static_cast<int64_t>(d))
                                                          : std::to_chars(b, b + sizeof b, d);
  out.append(b, ec == std::errc() ? static_cast<size_t>(p - b) : 0);
}

/// Appends one projected value in the chosen format.
void append_value(std::string& out, FilterFormat f, bool present, element v) {
  if (present && v.type() == element_type::DOUBLE) {
    append_double(out, v.get_double().value_unsafe());
    return;
  }
  if (f == FilterFormat::kJsonl) {
    if (!present) out += "null";
    else out += simdjson::minify(v);
    return;
  }
  if (!present || v.type() == element_type::NULL_VALUE) return;
  if (v.type() == element_type::STRING) {
    std::string_view s = v.get_string().value_unsafe();
    if (f == FilterFormat::kTsv) append_tsv(out, s);
    else append_csv_quoted(out, s);
    return;
  }
  std::string t = simdjson::minify(v);
  if (f == FilterFormat::kCsv && (v.type() == element_type::OBJECT || v.type() == element_type::ARRAY))
    append_csv_quoted(out, t);
  else if (f == FilterFormat::kTsv) append_tsv(out, t);
  else out += t;
}

const std::vector<std::string> kEventType{"event_type"};
const std::vector<std::string> kEventTime{"event_time_unix_ms"};
const std::vector<std::string> kSessionPaths[] = {
    {"agent_context", "session_id"}, {"agent_context", "trajectory_id"}, {"session_id"}};
const std::vector<std::string> kParentPaths[] = {{"agent_context", "parent_session_id"},
                                                 {"agent_context", "parent_trajectory_id"}};
const std::vector<std::string> kWorker{"request", "worker", "decode_worker_id"};

}  // namespace

Expected<Where> parse_where(std::string_view expr) {
  // The operator is the first of = ! < > ~ outside the field name.
  size_t at = expr.find_first_of("=!<>~");
  if (at == std::string_view::npos)
    return Error{"--where '" + std::string(expr) + "': expected FIELD OP VALUE with OP one of = != < <= > >= ~",
                 kExitUsage};
  Where w;
  std::string_view field = trim_spaces(expr.substr(0, at));
  std::string_view rest = expr.substr(at);
  size_t oplen = 1;
  if (rest.substr(0, 2) == "!=") w.op = Where::Op::kNe, oplen = 2;
  else if (rest.substr(0, 2) == "<=") w.op = Where::Op::kLe, oplen = 2;
  else if (rest.substr(0, 2) == ">=") w.op = Where::Op::kGe, oplen = 2;
  else if (rest.substr(0, 2) == "==") w.op = Where::Op::kEq, oplen = 2;
  else if (rest[0] == '=') w.op = Where::Op::kEq;
  else if (rest[0] == '<') w.op = Where::Op::kLt;
  else if (rest[0] == '>') w.op = Where::Op::kGt;
  else if (rest[0] == '~') w.op = Where::Op::kContains;
  else return Error{"--where '" + std::string(expr) + "': '!' must be followed by '='", kExitUsage};
  if (field.empty()) return Error{"--where '" + std::string(expr) + "': missing field", kExitUsage};
  auto path = split_path(field);
  if (!path) return Error{"--where '" + std::string(expr) + "': " + path.error().message, kExitUsage};
  w.path = std::move(*path);
  w.field = std::string(field);
  std::string_view value = trim_spaces(rest.substr(oplen));
  if (!value.empty() && std::string_view("=!<>~").find(value.front()) != std::string_view::npos) {
    // "a >> 3", "a =< 3", "a => 3": an operator that is not one; a value really starting with
    // one of these characters is written quoted.
    return Error{"--where '" + std::string(expr) + "': unknown operator '" + std::string(rest.substr(0, oplen + 1)) +
                     "' (OP is one of = != < <= > >= ~; quote a value that starts with one of these)",
                 kExitUsage};
  }
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    w.quoted = true;
    value = value.substr(1, value.size() - 2);
  }
  w.text = std::string(value);
  if (!w.quoted && !value.empty()) {
    const char* b = value.data();
    const char* e = b + value.size();
    if (value[0] == '-') {
      auto [p, ec] = std::from_chars(b, e, w.i);
      if (ec == std::errc() && p == e) w.num = Where::Num::kInt;
    } else {
      auto [p, ec] = std::from_chars(b, e, w.u);
      if (ec == std::errc() && p == e) w.num = Where::Num::kUint;
    }
    if (w.num == Where::Num::kNone) {
      auto [p, ec] = std::from_chars(b, e, w.d);
      if (ec == std::errc() && p == e && std::isfinite(w.d)) w.num = Where::Num::kDouble;
    }
    // Normalize a non-negative integer into the unsigned slot so comparisons see one kind.
    if (w.num == Where::Num::kInt && w.i >= 0) w.u = static_cast<uint64_t>(w.i), w.num = Where::Num::kUint;
  }
  return w;
}

Expected<std::vector<FieldSpec>> parse_fields(std::string_view list) {
  std::vector<FieldSpec> out;
  size_t pos = 0;
  for (;;) {
    size_t comma = list.find(',', pos);
    std::string_view item =
        trim_spaces(list.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (item.empty()) return Error{"--fields '" + std::string(list) + "': empty field name", kExitUsage};
    FieldSpec f;
    std::string_view path = item;
    if (size_t eq = item.find('='); eq != std::string_view::npos) {
      f.name = std::string(trim_spaces(item.substr(0, eq)));
      path = trim_spaces(item.substr(eq + 1));
      if (f.name.empty()) return Error{"--fields '" + std::string(item) + "': empty name before '='", kExitUsage};
    } else {
      f.name = std::string(item);
    }
    auto p = split_path(path);
    if (!p) return Error{"--fields: " + p.error().message, kExitUsage};
    f.path = std::move(*p);
    out.push_back(std::move(f));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool compare_where(const Where& w, std::optional<std::string_view> json_value) {
  if (!json_value) return eval_where(w, false, element());
  simdjson::dom::parser parser;
  element e;
  if (parser.parse(json_value->data(), json_value->size(), true).get(e) != simdjson::SUCCESS) return false;
  return eval_where(w, true, e);
}

int filter_traces(const FilterOptions& o, io::Output& out) {
  if (o.format != FilterFormat::kJsonl && o.fields.empty())
    throw Fatal(kExitUsage, "--format tsv and csv need --fields to name the columns");
  records::RowReader reader(o.inputs, io::JsonlOptions{.lines = {.strict = o.strict}});
  // Whether each --where / --fields path was ever present: a misspelt field silently matches
  // nothing (or prints empty columns), so one never seen is warned about once at the end.
  std::vector<bool> where_seen(o.where.size(), false), field_seen(o.fields.size(), false);
  std::set<std::string, std::less<>> family;  // --with-subagents: the session and its descendants
  if (o.session) family.insert(*o.session);
  std::string row_out, scratch, idbuf, ownbuf;

  if (!o.fields.empty() && o.format != FilterFormat::kJsonl && o.header) {
    row_out.clear();
    for (size_t i = 0; i < o.fields.size(); ++i) {
      if (i) row_out += o.format == FilterFormat::kTsv ? '\t' : ',';
      if (o.format == FilterFormat::kTsv) append_tsv(row_out, o.fields[i].name);
      else append_csv_quoted(row_out, o.fields[i].name);
    }
    out.line(row_out);
  }

  // The row's own session id is the most specific one present (the older schema's trajectory_id,
  // else session_id); the run-level agent_context.session_id of that schema also matches.
  auto session_match = [&](simdjson::dom::object row) {
    std::string_view own;
    bool has_own = false;
    for (const auto& p : {kSessionPaths[1], kSessionPaths[0], kSessionPaths[2]}) {
      element e;
      std::string_view s;
      if (!lookup(row, p, &e) || !id_text(e, idbuf, &s)) continue;
      if (s == *o.session) return true;
      if (!has_own) {
        ownbuf.assign(s);  // idbuf is reused by the next lookup
        own = ownbuf;
        has_own = true;
      }
    }
    if (!o.with_subagents) return false;
    if (has_own && family.count(own)) return true;
    for (const auto& p : kParentPaths) {
      element e;
      std::string_view parent;
      if (lookup(row, p, &e) && id_text(e, idbuf, &parent) && family.count(parent)) {
        if (has_own) family.emplace(own);
        return true;
      }
    }
    return false;
  };

  simdjson::dom::object row;
  while (reader.next_dom(row)) {
    // Session first: with --with-subagents it learns descendants from every row of the family,
    // including rows the other selectors then drop.
    if (o.session && !session_match(row)) continue;
    if (!o.events.empty()) {
      std::string_view et;
      if (!lookup_string(row, kEventType, &et)) continue;
      if (std::find(o.events.begin(), o.events.end(), et) == o.events.end()) continue;
    }
    if (o.since_ms || o.until_ms) {
      element e;
      if (!lookup(row, kEventTime, &e)) continue;
      long double tm;
      if (e.type() == element_type::UINT64) tm = static_cast<long double>(e.get_uint64().value_unsafe());
      else if (e.type() == element_type::INT64) tm = static_cast<long double>(e.get_int64().value_unsafe());
      else if (e.type() == element_type::DOUBLE) tm = e.get_double().value_unsafe();
      else continue;
      if (o.since_ms && tm < static_cast<long double>(*o.since_ms)) continue;
      if (o.until_ms && !(tm < static_cast<long double>(*o.until_ms))) continue;
    }
    if (o.parent) {
      bool ok = false;
      for (const auto& p : kParentPaths) {
        std::string_view s;
        if (lookup_string(row, p, &s)) {
          ok = s == *o.parent;
          break;
        }
      }
      if (!ok) continue;
    }
    if (o.worker) {
      element e;
      std::string_view s;
      if (!lookup(row, kWorker, &e) || !id_text(e, idbuf, &s) || s != *o.worker) continue;
    }
    bool pass = true;
    for (size_t i = 0; i < o.where.size(); ++i) {
      element e;
      if (!pass) {  // decided; only learn whether the field exists
        if (!where_seen[i] && lookup(row, o.where[i].path, &e)) where_seen[i] = true;
        continue;
      }
      bool present = lookup(row, o.where[i].path, &e);
      if (present) where_seen[i] = true;
      if (!eval_where(o.where[i], present, e)) pass = false;
    }
    if (!pass) continue;

    if (o.fields.empty()) {
      if (reader.enveloped()) {
        scratch = simdjson::minify(row);
        out.line(scratch);
      } else {
        out.line(reader.line().text);
      }
      continue;
    }
    row_out.clear();
    if (o.format == FilterFormat::kJsonl) row_out += '{';
    for (size_t i = 0; i < o.fields.size(); ++i) {
      element e;
      bool present = lookup(row, o.fields[i].path, &e);
      if (present) field_seen[i] = true;
      if (o.format == FilterFormat::kJsonl) {
        if (i) row_out += ',';
        append_json_string_replace(row_out, o.fields[i].name);  // a name from the command line
        row_out += ':';
      } else if (i) {
        row_out += o.format == FilterFormat::kTsv ? '\t' : ',';
      }
      append_value(row_out, o.format, present, e);
    }
    if (o.format == FilterFormat::kJsonl) row_out += '}';
    out.line(row_out);
  }
  reader.summarize();
  const uint64_t rows_read = reader.rows();
  if (rows_read > 0) {
    for (size_t i = 0; i < o.where.size(); ++i)
      if (!where_seen[i])
        diag::warning("", "--where field '" + o.where[i].field + "' is in none of the " + std::to_string(rows_read) +
                              " rows read (misspelt?)");
    bool any_out = false;  // --fields is judged on the rows printed
    for (bool b : field_seen) any_out = any_out || b;
    for (size_t i = 0; i < o.fields.size() && any_out; ++i)
      if (!field_seen[i])
        diag::warning("", "--fields '" + o.fields[i].name + "' is in none of the rows printed (misspelt?)");
  }
  if (o.strict && (reader.truncated_files() > 0 || reader.malformed() > 0)) return kExitBadData;
  return kExitOk;
}

}  // namespace dyn::trace
