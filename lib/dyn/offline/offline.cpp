// dyn-route normalize and decide: rows in, agent_context / route_decision rows out.
#include "dyn/offline/offline.h"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <map>
#include <queue>
#include <unordered_map>

#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/base/event_queue.h"
#include "dyn/engine/config.h"
#include "dyn/io/jsonl.h"
#include "dyn/io/line_reader.h"
#include "dyn/kvevents/codec.h"
#include "dyn/kvevents/translate.h"
#include "dyn/offline/turns.h"
#include "dyn/route/router.h"
#include "dyn/session/normalize.h"
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"
#include "dyn/records/record.h"
#include "dyn/records/reader.h"
#include "dyn/records/rows.h"
#include "dyn/records/workload.h"

namespace dyn::offline {

// The router is the engine of decide; its types read unqualified here.
using route::binding_name;
using route::KvEvent;
using route::Placement;
using route::RouteRequest;
using route::Router;
using route::RouterConfig;
using route::WorkerSpec;

// ---------------------------------------------------------------------------------------------
// normalize

int normalize_rows(const NormalizeOptions& o, io::Output& out) {
  records::RowReader reader(o.inputs);
  Json row;
  std::string where;
  uint64_t rejected = 0;
  while (reader.next(row, &where)) {
    Json res = Json::object();
    res["line"] = reader.line().number;
    auto h = row.find("headers");
    Expected<session::Identity> id = Error{"row has no \"headers\"", kExitBadData};
    if (h != row.end()) {
      auto list = session::headers_from_json(*h);
      if (list.ok()) id = session::normalize(*list, o.session);
      else id = list.error();
    }
    if (id.ok()) {
      if (id->context) {
        res["agent_context"] = id->context->to_json();
        res["source"] = session::source_name(id->source);
      }
      if (!id->x_request_id.empty()) res["x_request_id"] = id->x_request_id;
      if (id->worker_instance_id) res["worker_instance_id"] = *id->worker_instance_id;
      if (id->priority) res["priority"] = *id->priority;
    } else {
      ++rejected;
      diag::error(where, id.error().message);
      res["error"] = {{"code", id.error().exit_code}, {"message", id.error().message}};
    }
    for (auto it = row.begin(); it != row.end(); ++it)
      if (it.key() != "headers" && it.key() != "body" && !res.contains(it.key())) res[it.key()] = it.value();
    out.line(res.dump());
  }
  reader.summarize();
  return rejected ? kExitBadData : kExitOk;
}

// ---------------------------------------------------------------------------------------------
// end model

double EndModel::duration_ms(uint64_t prompt, uint64_t uncached, uint64_t output, double u) const {
  if (profile) {
    const double others = std::clamp(u, 0.0, 1.0) * static_cast<double>(kv_blocks) * static_cast<double>(block_size);
    return profile->request_ms(prompt, prompt - std::min(uncached, prompt), output, max_batched_tokens, others) /
           (speedup_ratio > 0 ? speedup_ratio : 1.0);
  }
  double t = 0;
  uint64_t left = uncached;
  // Past a million chunks the full ones are counted at once (a bad input_length of 2^63 looped
  // for ever); below, one sum per chunk, as it always was (the same bits as before).
  if (max_batched_tokens && left / max_batched_tokens > (uint64_t{1} << 20)) {
    const uint64_t full = left / max_batched_tokens;
    t += static_cast<double>(full) * engine::prefill_time_ms(max_batched_tokens);
    left -= full * max_batched_tokens;
  }
  while (left > 0) {
    uint64_t chunk = std::min<uint64_t>(left, max_batched_tokens ? max_batched_tokens : left);
    t += engine::prefill_time_ms(chunk);
    left -= chunk;
  }
  t += static_cast<double>(output) * engine::decode_time_ms(std::clamp(u, 0.0, 1.0));
  return t / (speedup_ratio > 0 ? speedup_ratio : 1.0);
}

// ---------------------------------------------------------------------------------------------
// decide

namespace {

// A trace, header or KV event row as its parser fills it, before it is packed into a Row.
struct Parsed {
  bool has_time = false;
  double arrival_ms = 0;
  std::string request_id, x_request_id;
  std::optional<session::AgentContext> ctx;
  // Blocks: ids at ids_bs (Dynamo) or tokens (header rows).
  std::vector<uint64_t> ids;
  uint32_t ids_bs = 0;
  bool ids_are_sequence = false;
  std::vector<uint32_t> toks;
  bool from_tokens = false;
  std::string model;  // the body's model (header rows): a LoRA adapter's name hashes its blocks
  uint64_t tokens = 0;
  std::optional<uint64_t> output_tokens;
  std::optional<double> end_ms;
  std::optional<uint64_t> worker;
  std::optional<Error> error;
  // A KV event row {"kv_event": {"worker", "payload_hex"}}: a recorded vLLM batch, applied to the
  // index (--router-kv-events) at its time; it writes no output row.
  bool kv = false;
  uint64_t kv_worker = 0;
  std::string kv_payload;
};

// What only some rows carry (trace and header rows, text prompts, errors, KV events): allocated
// for those rows alone.
struct RowExtra {
  std::string x_request_id;
  std::optional<bool> session_final;
  std::optional<Json> compaction;
  std::vector<uint32_t> toks;  // prompt tokens, when from_tokens
  bool from_tokens = false;
  std::string model;
  std::optional<uint64_t> worker;
  std::optional<Error> error;
  uint64_t kv_worker = 0;
  std::string kv_payload;
};

// One row in the reorder window. Up to kReorderWindow rows wait there, so a row is kept small:
// about 150 bytes plus its ids at 1 to 2 bytes each for Mooncake's ids (issue 17: rows of about
// 800 bytes made the window most of decide's memory). The identity strings share one buffer
// (short ones fit in it without an allocation), the ids are delta-encoded, and what few rows have
// lives in RowExtra.
struct Row {
  uint64_t index = 0;
  const std::string* file = nullptr;  // "file:line" is formatted only when a diagnostic needs it
  uint64_t line = 0;
  double arrival_ms = 0;
  uint64_t tokens = 0;
  uint64_t output_tokens = 0;  // when has_output
  double end_ms = 0;           // when has_end
  uint32_t ids_bs = 0;         // block size of the ids (Mooncake, Dynamo); 0 = none
  uint32_t n_ids = 0;
  uint32_t sid_len = 0, parent_len = 0;  // text = session_id, parent_session_id, request_id
  bool has_time = false, has_output = false, has_end = false, has_ctx = false;
  bool ids_are_sequence = false, ids_raw = false, kv = false;
  std::string text;
  std::string ids;  // n_ids ids: zigzag LEB128 deltas, or raw u64s (ids_raw) when that is shorter
  std::unique_ptr<RowExtra> extra;

