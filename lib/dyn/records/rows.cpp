// The one serializer of each record type (see rows.h); hand-written for speed, matching
// Json::dump() byte for byte (tests/unit/test_trace_rows.cpp holds the goldens).
#include "dyn/records/rows.h"

#include <charconv>
#include <cstring>
#include <type_traits>

#include "dyn/base/json_write.h"
#include "dyn/records/record.h"

namespace dyn::records {

// Named (not anonymous): unity builds merge this module's files into one translation unit.
namespace rows_impl {

// `,"key":` — keys are literals chosen here, so they need no escaping.
void key(std::string& o, std::string_view k) {
  o += ",\"";
  o += k;
  o += "\":";
}
void num(std::string& o, std::string_view k, uint64_t v) {
  key(o, k);
  append_json_number(o, v);
}
void num(std::string& o, std::string_view k, int64_t v) {
  key(o, k);
  append_json_number(o, v);
}
void num(std::string& o, std::string_view k, double v) {
  key(o, k);
  append_json_number(o, v);
}
void str(std::string& o, std::string_view k, std::string_view v) {
  key(o, k);
  append_json_string_replace(o, v);
}
template <class T>
void array(std::string& o, std::string_view k, std::span<const T> v) {
  key(o, k);
  o += '[';
  if constexpr (std::is_same_v<T, uint64_t>) {
    append_json_numbers(o, v);
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) o += ',';
      append_json_number(o, v[i]);
    }
  }
  o += ']';
}
void flag(std::string& o, std::string_view k, bool v) {
  key(o, k);
  o += v ? "true" : "false";
}

// `{"schema":...,"event_type":...,"event_time_unix_ms":`: the same bytes on every row of a type,
// so they are escaped once (the writer's per-row cost is mostly appends; issue 17's profile).
std::string head_prefix(std::string_view event_type) {
  std::string o = R"({"schema":)";
  append_json_string(o, kSchema);
  str(o, "event_type", event_type);
  key(o, "event_time_unix_ms");
  return o;
}

// {"schema", "event_type", "event_time_unix_ms", "event_source"} without the closing brace;
// `prefix` is head_prefix(event type).
void head(std::string& o, const std::string& prefix, uint64_t t, std::string_view source) {
  o += prefix;
  append_json_number(o, t);
  str(o, "event_source", source);
}

void agent_context(std::string& o, const ContextRef& c) {
  if (c.session_id.empty()) return;
  key(o, "agent_context");
  session::append_agent_context(o, c.session_id, c.parent_session_id, c.session_final, c.compaction, c.priority,
                                c.strict_priority);
}

}  // namespace rows_impl

