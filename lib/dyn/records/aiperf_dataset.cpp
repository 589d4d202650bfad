// AIPerf's single_turn, multi_turn and random_pool lines as workload rows.
#include "dyn/records/aiperf_dataset.h"

#include "dyn/base/random.h"

namespace dyn::records {
namespace {

/// Fields AIPerf accepts that carry media: dyn-replay sends text prompts only.
constexpr const char* kMedia[] = {"image", "images", "audio", "audios", "video", "videos", "image_uuids"};

bool fail(std::string* error, std::string msg) {
  *error = std::move(msg);
  return false;
}

/// The prompt of a turn or pool entry: "text", or "texts" (strings, or {name, contents: [str]}) joined
/// by newlines.
bool prompt_of(const Json& t, const char* type, std::string& out, std::string* error) {
  const bool has_text = t.contains("text") && !t["text"].is_null(),
             has_texts = t.contains("texts") && !t["texts"].is_null();
  if (has_text && has_texts) return fail(error, std::string(type) + ": 'text' and 'texts' cannot be set together");
  if (has_text) {
    if (!t["text"].is_string()) return fail(error, std::string(type) + ": 'text' is not a string");
    out = t["text"].get<std::string>();
    return true;
  }
  if (!has_texts) return fail(error, std::string(type) + ": no 'text' or 'texts' (dyn-replay sends text prompts)");
  if (!t["texts"].is_array()) return fail(error, std::string(type) + ": 'texts' is not an array");
  out.clear();
  auto add = [&](const Json& s) {
    if (!s.is_string()) return false;
    out += (out.empty() ? "" : "\n") + s.get<std::string>();
    return true;
  };
  for (const Json& e : t["texts"]) {
    bool ok = add(e);
    if (!ok && e.is_object() && e.contains("contents") && e["contents"].is_array()) {
      ok = true;
      for (const Json& c : e["contents"]) ok = ok && add(c);
    }
    if (!ok) return fail(error, std::string(type) + ": 'texts' holds something other than strings or {name, contents}");
  }
  return true;
}

/// A non-negative number of ms ("timestamp", "delay").
bool ms_field(const Json& t, const char* key, const char* type, std::optional<double>& out, std::string* error) {
  if (!t.contains(key) || t[key].is_null()) return true;
  if (!t[key].is_number() || !(t[key].get<double>() >= 0) || t[key].get<double>() > kMaxTimestampMs)
    return fail(error, std::string(type) + ": '" + key + "' is not a number of ms between 0 and 9e15");
  out = t[key].get<double>();
  return true;
}

/// One single_turn object (a line, a multi_turn turn, or a random_pool entry) into `r`.
bool turn_row(const Json& t, DatasetType type, WorkloadRow& r, std::string* error) {
  const char* tn = name_in(kDatasetTypes, type);
  if (!t.is_object()) return fail(error, std::string(tn) + ": a turn is not a JSON object");
  for (const char* m : kMedia)
    if (t.contains(m) && !t[m].is_null())
      return fail(error, std::string(tn) + ": '" + m + "' is not sent: dyn-replay replays text prompts only");
  if (t.contains("extra") && !t["extra"].is_null())
    return fail(error,
                std::string(tn) + ": per-turn 'extra' body fields are not sent; use --extra-inputs for all requests");
  if (t.contains("role") && !t["role"].is_null() && t["role"] != "user")
    return fail(error, std::string(tn) + ": role " + t["role"].dump() +
                           " is not replayed: dyn-replay sends each turn as one user message");
  std::string prompt;
  if (!prompt_of(t, tn, prompt, error)) return false;
  r.text_input = std::move(prompt);
  r.input_length = (r.text_input->size() + 3) / 4;  // SPEC 4.2, as a Mooncake text_input row
  if (type == DatasetType::kRandomPool) {
    for (const char* k : {"timestamp", "delay", "session_id", "output_length"})
      if (t.contains(k) && !t[k].is_null())
        return fail(error, std::string(tn) + ": '" + k + "' has no meaning in a random_pool entry (it is sampled)");
    return true;
  }
  if (!ms_field(t, "timestamp", tn, r.timestamp_ms, error) || !ms_field(t, "delay", tn, r.delay_ms, error))
    return false;
  if (r.timestamp_ms && r.delay_ms)
    return fail(error, std::string(tn) + ": 'timestamp' and 'delay' cannot be set together");
  if (t.contains("output_length") && !t["output_length"].is_null()) {
    const Json& o = t["output_length"];
    if (!o.is_number_unsigned() || o.get<uint64_t>() == 0)
      return fail(error, std::string(tn) + ": 'output_length' is not a positive integer");
    r.output_length = o.get<uint64_t>();
  }
  if (t.contains("session_id") && !t["session_id"].is_null()) {
    if (!t["session_id"].is_string()) return fail(error, std::string(tn) + ": 'session_id' is not a string");
    r.session_id = t["session_id"].get<std::string>();
  }
  return true;
}

}  // namespace

DatasetType row_shape(const Json& row) {
  if (!row.is_object()) return DatasetType::kMooncakeTrace;
  if (row.contains("turns")) return DatasetType::kMultiTurn;
  if ((row.contains("text") || row.contains("texts")) && !row.contains("input_length") && !row.contains("text_input"))
    return DatasetType::kSingleTurn;
  return DatasetType::kMooncakeTrace;
}

bool aiperf_rows(const Json& row, DatasetType type, const std::string& where, std::vector<WorkloadRow>& out,
                 std::string* error) {
  if (type != DatasetType::kMultiTurn) {
    WorkloadRow r;
    r.where = where;
    if (!turn_row(row, type, r, error)) return false;
    out.push_back(std::move(r));
    return true;
  }
  if (!row.contains("turns") || !row["turns"].is_array() || row["turns"].empty())
    return fail(error, "multi_turn: 'turns' is not a non-empty array");
  std::string session = "multi_turn-" + where.substr(where.rfind(':') + 1);
  if (row.contains("session_id") && !row["session_id"].is_null()) {
    if (!row["session_id"].is_string()) return fail(error, "multi_turn: 'session_id' is not a string");
    session = row["session_id"].get<std::string>();
  }
  size_t k = 0;
  for (const Json& t : row["turns"]) {
    WorkloadRow r;
    r.where = where;
    if (!turn_row(t, type, r, error)) {
      *error = "turn " + std::to_string(k) + ": " + *error;
      return false;
    }
    if (!r.session_id.empty() && r.session_id != session)
      return fail(error, "multi_turn: turn " + std::to_string(k) + " names session '" + r.session_id +
                             "' inside conversation '" + session + "'");
    r.session_id = session;
    out.push_back(std::move(r));
    ++k;
  }
  return true;
}

std::vector<WorkloadRow> sample_pool(const std::vector<WorkloadRow>& pool, uint64_t samples, uint64_t seed) {
  std::vector<WorkloadRow> out;
  if (pool.empty()) return out;
  Rng rng(seed);
  out.reserve(samples);
  for (uint64_t i = 0; i < samples; ++i) {
    WorkloadRow r = pool[rng.below(pool.size())];
    r.index = i;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace dyn::records