  std::string where() const { return io::Line{{}, file, line}.where(); }
  std::string_view session_id() const { return std::string_view(text).substr(0, sid_len); }
  std::string_view parent_session_id() const { return std::string_view(text).substr(sid_len, parent_len); }
  std::string_view request_id() const { return std::string_view(text).substr(sid_len + parent_len); }
  RowExtra& more() {
    if (!extra) extra = std::make_unique<RowExtra>();
    return *extra;
  }
  const Error* error() const { return extra && extra->error ? &*extra->error : nullptr; }
  void set_error(Error e) { more().error = std::move(e); }
  void set_identity(std::string_view sid, std::string_view parent, std::string_view rid) {
    sid_len = static_cast<uint32_t>(sid.size());
    parent_len = static_cast<uint32_t>(parent.size());
    text.reserve(sid.size() + parent.size() + rid.size());
    text.assign(sid).append(parent).append(rid);
  }
  void set_ids(std::span<const uint64_t> v) {
    thread_local std::string code;  // encoded here (at most 10 bytes an id), then copied at its exact size
    code.resize(v.size() * 10);
    char* p = code.data();
    uint64_t prev = 0;
    for (uint64_t x : v) {
      const auto d = static_cast<int64_t>(x - prev);
      prev = x;
      auto z = (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
      for (; z > 0x7f; z >>= 7) *p++ = static_cast<char>((z & 0x7f) | 0x80);
      *p++ = static_cast<char>(z);
    }
    const auto n = static_cast<size_t>(p - code.data());
    n_ids = static_cast<uint32_t>(v.size());
    ids_raw = n > v.size() * sizeof(uint64_t);
    if (ids_raw) ids.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint64_t));
    else ids.assign(code.data(), n);
  }
  void ids_into(std::vector<uint64_t>& out) const {
    out.resize(n_ids);
    if (ids_raw) {
      std::memcpy(out.data(), ids.data(), n_ids * sizeof(uint64_t));
      return;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(ids.data());
    uint64_t prev = 0;
    for (uint32_t i = 0; i < n_ids; ++i) {
      uint64_t z = 0;
      for (int s = 0;; s += 7) {
        const unsigned char b = *p++;
        z |= static_cast<uint64_t>(b & 0x7f) << s;
        if (!(b & 0x80)) break;
      }
      prev += (z >> 1) ^ (0 - (z & 1));
      out[i] = prev;
    }
  }
};

// A parsed trace, header or KV event row -> its window Row (index, file and line are the caller's).
void pack(Parsed& p, Row& r) {
  r.has_time = p.has_time;
  r.arrival_ms = p.arrival_ms;
  r.tokens = p.tokens;
  r.has_output = p.output_tokens.has_value();
  r.output_tokens = p.output_tokens.value_or(0);
  r.has_end = p.end_ms.has_value();
  r.end_ms = p.end_ms.value_or(0);
  r.ids_bs = p.ids_bs;
  r.ids_are_sequence = p.ids_are_sequence;
  r.set_ids(p.ids);
  r.kv = p.kv;
  r.has_ctx = p.ctx.has_value();
  if (p.ctx) r.set_identity(p.ctx->session_id, p.ctx->parent_session_id, p.request_id);
  else r.set_identity({}, {}, p.request_id);
  if (!p.x_request_id.empty() || p.from_tokens || p.worker || p.error || p.kv ||
      (p.ctx && (p.ctx->session_final || p.ctx->compaction))) {
    RowExtra& x = r.more();
    x.x_request_id = std::move(p.x_request_id);
    if (p.ctx) {
      x.session_final = p.ctx->session_final;
      x.compaction = std::move(p.ctx->compaction);
    }
    x.toks = std::move(p.toks);
    x.from_tokens = p.from_tokens;
    x.model = std::move(p.model);
    x.worker = p.worker;
    x.error = std::move(p.error);
    x.kv_worker = p.kv_worker;
    x.kv_payload = std::move(p.kv_payload);
  }
}

std::optional<uint64_t> j_u64(const Json* v) {
  if (!v) return std::nullopt;
  return records::as_u64(*v);
}
std::optional<double> j_num(const Json* v) {
  if (!v) return std::nullopt;
  return records::as_number(*v);
}
std::string j_id(const Json* v) {
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();
  return {};
}

// A Dynamo request_end record -> Row. Returns false when it is not routable.
bool parse_dynamo(const Json& rec, Parsed& r, std::string* why) {
  const Json* et = records::find_path(rec, "event_type");
  if (!et || !et->is_string() || *et != records::event::kRequestEnd) {
    *why = "not a request_end";
    return false;
  }
  if (auto* ac = records::find_path(rec, "agent_context")) r.ctx = session::AgentContext::from_json(*ac);
  r.request_id = j_id(records::find_path(rec, "request.request_id"));
  r.x_request_id = j_id(records::find_path(rec, "request.x_request_id"));
  auto total = j_num(records::find_path(rec, "request.total_time_ms"));
  auto recv = j_num(records::find_path(rec, "request.request_received_ms"));
  auto evt = j_num(records::find_path(rec, "event_time_unix_ms"));
  if (recv) r.arrival_ms = *recv;
  else if (evt && total) r.arrival_ms = *evt - *total;
  else if (evt) r.arrival_ms = *evt;
  else {
    *why = "request_end has neither request.request_received_ms nor event_time_unix_ms";
    r.error = Error{*why, kExitBadData};
  }
  r.has_time = recv || evt;
  // SPEC 6.1's range, as for workload rows: a start outside it is rejected (routed at the previous
  // row's arrival, with dyn.error), never placed 560,000 years on.
  if (auto e = r.has_time ? records::dynamo_start_error(r.arrival_ms) : std::nullopt) {
    r.error = Error{std::move(*e), kExitBadData};
    r.has_time = false;
    r.arrival_ms = 0;
  }
  if (total) r.end_ms = r.arrival_ms + *total;
  else if (evt && *evt >= r.arrival_ms) r.end_ms = *evt;
  r.output_tokens = j_u64(records::find_path(rec, "request.output_tokens"));
  const Json* rp = records::find_path(rec, "request.replay");
  auto in = j_u64(records::find_path(rec, "request.input_tokens"));
  if (rp && rp->is_object()) {
    auto bs = j_u64(records::find_path(*rp, "trace_block_size"));
    auto il = j_u64(records::find_path(*rp, "input_length"));
    const Json* hs = records::find_path(*rp, "input_sequence_hashes");
    if (il) in = il;
    if (bs && *bs > 0 && *bs < (1u << 31)) r.ids_bs = static_cast<uint32_t>(*bs);
    if (hs && hs->is_array())
      for (auto& h : *hs) {
        auto v = records::as_u64(h);
        if (!v) {
          r.error = Error{
              "request.replay.input_sequence_hashes holds a value that is not an unsigned 64-bit integer: " + h.dump(),
              kExitBadData};
          break;
        }
        r.ids.push_back(*v);
      }
    r.ids_are_sequence = true;
  }
  r.tokens = in.value_or(0);
  return true;
}

// A KV event row -> Row (r.error on a malformed one).
void parse_kv_event_row(const Json& row, Parsed& r) {
  r.kv = true;
  if (auto t = j_num(records::find_path(row, "timestamp"))) {
    r.arrival_ms = *t;
    r.has_time = true;
  }
  const Json& e = row["kv_event"];
  auto w = j_u64(records::find_path(e, "worker"));
  const Json* hex = records::find_path(e, "payload_hex");
  if (!w || !hex || !hex->is_string() || hex->get_ref<const std::string&>().size() % 2) {
    r.error = Error{"kv_event row needs \"worker\" (integer) and \"payload_hex\" (hex of a msgpack KVEventBatch)",
                    kExitBadData};
    return;
  }
  r.kv_worker = *w;
  const std::string& h = hex->get_ref<const std::string&>();
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  r.kv_payload.reserve(h.size() / 2);
  for (size_t i = 0; i < h.size(); i += 2) {
    int a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0) {
      r.error = Error{"kv_event payload_hex is not hexadecimal", kExitBadData};
      return;
    }
    r.kv_payload.push_back(static_cast<char>(a * 16 + b));
  }
}

// A header row -> Row.
void parse_headers_row(const Json& row, Parsed& r, const session::NormalizeOptions& how) {
  auto list = session::headers_from_json(row["headers"]);
  if (!list.ok()) {
    r.error = list.error();
  } else {
    auto id = session::normalize(*list, how);
    if (!id.ok()) {
      r.error = id.error();
    } else {
      r.ctx = id->context;
      r.x_request_id = id->x_request_id;
      r.worker = id->worker_instance_id;
    }
  }
  if (auto t = j_num(records::find_path(row, "timestamp"))) {
    r.arrival_ms = *t;
    r.has_time = true;
  }
  r.request_id = j_id(records::find_path(row, "request_id"));
  if (auto b = row.find("body"); b != row.end()) {
    std::string text = tokens::render_request(*b);
    r.toks = tokens::text_to_tokens(text);
    r.from_tokens = true;
    r.tokens = r.toks.size();
    if (auto m = b->find("model"); m != b->end() && m->is_string()) r.model = m->get<std::string>();
    for (const char* k : {"max_completion_tokens", "max_tokens", "max_output_tokens"})
      if (auto v = j_u64(records::find_path(*b, k))) {
        r.output_tokens = v;
        break;
      }
  } else if (auto in = j_u64(records::find_path(row, "input_length"))) {
    r.tokens = *in;
  }
  if (auto v = j_u64(records::find_path(row, "output_length"))) r.output_tokens = v;
}

// A Mooncake/agentic row already parsed into `w` (ok) or rejected with `err` -> Row. A rejected
// row keeps the fields read before the bad one.
void row_from_workload(bool ok, std::string& err, records::WorkloadRow& w, Row& r, uint32_t ids_bs) {
  if (w.timestamp_ms) {
    r.arrival_ms = *w.timestamp_ms;
    r.has_time = true;
  }
  if (!ok) {
    r.set_error(Error{std::move(err), kExitBadData});
    return;
  }
  r.tokens = w.input_length;
  r.has_output = w.output_length.has_value();
  r.output_tokens = w.output_length.value_or(0);
  if (!w.hash_ids.empty()) {
    r.set_ids(w.hash_ids);
    r.ids_bs = ids_bs;
  }
  if (w.text_input) {
    RowExtra& x = r.more();
    x.toks = tokens::text_to_tokens(*w.text_input);
    x.from_tokens = true;
  }
  r.has_ctx = !w.session_id.empty();
  if (r.has_ctx)
    r.set_identity(w.session_id, w.parent_session_id == w.session_id ? std::string_view() : w.parent_session_id,
                   w.request_id);
  else r.set_identity({}, {}, w.request_id);
}

// A Mooncake/agentic row -> Row, validated by the workload parser shared with dyn-replay
// (records::parse_workload_object).
void parse_mooncake(const simdjson::dom::object& obj, Row& r, uint32_t ids_bs, records::WorkloadRow& w) {
  std::string err;
  w.where.clear();
  bool ok = records::parse_workload_object(obj, ids_bs, w, &err);
  row_from_workload(ok, err, w, r, ids_bs);
}

// Rows are routed in arrival order through a window of this many rows: input out of order by
// less than that (Dynamo request_end rows are written at each request's end, so they arrive
// shuffled by up to the number of requests in flight) is sorted exactly as a full sort would;
// a row later than that gets dyn.error. Memory stays bounded by the window however long the input.
constexpr size_t kReorderWindow = 16384;
// Event kinds of a routed request on the virtual clock; at equal times a first token comes first.
constexpr int kFirstTokenEvent = 0, kEndEvent = 1;

// One run of decide: rows stream through the reorder window into the router, on the virtual
// clock that the ends of routed requests (EventQueue, the loop dyn-replay --sim runs on too)
// move: memory holds the window, the router's index and bindings and the requests in flight,
// never the whole input.
class Decider {
 public:
  Decider(const DecideOptions& o, io::Output& out);
  int run(DecideStats* stats);