void append_request_end(std::string& o, const RequestEnd& r) {
  using namespace rows_impl;
  static const std::string prefix = head_prefix(event::kRequestEnd);
  head(o, prefix, r.event_time_unix_ms, r.event_source);
  agent_context(o, r.agent_context);

  o += R"(,"request":{"request_id":)";
  append_json_string_replace(o, r.request_id);
  if (r.x_request_id) str(o, "x_request_id", *r.x_request_id);
  if (r.model) str(o, "model", *r.model);
  num(o, "input_tokens", r.input_tokens);
  if (r.output_tokens) num(o, "output_tokens", *r.output_tokens);
  if (r.cached_tokens) num(o, "cached_tokens", *r.cached_tokens);
  num(o, "request_received_ms", r.request_received_ms);
  if (r.ttft_ms) num(o, "ttft_ms", *r.ttft_ms);
  if (r.total_time_ms) num(o, "total_time_ms", *r.total_time_ms);
  if (r.avg_itl_ms) num(o, "avg_itl_ms", *r.avg_itl_ms);
  if (r.kv_hit_rate) num(o, "kv_hit_rate", *r.kv_hit_rate);
  if (r.queue_depth) num(o, "queue_depth", *r.queue_depth);
  if (r.worker) {
    o += R"(,"worker":{"decode_worker_id":)";
    append_json_number(o, *r.worker);
    o += '}';
  } else if (r.worker_text) {
    o += R"(,"worker":{"decode_worker_id":)";
    append_json_string_replace(o, *r.worker_text);
    o += '}';
  }
  if (r.replay) {
    o += R"(,"replay":{"trace_block_size":)";
    append_json_number(o, r.replay->trace_block_size);
    num(o, "input_length", r.replay->input_length);
    array(o, "input_sequence_hashes", r.replay->input_sequence_hashes);
    o += '}';
  }
  if (r.finish_reason || !r.tool_calls.empty()) {
    o += R"(,"finish_reason_metadata":{)";
    bool first = true;
    if (r.finish_reason) {
      o += R"("finish_reason":)";
      append_json_string_replace(o, *r.finish_reason);
      first = false;
    }
    if (!r.tool_calls.empty()) {
      o += first ? R"("tool_calls":[)" : R"(,"tool_calls":[)";
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        const RequestEnd::ToolCall& tc = r.tool_calls[i];
        o += i ? R"(,{"choice_index":)" : R"({"choice_index":)";
        append_json_number(o, tc.choice_index);
        num(o, "tool_call_index", tc.tool_call_index);
        if (!tc.id.empty()) str(o, "id", tc.id);
        if (!tc.name.empty()) str(o, "name", tc.name);
        o += '}';
      }
      o += ']';
    }
    o += '}';
  }

  o += R"(},"dyn":{"status":)";
  append_json_string(o, r.status);
  if (r.error) {
    o += R"(,"error":{"code":)";
    append_json_number(o, r.error->code);
    str(o, "type", r.error->type);
    str(o, "message", r.error->message);
    o += '}';
  }
  if (r.warning) str(o, "warning", *r.warning);
  if (r.ttst_ms) num(o, "ttst_ms", *r.ttst_ms);
  if (r.inter_chunk_ms) array(o, "inter_chunk_ms", *r.inter_chunk_ms);
  if (r.chunk_tokens) array(o, "chunk_tokens", *r.chunk_tokens);
  if (r.request_latency_ms) num(o, "request_latency_ms", *r.request_latency_ms);
  if (r.schedule_lag_ms) num(o, "schedule_lag_ms", *r.schedule_lag_ms);
  if (r.scheduled_ms) num(o, "scheduled_ms", *r.scheduled_ms);
  if (r.hash_ids) array(o, "hash_ids", *r.hash_ids);
  if (r.block_size) num(o, "block_size", *r.block_size);
  if (r.turn) num(o, "turn", *r.turn);
  if (r.binding) str(o, "binding", *r.binding);
  if (r.rebind_reason) str(o, "rebind_reason", *r.rebind_reason);
  if (r.retries) num(o, "retries", r.retries);
  if (r.migrations) num(o, "migrations", r.migrations);
  if (!r.attempts.empty()) {
    o += R"(,"attempts":[)";
    for (size_t i = 0; i < r.attempts.size(); ++i) {
      const RequestEnd::Attempt& a = r.attempts[i];
      o += i ? R"(,{"worker":)" : R"({"worker":)";
      append_json_number(o, a.worker);
      str(o, "stage", a.stage);
      str(o, "error", a.error);
      num(o, "status", a.status);
      str(o, "circuit", a.circuit);
      num(o, "tokens_sent", a.tokens_sent);
      o += '}';
    }
    o += ']';
  }
  if (r.pause_ms) num(o, "pause_ms", *r.pause_ms);
  if (r.queue_ms) num(o, "queue_ms", *r.queue_ms);
  if (r.router_queue_ms) num(o, "router_queue_ms", *r.router_queue_ms);
  if (r.policy_class) str(o, "policy_class", *r.policy_class);
  if (r.priority_source) str(o, "priority_source", *r.priority_source);
  if (r.warmup) flag(o, "warmup", true);
  if (r.input_tokens_estimated) flag(o, "input_tokens_estimated", true);
  if (r.output_tokens_estimated) flag(o, "output_tokens_estimated", true);
  if (r.prompt_sizing) {
    o += R"(,"prompt_sizing":{"input_length":)";
    append_json_number(o, r.prompt_sizing->input_length);
    num(o, "tokenizer_tokens", r.prompt_sizing->tokenizer_tokens);
    o += '}';
  }
  if (r.quality) {
    num(o, "predicted_cached_tokens", r.quality->predicted_cached_tokens);
    if (r.cached_tokens)
      num(o, "stale_cached_tokens",
          static_cast<int64_t>(r.quality->predicted_cached_tokens) - static_cast<int64_t>(*r.cached_tokens));
    num(o, "avoidable_prefill_tokens", r.quality->avoidable_prefill_tokens);
    flag(o, "kv_optimal", r.quality->non_max_cause.empty());
    if (!r.quality->non_max_cause.empty()) str(o, "non_max_cause", r.quality->non_max_cause);
  }
  if (r.cached_tokens_by_tier) {
    const auto& t = *r.cached_tokens_by_tier;
    o += R"(,"cached_tokens_by_tier":{"g1":)";
    append_json_number(o, t[0]);
    num(o, "g2", t[1]);
    num(o, "g3", t[2]);
    num(o, "g4", t[3]);
    o += '}';
  }
  if (!r.kv_hints.empty()) {
    o += R"(,"kv_hints":[)";
    for (size_t i = 0; i < r.kv_hints.size(); ++i) {
      const RequestEnd::KvHint& h = r.kv_hints[i];
      o += i ? R"(,{"policy":)" : R"({"policy":)";
      append_json_string_replace(o, h.policy);
      str(o, "action_type", h.action_type);
      str(o, "via", h.via);
      num(o, "worker", h.worker);
      o += '}';
    }
    o += ']';
  }
  o += "}}";
}

namespace rows_impl {

// A row written straight into the string's storage: room is made once for everything the row
// can hold outside with(), literals are copied at their compile-time lengths, numbers are formed
// in place, and one truncating resize ends it. dyn-route decide writes one route_decision row per
// input row, and the appends of a writer on std::string (a capacity check and a memcpy call each,
// some twenty a row) were most of its cost (issue 17).
class RawRow {
 public:
  // `room`: bytes the row may write outside with(), literals and plain strings included.
  RawRow(std::string& o, size_t room) : o_(o), room_(room) { open(o_.size()); }
  ~RawRow() { close(); }
  RawRow(const RawRow&) = delete;
  RawRow& operator=(const RawRow&) = delete;
  template <size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void bytes(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  // append_json_string_replace(s): plain strings copied between quotes, the rest through it.
  void str(std::string_view s) {
    if (!json_string_is_plain(s)) return with([&](std::string& o) { append_json_string_replace(o, s); });
    *p_++ = '"';
    bytes(s);
    *p_++ = '"';
  }
  void u64(uint64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }
  void i64(int64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }
  void dbl(double v) { p_ = write_json_number(p_, v); }
  void flag(bool v) { v ? lit("true") : lit("false"); }
  // A piece written by a std::string writer (escaped text, agent_context): the row so far is
  // closed, `f` appends to it, and room is made again.
  template <class F>
  void with(F&& f) {
    close();
    f(o_);
    open(o_.size());
  }

 private:
  void open(size_t at) {
    o_.resize(at + room_);
    p_ = o_.data() + at;
  }
  void close() { o_.resize(static_cast<size_t>(p_ - o_.data())); }
  std::string& o_;
  const size_t room_;
  char* p_ = nullptr;
};

}  // namespace rows_impl

void append_route_decision(std::string& o, const RouteDecision& d) {
  using namespace rows_impl;
  // The constant head and source are escaped once.
  static const std::string prefix = head_prefix(event::kRouteDecision);
  static const std::string source = [] {
    std::string s;
    str(s, "event_source", "router");
    return s;
  }();
  // Room: the head, the strings copied in place, and at most 256 bytes of keys and numbers for the
  // row plus 320 for each explain entry (8 numbers of at most 32 characters and their keys).
  RawRow w(o, prefix.size() + source.size() + d.request_id.size() + d.x_request_id.size() + d.binding.size() +
                  d.rebind_reason.size() + (d.error ? d.error->message.size() : 0) + 256 + (d.quality ? 384 : 0) +
                  d.candidates.size() * 320);
  w.bytes(prefix);
  w.u64(d.event_time_unix_ms);
  w.bytes(source);
  if (!d.agent_context.session_id.empty()) w.with([&](std::string& s) { agent_context(s, d.agent_context); });
  w.lit(R"(,"request":{"request_id":)");
  w.str(d.request_id);
  if (!d.x_request_id.empty()) {
    w.lit(R"(,"x_request_id":)");
    w.str(d.x_request_id);
  }
  w.lit(R"(,"input_tokens":)");
  w.u64(d.input_tokens);
  if (d.output_tokens) {
    w.lit(R"(,"output_tokens":)");
    w.u64(*d.output_tokens);
  }
  if (d.error) {
    w.lit(R"(},"dyn":{"binding":"none","error":{"code":)");
    w.i64(d.error->code);
    w.lit(R"(,"message":)");
    w.str(d.error->message);
    w.lit("}}}");
    return;
  }
  w.lit(R"(,"cached_tokens":)");
  w.u64(d.cached_tokens);
  w.lit(R"(,"kv_hit_rate":)");
  w.dbl(d.kv_hit_rate);
  w.lit(R"(,"worker":{"decode_worker_id":)");
  w.i64(d.worker);
  w.lit(R"(}},"dyn":{"binding":)");
  w.str(d.binding);
  if (!d.rebind_reason.empty()) {
    w.lit(R"(,"rebind_reason":)");
    w.str(d.rebind_reason);
  }
  w.lit(R"(,"request_blocks":)");
  w.u64(d.request_blocks);
  if (d.quality) {
    const RouteDecision::Quality& q = *d.quality;
    w.lit(R"(,"block_size":)");
    w.u64(q.block_size);
    if (q.margin) {
      w.lit(R"(,"margin":)");
      w.dbl(*q.margin);
    }
    w.lit(R"(,"ties":)");
    w.u64(q.ties);
    w.lit(R"(,"avoidable_prefill_tokens":)");
    w.u64(q.avoidable_prefill_tokens);
    w.lit(R"(,"kv_optimal":)");
    w.flag(q.non_max_cause.empty());
    if (!q.non_max_cause.empty()) {
      w.lit(R"(,"non_max_cause":)");
      w.str(q.non_max_cause);
    }
    if (q.router_queue_ms) {
      w.lit(R"(,"router_queue_ms":)");
      w.dbl(*q.router_queue_ms);
    }
    if (q.pause_ms) {
      w.lit(R"(,"pause_ms":)");
      w.dbl(*q.pause_ms);
    }
    w.lit(R"(,"attempt":)");
    w.u64(q.attempt);
  }
  if (d.explain) {
    w.lit(R"(,"explain":{"request_blocks":)");
    w.u64(d.request_blocks);
    w.lit(R"(,"workers":[)");
    for (size_t i = 0; i < d.candidates.size(); ++i) {
      const RouteDecision::Candidate& c = d.candidates[i];
      if (i) w.lit(",");
      w.lit(R"({"worker":)");
      w.u64(c.worker);
      w.lit(R"(,"overlap_blocks":)");
      w.u64(c.overlap_blocks);
      if (c.host_blocks) {
        w.lit(R"(,"host_blocks":)");
        w.u64(c.host_blocks);
      }
      if (c.disk_blocks) {
        w.lit(R"(,"disk_blocks":)");
        w.u64(c.disk_blocks);
      }
      if (c.shared_blocks) {
        w.lit(R"(,"shared_blocks":)");
        w.u64(c.shared_blocks);
      }
      w.lit(R"(,"prefill_blocks":)");
      w.dbl(c.prefill_blocks);
      w.lit(R"(,"decode_blocks":)");
      w.dbl(c.decode_blocks);
      w.lit(R"(,"cost":)");
      w.dbl(c.cost);
      w.lit(R"(,"eligible":)");
      w.flag(c.eligible);
      w.lit("}");
    }
    w.lit("]}");
  }
  w.lit("}}");
}

void append_tool_event(std::string& o, const ToolEvent& e, const ToolEventJoin* join) {
  // A few rows per tool call: built as Json, so the key order is the struct's and dump's forms hold.
  Json row = make_record(e.event_type, e.event_time_unix_ms, "harness");
  Json ctx = {{"session_id", e.session_id}};
  if (!e.parent_session_id.empty()) ctx["parent_session_id"] = e.parent_session_id;
  row["agent_context"] = std::move(ctx);
  Json t = {{"tool_call_id", e.tool_call_id}, {"tool_class", e.tool_class}};
  if (e.status) t["status"] = *e.status;
  if (e.started_at_unix_ms) t["started_at_unix_ms"] = *e.started_at_unix_ms;
  if (e.ended_at_unix_ms) t["ended_at_unix_ms"] = *e.ended_at_unix_ms;
  if (e.duration_ms) t["duration_ms"] = *e.duration_ms;
  if (e.output_tokens) t["output_tokens"] = *e.output_tokens;
  if (e.output_bytes) t["output_bytes"] = *e.output_bytes;
  if (e.tool_name_hash) t["tool_name_hash"] = *e.tool_name_hash;
  if (e.error_type) t["error_type"] = *e.error_type;
  row["tool"] = std::move(t);
  if (join) {
    Json d = Json::object();
    if (!join->request_id.empty()) d["request_id"] = join->request_id;
    d["known_session"] = join->known_session;
    row["dyn"] = std::move(d);
  }
  o += row.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace dyn::records