 private:
  bool read_row(std::string_view text, Row& r);
  void enqueue(Row&& r);
  void start_router();
  void route(Row& r);
  void apply_kv_row(Row& r);
  void write_decision(const Row& r, std::string_view request_id, Expected<Placement>& placed);
  void release(uint32_t slot);
  void report(DecideStats* stats);

  const DecideOptions& o_;
  io::Output& out_;
  const uint32_t mooncake_bs_;
  records::RowReader reader_;
  simdjson::dom::object obj_;
  records::WorkloadRow scratch_;  // reused per row
  uint64_t skipped_ = 0, rejected_ = 0, untimed_ = 0;
  uint64_t index_ = 0;
  double last_ = 0;  // arrival of the previous row in input order (rows without a timestamp take it)
  bool reordered_ = false;
  std::deque<Row> window_;  // sorted by arrival, stable (input order among equal arrivals)

  // The router is built when the first row is routed: without --kv-cache-block-size it adopts the
  // block size of the earliest row (in arrival order) that carries ids, among the rows read so far.
  RouterConfig cfg_;
  FakeClock clock_;
  std::optional<Router> router_;
  std::map<uint32_t, bool> warned_;  // input block sizes that differ from the router's (warned once)
  const double kv_tokens_;
  std::vector<uint64_t> active_tokens_;
  // Requests in flight: their placements in reused slots, released at their ends (one event each).
  struct Live {
    Placement p;
    uint64_t tokens;
    uint32_t w;
  };
  std::vector<Live> live_;
  std::vector<uint32_t> free_live_;
  EventQueue<uint32_t> ends_;
  TurnCounter turns_;  // rows routed per session id (request ids "<session>:<turn>")
  // Event-fed index: each worker's recorded batches go through the same feed as in dyn-route
  // serve (kvevents::WorkerFeed), so the same stream gives the same index and the same placements.
  kvevents::Adapters adapters_;  // before feeds_, which point to it
  std::vector<std::unique_ptr<kvevents::WorkerFeed>> feeds_;
  uint64_t kv_rows_ = 0;
  bool any_routed_ = false;
  double routed_arrival_ = 0;  // arrival of the last row routed
  DecideStats st_;
  std::string line_;
  std::vector<records::RouteDecision::Candidate> candidates_;  // --explain, reused per row
  // Reused per routed row: its ids decoded, its sequence hashes, a request id made for it.
  std::vector<uint64_t> ids_, seq_;
  std::string request_id_;
};

Decider::Decider(const DecideOptions& o, io::Output& out)
    : o_(o),
      out_(out),
      mooncake_bs_(o.workload_block_size ? o.workload_block_size : records::kMooncakeBlockSize),
      reader_(o.inputs),
      cfg_(o.router),
      kv_tokens_(static_cast<double>(o.end_model.kv_blocks) * o.end_model.block_size),
      active_tokens_(o.workers, 0),
      ends_(clock_) {
  st_.per_worker.assign(o.workers, 0);
  line_.reserve(4096);
}

// One input line -> Row; false when the line is not routed at all (malformed, reported by the
// reader, or a trace row that is not a request_end).
bool Decider::read_row(std::string_view text, Row& r) {
  r.index = index_;
  r.file = reader_.line().file;
  r.line = reader_.line().number;
  if (records::parse_workload_line_fast(text, mooncake_bs_, scratch_)) {  // the common Mooncake row
    reader_.accept_line();
    std::string none;
    row_from_workload(true, none, scratch_, r, mooncake_bs_);
    return true;
  }
  if (!reader_.parse_line_dom(obj_)) return false;
  bool is_trace = !obj_["event_type"].error() || !obj_["schema"].error();
  if (!obj_["kv_event"].error()) {
    Parsed p;
    parse_kv_event_row(io::to_json(obj_), p);  // not counted in `index` (row-N request ids)
    pack(p, r);
  } else if (is_trace || !obj_["headers"].error()) {
    Json rec = io::to_json(obj_);  // trace records and header rows are rare: Json-based parsing
    Parsed p;
    if (is_trace) {
      std::string why;
      if (!parse_dynamo(rec, p, &why)) {
        ++skipped_;
        return false;
      }
    } else {
      parse_headers_row(rec, p, o_.session);
    }
    pack(p, r);
  } else {
    parse_mooncake(obj_, r, mooncake_bs_, scratch_);
  }
  return true;
}

// Into the reorder window (stable insertion by arrival; in-order input appends at the back in
// O(1)); the earliest row is routed once the window is full.
void Decider::enqueue(Row&& r) {
  if (!r.kv) ++index_;
  // Rows without a timestamp arrive with the row before them (closed-loop delays are replay's job).
  if (!r.has_time) {
    r.arrival_ms = last_;
    ++untimed_;
  }
  last_ = r.arrival_ms;
  auto pos = window_.end();
  while (pos != window_.begin() && std::prev(pos)->arrival_ms > r.arrival_ms) --pos;
  if (pos != window_.end()) reordered_ = true;
  window_.insert(pos, std::move(r));
  if (window_.size() > kReorderWindow) {
    // The front row was read kReorderWindow rows ago and has left the cache, as has what it
    // points to: a pipeline fetches the rows to come while this one is routed (perf: a third of
    // route()'s own time was those misses). Three rows ahead: the row; two ahead (its row now
    // in): its strings and its session's turn-count cells; one ahead: the turn-count record.
    const Row& third = window_[3];
    __builtin_prefetch(&third);
    __builtin_prefetch(reinterpret_cast<const char*>(&third) + 64);
    __builtin_prefetch(reinterpret_cast<const char*>(&third) + 128);
    const Row& second = window_[2];
    __builtin_prefetch(second.text.data());
    __builtin_prefetch(second.ids.data());
    if (second.has_ctx) turns_.prefetch_cells(second.session_id());
    if (const Row& next = window_[1]; next.has_ctx) turns_.prefetch_record(next.session_id());
    route(window_.front());
    window_.pop_front();
  }
}

void Decider::start_router() {
  if (!o_.router_block_size_given) {
    for (auto& r : window_)
      if (r.ids_bs) {
        cfg_.block_size = r.ids_bs;
        break;
      }
  }
  feeds_.clear();
  for (uint32_t w = 0; w < o_.workers; ++w)
    feeds_.push_back(std::make_unique<kvevents::WorkerFeed>(cfg_.block_size, &adapters_));
  Router& router = router_.emplace(cfg_, clock_);
  for (uint32_t w = 0; w < o_.workers; ++w) {
    if (auto e = router.add_worker(WorkerSpec{w, 0, 0})) throw Fatal(e->exit_code, e->message);
  }
}

// A request's end: its load leaves the router and the end model's utilisation.
void Decider::release(uint32_t slot) {
  live_[slot].p.finish();
  active_tokens_[live_[slot].w] -= live_[slot].tokens;
  free_live_.push_back(slot);
}

// A recorded KV event batch -> the worker's index, translated as dyn-route serve does.
void Decider::apply_kv_row(Row& r) {
  ++kv_rows_;
  RowExtra& x = r.more();
  if (!x.error && !cfg_.kv_events) x.error = Error{"kv_event rows need --router-kv-events", kExitUsage};
  if (!x.error && x.kv_worker >= o_.workers)
    x.error =
        Error{fmt::format("kv_event worker {} is not one of the {} workers", x.kv_worker, o_.workers), kExitBadData};
  std::optional<kvevents::EventBatch> batch;
  if (!x.error) {
    auto b = kvevents::decode_batch(x.kv_payload);
    if (b) batch = std::move(*b);
    else x.error = b.error();
  }
  if (x.error) {
    ++rejected_;
    diag::error(r.where(), x.error->message);
    return;
  }
  const std::string where = r.where();
  feeds_[x.kv_worker]->apply(
      *batch, [&](std::span<const KvEvent> es) { router_->apply_kv_events(x.kv_worker, es); },
      [&](uint32_t bs) {
        if (bs != cfg_.block_size)
          diag::warning(where,
                        fmt::format("BlockStored block size {} differs from the router's {}", bs, cfg_.block_size));
        return true;
      },
      [&](const std::string& why) { diag::warning(where, why + " (event skipped)"); });
}

// Routes one row at its arrival (after every end due by then) and writes its route_decision row.
void Decider::route(Row& r) {
  if (!router_) start_router();
  if (any_routed_ && r.arrival_ms < routed_arrival_ && !r.error())
    r.set_error(Error{fmt::format("row arrives at {} ms, before rows already routed (at {} ms): the input is more "
                                  "than {} rows out of arrival order; sort it by arrival first",
                                  r.arrival_ms, routed_arrival_, kReorderWindow),
                      kExitBadData});
  any_routed_ = true;
  routed_arrival_ = std::max(routed_arrival_, r.arrival_ms);
  if (r.ids_bs && r.ids_bs != cfg_.block_size && warned_.emplace(r.ids_bs, true).second)
    diag::warning(r.where(), fmt::format("router block size {} (--kv-cache-block-size) differs from the input's block "
                                         "size {}: re-blocking hash ids to {}-token blocks so prefixes still match; "
                                         "use --kv-cache-block-size {} to route on the input's own blocks",
                                         cfg_.block_size, r.ids_bs, cfg_.block_size, r.ids_bs));
  seq_.clear();
  if (r.extra && r.extra->from_tokens) {
    seq_ = tokens::sequence_hashes(
        tokens::block_hashes(r.extra->toks, cfg_.block_size, false, adapters_.seed_for(r.extra->model)));
  } else if (r.ids_bs) {
    r.ids_into(ids_);
    tokens::sequence_from_ids(ids_, r.ids_bs, r.ids_are_sequence, r.tokens, cfg_.block_size, seq_);
  }
  ends_.run_until(r.arrival_ms, [&](const auto& e) {
    if (e.kind == kFirstTokenEvent) live_[e.arg].p.first_token();
    else release(e.arg);
  });
  if (r.kv) return apply_kv_row(r);
  std::string_view request_id = r.request_id();
  if (request_id.empty()) {
    request_id_.clear();
    if (r.has_ctx)
      fmt::format_to(std::back_inserter(request_id_), FMT_COMPILE("{}:{}"), r.session_id(),
                     turns_.next(r.session_id()));
    else fmt::format_to(std::back_inserter(request_id_), FMT_COMPILE("row-{}"), r.index);
    request_id = request_id_;
  } else if (r.has_ctx) {
    turns_.next(r.session_id());
  }
  Expected<Placement> placed = Error{};
  if (!r.error()) {
    RouteRequest q;
    if (r.has_ctx) {
      q.session_id = r.session_id();
      q.parent_session_id = r.parent_session_id();
    }
    q.sequence_hashes = seq_;
    q.tokens = r.tokens;
    if (r.extra) q.worker = r.extra->worker;
    q.explain = o_.explain;
    placed = router_->place(q);
    if (!placed.ok()) r.set_error(placed.error());
  }
  if (const Error* e = r.error()) {
    ++rejected_;
    diag::error(r.where(), e->message);
  }
  write_decision(r, request_id, placed);
}

// The route_decision row; a placed request is committed and its end scheduled (recorded, or
// estimated with the end model at the worker's load on arrival).
void Decider::write_decision(const Row& r, std::string_view request_id, Expected<Placement>& placed) {
  line_.clear();
  records::RouteDecision d;
  d.event_time_unix_ms = r.arrival_ms > 0 ? static_cast<uint64_t>(std::llround(r.arrival_ms)) : 0;
  if (r.has_ctx) {
    d.agent_context.session_id = r.session_id();
    d.agent_context.parent_session_id = r.parent_session_id();
    if (r.extra) {
      d.agent_context.session_final = r.extra->session_final;
      if (r.extra->compaction) d.agent_context.compaction = &*r.extra->compaction;
    }
  }
  d.request_id = request_id;
  if (r.extra) d.x_request_id = r.extra->x_request_id;
  d.input_tokens = r.tokens;
  if (r.has_output) d.output_tokens = r.output_tokens;
  if (!placed.ok()) {
    d.error = records::RouteDecision::Refusal{r.error()->exit_code, r.error()->message};
    records::append_route_decision(line_, d);
    ++st_.decisions;
    out_.line(line_);
    return;
  }
  Placement& p = *placed;
  d.cached_tokens = p.cached_tokens();
  d.kv_hit_rate = r.tokens ? static_cast<double>(p.cached_tokens()) / static_cast<double>(r.tokens) : 0.0;
  d.worker = static_cast<int64_t>(p.worker());
  d.binding = binding_name(p.binding());
  d.rebind_reason = rebind_reason_name(p.rebind_reason());
  d.request_blocks = p.request_blocks();
  d.explain = o_.explain;
  if (o_.explain) {
    candidates_.clear();
    for (auto& w : p.explain())
      candidates_.push_back({w.worker, w.overlap_blocks, w.prefill_blocks, w.decode_blocks, w.cost, w.eligible,
                             w.host_blocks, w.disk_blocks, w.shared_blocks});
    d.candidates = candidates_;
    const route::DecisionQuality& q = p.quality();
    records::RouteDecision::Quality rq;
    rq.block_size = cfg_.block_size;
    rq.margin = q.margin;
    rq.ties = q.ties;
    rq.avoidable_prefill_tokens = q.avoidable_prefill_tokens;
    rq.non_max_cause = non_max_cause_name(q.cause);
    d.quality = rq;
  }
  records::append_route_decision(line_, d);
  p.commit();
  auto wi = static_cast<uint32_t>(p.worker());
  ++st_.routed;
  if (wi < st_.per_worker.size()) ++st_.per_worker[wi];
  st_.input_tokens += r.tokens;
  st_.cached_tokens += p.cached_tokens();
  double u = kv_tokens_ > 0 ? static_cast<double>(active_tokens_[wi] + r.tokens) / kv_tokens_ : 0;
  const uint64_t uncached = r.tokens - p.cached_tokens();
  double end = r.has_end ? std::max(r.end_ms, r.arrival_ms)
                         : r.arrival_ms + o_.end_model.duration_ms(r.tokens, uncached, r.output_tokens, u);
  // Its first token, when the router stops counting its prefill as load (SPEC 3.2 prefill_ahead):
  // the end model's prefill time, never after its end.
  const double first = std::min(end, r.arrival_ms + o_.end_model.duration_ms(r.tokens, uncached, 0, u));
  active_tokens_[wi] += r.tokens;
  uint32_t slot;
  if (!free_live_.empty()) {
    slot = free_live_.back();
    free_live_.pop_back();
    live_[slot] = Live{std::move(p), r.tokens, wi};
  } else {
    slot = static_cast<uint32_t>(live_.size());
    live_.push_back(Live{std::move(p), r.tokens, wi});
  }
  ends_.push(first, kFirstTokenEvent, slot);
  ends_.push(end, kEndEvent, slot);
  ++st_.decisions;
  out_.line(line_);
}

int Decider::run(DecideStats* stats) {
  std::string_view text;
  while (reader_.next_line(text)) {
    Row r;
    if (read_row(text, r)) enqueue(std::move(r));
  }
  while (!window_.empty()) {
    route(window_.front());
    window_.pop_front();
  }
  reader_.summarize();
  // Zero usable rows out of a non-empty input is the wrong format, not an empty run (issue 21.8).
  if (reader_.rows() == 0 && reader_.malformed() > 0)
    throw Fatal(kExitBadData, records::no_workload_rows_message(o_.inputs));
  if (skipped_)
    diag::note(fmt::format("{} trace row{} that are not request_end skipped", skipped_, skipped_ == 1 ? "" : "s"));
  if (untimed_)
    diag::note(fmt::format("{} row{} without a timestamp routed at the previous row's arrival time", untimed_,
                           untimed_ == 1 ? "" : "s"));
  if (reordered_) diag::note("rows were not in arrival order; routed (and written) sorted by arrival, stably");
  // Release in end order so the router's state unwinds like time would.
  while (!ends_.empty()) {
    const auto e = ends_.pop();
    if (e.kind == kEndEvent) live_[e.arg].p.finish();
  }
  if (cfg_.kv_events && kv_rows_ == 0)
    diag::warning("", "--router-kv-events without kv_event rows: the index stayed empty (load-only routing)");
  for (const auto& f : feeds_)
    for (size_t k = 0; k < kvevents::kSkipReasons; ++k)
      if (uint64_t n = f->counts().skipped[k])
        st_.kv_events_skipped[kvevents::skip_name(static_cast<kvevents::Skip>(k))] += n;
  if (!st_.kv_events_skipped.empty()) {
    std::string by;
    uint64_t total = 0;
    for (const auto& [why, n] : st_.kv_events_skipped) {
      by += fmt::format("{}{} {}", by.empty() ? "" : ", ", why, n);
      total += n;
    }
    diag::note(fmt::format("{} KV event{} not applied to the index ({}); the rest of their batches were", total,
                           total == 1 ? "" : "s", by));
  }
  if (rejected_)
    diag::warning("",
                  fmt::format("{} row{} could not be routed (see dyn.error)", rejected_, rejected_ == 1 ? "" : "s"));
  report(stats);
  return rejected_ ? kExitBadData : kExitOk;
}

void Decider::report(DecideStats* stats) {
  if (!stats) return;
  st_.rejected = rejected_;
  st_.skipped = skipped_;
  st_.untimed = untimed_;
  st_.kv_event_rows = kv_rows_;
  st_.malformed = reader_.malformed();
  st_.reordered = reordered_;
  st_.router_block_size = cfg_.block_size;
  if (router_) st_.quality = router_->stats().quality;  // none before the first routed row
  *stats = std::move(st_);
}

}  // namespace

int decide(const DecideOptions& o, io::Output& out, DecideStats* stats) {
  if (o.workers == 0) throw Fatal(kExitUsage, "--workers must be at least 1");
  return Decider(o, out).run(stats);
}

}  // namespace dyn::offline
