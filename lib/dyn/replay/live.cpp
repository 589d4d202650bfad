// Timed dispatch of a plan over the connection pool, request bodies, and client request_end rows.
#include "dyn/replay/live.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "dyn/base/clock.h"
#include "dyn/base/diag.h"
#include "dyn/http/pool.h"
#include "dyn/http/tokenize.h"
#include "dyn/records/record.h"
#include "dyn/tokens/hash.h"
#include "dyn/tokens/render.h"
#include "dyn/tokens/synthetic.h"
#include "dyn/records/rows.h"

namespace dyn::replay {

namespace {

double round_us(double ms) { return std::round(ms * 1000.0) / 1000.0; }

std::chrono::steady_clock::time_point to_tp(double mono_ms) {
  return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(mono_ms)));
}

}  // namespace

Json build_body(const LiveOptions& o, const std::string& prompt, std::optional<uint64_t> osl,
                const std::vector<std::pair<std::string, std::string>>& history) {
  Json b = Json::object();
  b["model"] = o.model;
  if (o.api == api::Api::kChat) {
    Json msgs = Json::array();
    for (const auto& [role, text] : history) msgs.push_back({{"role", role}, {"content", text}});
    msgs.push_back({{"role", "user"}, {"content", prompt}});
    b["messages"] = std::move(msgs);
  } else {
    std::string p;
    for (const auto& h : history) p += h.second;
    b["prompt"] = p + prompt;
  }
  b["stream"] = o.streaming;
  if (o.streaming) b["stream_options"] = {{"include_usage", true}};
  if (osl) {
    b["max_tokens"] = *osl;
    if (o.api == api::Api::kChat) b["max_completion_tokens"] = *osl;
    if (o.ignore_eos) {
      b["min_tokens"] = *osl;
      b["ignore_eos"] = true;
    }
  }
  for (auto it = o.extra_inputs.begin(); it != o.extra_inputs.end(); ++it) b[it.key()] = it.value();
  return b;
}

void add_priority(Json& body, int64_t priority) {
  Json& nvext = body["nvext"];
  if (!nvext.is_object()) nvext = Json::object();
  Json& hints = nvext["agent_hints"];
  if (!hints.is_object()) hints = Json::object();
  hints["priority"] = std::clamp<int64_t>(priority, INT32_MIN, INT32_MAX);
}

Expected<SizedPrompt> size_prompt(const LiveOptions& o, const records::WorkloadRow& row, uint32_t block_size) {
  const uint64_t target = row.input_length;
  // The SPEC 4.3 text grows on demand: a longer synthetic prompt starts with the shorter one
  // (filler blocks follow the ids), so any cut n is a prefix of the same text.
  std::string base = tokens::synthetic_prompt(o.prompt_seed, row.hash_ids, target, block_size);
  auto text_of = [&](uint64_t n) {
    if (base.size() < n)
      base = tokens::synthetic_prompt(o.prompt_seed, row.hash_ids, std::max<uint64_t>((n + 3) / 4, base.size() / 2),
                                      block_size);
    return base.substr(0, n);
  };
  static const std::vector<std::pair<std::string, std::string>> kNoHistory;
  SizedPrompt best;
  uint64_t best_off = UINT64_MAX;
  std::optional<std::pair<uint64_t, uint64_t>> lo, hi;  // (bytes, tokens) below / above the target
  std::set<uint64_t> tried;
  uint64_t n = 4 * target;  // the 4-byte convention's guess
  for (uint32_t round = 1; round <= kSizingRounds; ++round) {
    std::string text = text_of(n);
    Json body = build_body(o, text, row.output_length, kNoHistory);
    auto req = http::tokenize_request(o.api, body, o.model);
    if (!req) return req.error();
    auto ids = http::tokenize(o.tokenizer_url, *req);
    if (!ids) return ids.error();
    const uint64_t c = ids->size();
    tried.insert(n);
    const uint64_t off = c > target ? c - target : target - c;
    if (off < best_off) {
      best_off = off;
      best.text = std::move(text);
      best.ids = std::move(*ids);
      best.exact = off == 0;
    }
    best.rounds = round;
    if (off == 0) break;
    if (c < target) {
      if (!lo || n > lo->first) lo = {n, c};
    } else if (!hi || n < hi->first) {
      hi = {n, c};
    }
    uint64_t next;
    if (lo && hi) {
      // Bracketed: interpolate between the two cuts (tokens grow about linearly with bytes).
      if (hi->first - lo->first <= 1) break;  // adjacent cuts step over the target
      const double f = static_cast<double>(target - lo->second) / static_cast<double>(hi->second - lo->second);
      next = lo->first + static_cast<uint64_t>(std::llround(f * static_cast<double>(hi->first - lo->first)));
      next = std::clamp(next, lo->first + 1, hi->first - 1);
    } else {
      // One side only: step by the bytes per token seen so far (the template's tokens included,
      // so the step undershoots a little and the next round brackets or hits).
      if (c > target && n == 0) break;  // the request without any prompt text is already too long
      double per = c > 0 && n > 0 ? static_cast<double>(n) / static_cast<double>(c) : 4.0;
      int64_t nn = static_cast<int64_t>(n) + std::llround((static_cast<double>(target) - static_cast<double>(c)) * per);
      if (c < target && nn <= static_cast<int64_t>(n)) nn = static_cast<int64_t>(n) + 1;
      if (c > target && nn >= static_cast<int64_t>(n)) nn = static_cast<int64_t>(n) - 1;
      next = static_cast<uint64_t>(std::max<int64_t>(nn, 0));
    }
    if (tried.count(next)) break;
    n = next;
  }
  return best;
}

std::string client_record(const RecordContext& c, const http::HttpResult& res) {
  const auto& s = res.summary;
  auto unix_of = [&](double mono) { return c.unix_at_mono0 + (mono - c.mono0); };
  records::RequestEnd r;
  r.event_time_unix_ms = static_cast<uint64_t>(std::llround(unix_of(res.end_ms)));
  r.event_source = "client";
  const Identity& id = c.item->identity;
  r.agent_context.session_id = id.session;
  r.agent_context.parent_session_id = id.parent;
  // What this client sent (add_priority); the router's row says how it was resolved.
  if (c.row && c.row->priority)
    r.agent_context.priority = static_cast<int32_t>(std::clamp<int64_t>(*c.row->priority, INT32_MIN, INT32_MAX));
  const bool ok = !res.error.has_value();
  r.request_id = c.item->request_id;
  r.x_request_id = c.item->request_id;
  r.model = c.model;
  uint64_t isl = s.prompt_tokens.value_or(c.input_tokens_estimate);
  r.input_tokens = isl;
  bool osl_estimated = !s.completion_tokens.has_value();
  uint64_t osl = s.completion_tokens.value_or(tokens::token_count(s.text_bytes));
  if (ok || s.text_bytes > 0 || s.completion_tokens) {
    r.output_tokens = osl;
    r.output_tokens_estimated = osl_estimated;
  }
  if (s.cached_tokens) r.cached_tokens = *s.cached_tokens;
  r.cached_tokens_by_tier = s.cached_tokens_by_tier;
  r.request_received_ms = static_cast<uint64_t>(std::llround(unix_of(res.start_ms)));
  const auto& t = s.token_chunk_ms;
  if (ok && !t.empty() && res.streamed) {
    double ttft = t.front() - res.start_ms;
    r.ttft_ms = round_us(ttft);
    double latency = t.back() - res.start_ms;
    if (osl >= 2) r.avg_itl_ms = round_us((latency - ttft) / static_cast<double>(osl - 1));
  }
  r.total_time_ms = round_us(res.end_ms - res.start_ms);
  if (s.cached_tokens && isl > 0) r.kv_hit_rate = static_cast<double>(*s.cached_tokens) / static_cast<double>(isl);
  const std::string w = res.header("x-dyn-worker");
  if (!w.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 0) r.worker = static_cast<int64_t>(v);
    else r.worker_text = w;
  }
  r.replay = records::RequestEnd::Replay{c.block_size, c.input_length, c.sequence_hashes};
  if (!s.finish_reason.empty()) r.finish_reason = s.finish_reason;
  std::vector<records::RequestEnd::ToolCall> calls;
  for (const auto& tc : s.tool_calls) calls.push_back({tc.choice_index, tc.tool_call_index, tc.id, tc.name});
  r.tool_calls = calls;

  // A request dyn-replay itself cancelled (interrupt_live) is "cancelled", as the router marks a
  // request whose client went away (docs/records.md).
  r.status = ok ? "ok" : res.error->type == "cancelled" ? "cancelled" : "error";
  if (!ok) r.error = records::RequestEnd::Failure{res.error->code, res.error->type, res.error->message};
  if (ok && res.streamed && t.size() >= 2) r.ttst_ms = round_us(t[1] - t[0]);
  std::vector<double> gaps;
  if (ok && res.streamed && !t.empty()) {
    gaps.reserve(t.size() - 1);
    for (size_t i = 1; i < t.size(); ++i) gaps.push_back(round_us(t[i] - t[i - 1]));
    r.inter_chunk_ms = gaps;
    // Tokens per content chunk when the server reported per-chunk usage: the exact per-token
    // ITL excludes the first chunk's tokens (issue 21.4; dyn-bench computes it).
    if (s.chunk_tokens.size() == t.size()) r.chunk_tokens = s.chunk_tokens;
    r.request_latency_ms = round_us(t.back() - res.start_ms);
  } else if (ok) {
    r.request_latency_ms = round_us(res.end_ms - res.start_ms);
  }
  // A stream that finished (finish_reason) but never sent [DONE] is a success with a warning,
  // the rule dyn-route serve and dyn-trace capture follow (issue 21.2).
  if (ok && res.streamed && !s.done) r.warning = "stream ended without [DONE] after its finish reason";
  r.input_tokens_estimated = !s.prompt_tokens;
  r.schedule_lag_ms = round_us(c.lag_ms);
  r.scheduled_ms = round_us(c.scheduled_ms);
  r.hash_ids = c.row->hash_ids;
  r.block_size = c.block_size;
  r.turn = c.item->turn;
  r.warmup = c.warmup;
  // --tokenizer-url could not hit input_length exactly for this prompt: say by how much.
  if (c.sized && !c.sized->exact)
    r.prompt_sizing = records::RequestEnd::PromptSizing{c.row->input_length, c.sized->ids.size()};
  std::string line;
  line.reserve(1024);
  records::append_request_end(line, r);
  return line;
}

namespace {

class Runner;
// The run interrupt_live() stops (lock order: g_interrupt_mu, then the Runner's mu_).
std::mutex g_interrupt_mu;
Runner* g_active = nullptr;
bool g_interrupted = false;

/// One run over a list of plan items: dispatcher + pool + completion bookkeeping.
class Runner {
 public:
  Runner(const records::Workload& w, const LiveOptions& o, io::Output& out, const std::vector<PlanItem>& items,
         http::ConnectionPool& pool, bool warmup, LiveStats& stats,
         const std::vector<std::optional<SizedPrompt>>& sized)
      : w_(w), o_(o), out_(out), items_(items), pool_(pool), warmup_(warmup), stats_(stats), sized_(sized) {
    {
      std::lock_guard<std::mutex> g(g_interrupt_mu);
      g_active = this;
      interrupted_ = stopped_ = g_interrupted;
    }
    const size_t n = items.size();
    remaining_.assign(n, 0);
    sent_ms_.assign(n, NAN);
    ended_ms_.assign(n, NAN);
    dep_end_.assign(n, 0);
    dependents_.assign(n, {});
    for (size_t k = 0; k < n; ++k) {
      remaining_[k] = items[k].deps.size();
      for (size_t d : items[k].deps) dependents_[d].push_back(k);
    }
    // Conversation history per session (delta mode), touched only by that session's turns,
    // which never overlap; the map itself is filled here, before any thread runs.
    if (o.history == History::kDelta)
      for (const auto& it : items)
        if (!it.identity.session.empty()) history_[it.identity.session];
  }

  ~Runner() {
    std::lock_guard<std::mutex> g(g_interrupt_mu);
    if (g_active == this) g_active = nullptr;
  }

  /// Notes `why`, stops dispatching and cancels every request in flight (see interrupt_live).
  void interrupt(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu_);
    diag::note(why);
    interrupted_ = stopped_ = true;
    for (http::Transport* c : in_flight_conns_) c->cancel();
    cv_.notify_all();
  }

  void run() {
    auto& clock = RealClock::instance();
    mono0_ = clock.now_ms();
    unix0_ = static_cast<double>(clock.unix_ms());
    for (size_t k = 0; k < items_.size(); ++k)
      if (remaining_[k] == 0) ready_.push({items_[k].at_ms.value_or(0), k});
    std::thread progress;
    if (o_.progress && !warmup_) progress = std::thread([this] { progress_loop(); });
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t cap = o_.concurrency ? o_.concurrency : UINT64_MAX;
    const double stop_at = o_.duration_s > 0 && !warmup_ ? mono0_ + o_.duration_s * 1000 : INFINITY;
    const double grace_end = stop_at + o_.grace_s * 1000;
    for (;;) {
      if (done_ == items_.size()) break;
      double now = RealClock::instance().now_ms();
      if (!stopped_ && now >= stop_at) cut_off();
      if (stopped_) {
        if (in_flight_ == 0) break;
        if (cut_off_ && !grace_over_ && now >= grace_end) cancel_after_grace();
        wait(lk, cut_off_ && !grace_over_ ? grace_end : INFINITY);
        continue;
      }
      if (ready_.empty()) {
        if (in_flight_ == 0) break;  // nothing can become ready (cannot happen with a valid plan)
        wait(lk, stop_at);
        continue;
      }
      auto [at, k] = ready_.top();
      double deadline = mono0_ + at;
      if (deadline > stop_at) {
        // Due after the cut-off, so never sent; but a request in flight may still make a session's
        // next turn due before it (AIPerf: only the duration stops sending, case 53).
        if (in_flight_ == 0) stopped_ = true;
        else wait(lk, stop_at);
        continue;
      }
      if (now < deadline - o_.dispatch_lead_ms) {
        wait(lk, deadline - o_.dispatch_lead_ms);
        continue;
      }
      if (in_flight_ >= cap) {
        wait(lk, stop_at);
        continue;
      }
      ready_.pop();
      if (auto t = tool_started_.find(k); t != tool_started_.end()) {
        send_tool_event(k, t->second, false);
        tool_started_.erase(t);
      }
      if (o_.schedule.mode == LoadMode::kConcurrency && now > deadline) {
        // Closed loop: a request is due when a slot frees, so lag counts from then (waiting for
        // the cap is the mode itself, not lateness).
        deadline = now;
        at = now - mono0_;
      }
      ++in_flight_;
      ++sent_;
      sent_ms_[k] = std::max(at, now - mono0_);
      lk.unlock();
      const GateKey key{at, k};
      http::ConnectionPool::Job job{[this, k, deadline, at](http::Transport& c) { execute(c, k, deadline, at); },
                                    [this, k] { finish(k); }};
      // In the gate before a worker can look for it, so it waits its turn behind every request
      // dispatched before it; out of it while no worker takes it, so the requests already
      // handed to the pool (which hold every worker) are not kept waiting for it.
      gate_enter(key);
      while (!pool_.submit(job)) {  // every worker busy: wait for one to come back
        gate_leave(key);
        {
          std::unique_lock<std::mutex> wl(mu_);
          pool_wait_ = true;
          cv_.wait_for(wl, std::chrono::milliseconds(5));
        }
        gate_enter(key);
      }
      lk.lock();
    }
    finished_ = true;
    lk.unlock();
    progress_cv_.notify_all();
    if (progress.joinable()) progress.join();
    if (interrupted_) stats_.interrupted = true;
    if (warmup_) stats_.warmup += sent_;
    else {
      stats_.sent += sent_;
      stats_.not_sent += items_.size() - sent_;
      stats_.duration_ms = last_end_ - first_start_;
    }
  }

 private:
  /// Waits on cv_ until notified or until `until_ms` (monotonic ms; INFINITY = no time limit).
  void wait(std::unique_lock<std::mutex>& lk, double until_ms) {
    if (std::isinf(until_ms)) cv_.wait(lk);
    else cv_.wait_until(lk, to_tp(until_ms));
  }

  /// --benchmark-duration has passed (under mu_): nothing more is sent, and what the requests
  /// in flight are given is said on stderr.
  void cut_off() {
    stopped_ = cut_off_ = true;
    if (in_flight_ == 0) return;
    diag::note(fmt::format(
        "--benchmark-duration {:g} s reached: nothing more is sent; waiting {} for {} request{} "
        "in flight (--benchmark-grace-period), then cancelling what is left",
        o_.duration_s, std::isinf(o_.grace_s) ? std::string("without limit") : fmt::format("up to {:g} s", o_.grace_s),
        in_flight_, in_flight_ == 1 ? "" : "s"));
  }

  /// The grace period after --benchmark-duration is over (under mu_): the requests still in
  /// flight are cancelled (AIPerf cancels them and leaves them out of the metrics); their rows
  /// say cancelled.
  void cancel_after_grace() {
    grace_over_ = true;
    diag::note(fmt::format("--benchmark-grace-period {:g} s over: cancelling {} request{} still in flight", o_.grace_s,
                           in_flight_, in_flight_ == 1 ? "" : "s"));
    for (http::Transport* c : in_flight_conns_) c->cancel();
  }

  /// The send-order gate (issue 21.6): a request is handed to its transport only once it is
  /// the first, by (scheduled ms from run start, plan index = file order), of the requests
  /// dispatched and not yet handed over, and its time has come. The dispatcher already pops in
  /// that order, but each request then runs on its own thread, and threads wake in any order.
  /// The turn passes on as soon as the transport has stamped the send time (on_start), so no
  /// lock is held across the connect, the write or the wait for the response; each waiter has
  /// its own condition variable, so a handover wakes one thread, not all of them.
  using GateKey = std::pair<double, size_t>;

  /// Adds a dispatched request (dispatcher thread, before the pool may run it).
  void gate_enter(const GateKey& key) {
    std::lock_guard<std::mutex> g(gate_mu_);
    gate_.emplace(key, nullptr);
  }

  /// Removes `key` (its request was handed over, or no worker took it) and wakes the new first
  /// waiter. Idempotent.
  void gate_leave(const GateKey& key) {
    std::lock_guard<std::mutex> g(gate_mu_);
    auto it = gate_.find(key);
    if (it == gate_.end()) return;
    gate_.erase(it);
    if (!gate_.empty() && gate_.begin()->second) gate_.begin()->second->notify_one();
  }

  /// Blocks the worker of `key` until it is first in the gate and `deadline` (monotonic ms) has
  /// come. A request dispatched later with an earlier time (a session's next turn that became
  /// ready meanwhile) goes first if it arrives while this one waits.
  void gate_wait(const GateKey& key, double deadline) {
    std::condition_variable cv;
    std::unique_lock<std::mutex> g(gate_mu_);
    auto self = gate_.try_emplace(key, nullptr).first;  // entered by the dispatcher; try_emplace for safety
    self->second = &cv;
    for (;;) {
      if (gate_.begin() == self) {
        if (RealClock::instance().now_ms() >= deadline) break;
        cv.wait_until(g, to_tp(deadline));
      } else {
        cv.wait(g);  // gate_leave of the request before this one notifies
      }
    }
    self->second = nullptr;  // cv dies with this frame; the key stays until gate_leave
  }

  void execute(http::Transport& conn, size_t k, double deadline, double at) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      in_flight_conns_.insert(&conn);
      if (interrupted_ || grace_over_) conn.cancel();  // post() then sends nothing and says so
    }
    const PlanItem& it = items_[k];
    const auto& row = w_.rows[it.row];
    // Build everything before the deadline (the dispatcher hands work over early).
    const SizedPrompt* sized = it.row < sized_.size() && sized_[it.row] ? &*sized_[it.row] : nullptr;
    std::string prompt = row.text_input ? *row.text_input
                         : sized
                             ? sized->text
                             : tokens::synthetic_prompt(o_.prompt_seed, row.hash_ids, row.input_length, w_.block_size);
    std::vector<std::pair<std::string, std::string>>* hist = nullptr;
    if (o_.history == History::kDelta && !it.identity.session.empty()) hist = &history_.at(it.identity.session);
    static const std::vector<std::pair<std::string, std::string>> kNoHistory;
    Json body = build_body(o_, prompt, row.output_length, hist ? *hist : kNoHistory);
    if (row.priority) add_priority(body, *row.priority);
    RecordContext ctx;
    ctx.item = &it;
    ctx.row = &row;
    ctx.model = o_.model;
    ctx.block_size = w_.block_size;
    ctx.warmup = warmup_;
    ctx.scheduled_ms = at;
    ctx.mono0 = mono0_;
    ctx.unix_at_mono0 = unix0_;
    std::string rendered = tokens::render_request(body);
    ctx.input_tokens_estimate = tokens::token_count(rendered.size());
    const bool threaded = hist && !hist->empty();
    ctx.sized = sized;
    std::vector<uint32_t> toks;
    if (sized && !threaded) {
      // The engine's ids of exactly this request (what a router with --tokenizer-url hashes).
      toks = sized->ids;
      ctx.input_tokens_estimate = toks.size();
    } else {
      toks = tokens::text_to_tokens(threaded ? rendered : prompt);
    }
    ctx.input_length = toks.size();
    ctx.sequence_hashes = tokens::sequence_hashes(tokens::block_hashes(toks, w_.block_size, true));
    http::HttpRequest req;
    req.path = o_.endpoint_path.empty() ? api::api_path(o_.api) : o_.endpoint_path;
    req.keep_text = hist != nullptr;
    req.headers.emplace_back("X-Request-ID", it.request_id);
    if (!it.identity.session.empty()) req.headers.emplace_back("X-Correlation-ID", it.identity.session);
    if (!warmup_)
      for (auto& h : session::write_headers(*o_.header_style, it.identity)) req.headers.push_back(std::move(h));
    for (const auto& h : o_.extra_headers) req.headers.push_back(h);
    if (o_.streaming) req.headers.emplace_back("Accept", "text/event-stream");
    req.body = body.dump();
    const GateKey key{at, k};
    req.on_start = [this, key] { gate_leave(key); };
    gate_wait(key, deadline);
    http::HttpResult res = conn.post(req);
    gate_leave(key);  // a transport that never called on_start
    ctx.lag_ms = std::max(0.0, res.start_ms - deadline);
    const bool cancelled = res.error && res.error->type == "cancelled";
    if (cancelled && grace_over_)
      res.error->message = fmt::format("not finished {:g} s after --benchmark-duration (--benchmark-grace-period): {}",
                                       o_.grace_s, res.error->message);
    if (hist) {
      hist->emplace_back("user", prompt);
      hist->emplace_back("assistant", res.summary.content);
    }
    std::string line = client_record(ctx, res);
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_conns_.erase(&conn);
    out_.line(line);
    if (!warmup_ && o_.on_row) o_.on_row(line);
    if (!cancelled) {  // a cancelled request neither starts nor stretches the measured duration
      if (first_start_ == 0 || res.start_ms < first_start_) first_start_ = res.start_ms;
      last_end_ = std::max(last_end_, res.end_ms);
    }
    end_rel_[k] = res.end_ms - mono0_;
    if (res.start_ms > 0) sent_ms_[k] = res.start_ms - mono0_;
    ended_ms_[k] = res.end_ms - mono0_;
    if (!res.error && res.end_ms > res.start_ms) {
      latency_sum_ += res.end_ms - res.start_ms;
      ++latency_n_;
    }
    if (!warmup_) {
      stats_.lag_ms.push_back(ctx.lag_ms);
      if (cancelled) {
        ++stats_.cancelled;
      } else if (res.error) {
        ++stats_.errors;
        ++stats_.errors_by_type[std::to_string(res.error->code) + " " + res.error->type];
        if (res.status == 0) ++transport_errors_;
      } else {
        ++stats_.ok;
      }
    }
  }

  /// The tool call before an item: its session's previous turn `prev` stopped for it.
  struct ToolCallStart {
    size_t prev = 0;
    uint64_t started_unix_ms = 0;
  };
  uint64_t unix_now() const {
    return static_cast<uint64_t>(std::llround(unix0_ + RealClock::instance().now_ms() - mono0_));
  }
  void send_tool_event(size_t k, const ToolCallStart& call, bool start) {
    const PlanItem& it = items_[k];
    records::ToolEvent e;
    e.event_type = start ? records::event::kToolStart : records::event::kToolEnd;
    e.event_time_unix_ms = start ? call.started_unix_ms : unix_now();
    e.session_id = it.identity.session;
    e.parent_session_id = it.identity.parent;
    e.tool_call_id = items_[call.prev].request_id + ":tool";
    e.tool_class = "unknown";
    e.started_at_unix_ms = call.started_unix_ms;
    if (start) {
      e.status = "running";
    } else {
      e.status = "succeeded";
      e.ended_at_unix_ms = e.event_time_unix_ms;
      e.duration_ms = static_cast<double>(e.event_time_unix_ms - std::min(e.event_time_unix_ms, call.started_unix_ms));
    }
    o_.tool_events->send(e);
  }

  void finish(size_t k) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      --in_flight_;
      ++done_;
      double end = end_rel_.count(k) ? end_rel_[k] : 0;
      end_rel_.erase(k);
      for (size_t d : dependents_[k]) {
        if (o_.tool_events && !warmup_ && w_.rows[items_[d].row].tool_wait_ms &&
            items_[d].identity.session == items_[k].identity.session) {
          tool_started_[d] = {k, unix_now()};
          send_tool_event(d, tool_started_[d], true);
        }
        dep_end_[d] = std::max(dep_end_[d], end);
        if (--remaining_[d] == 0) {
          double ready = dep_end_[d] + items_[d].delay_ms;
          if (items_[d].at_ms) ready = std::max(ready, *items_[d].at_ms);
          ready_.push({ready, d});
        }
      }
      if (done_ == items_.size() && !warmup_) stats_.all_transport_errors = transport_errors_ == done_ && done_ > 0;
      // Notify under the lock: once done_ reaches the end the scheduler may return and destroy
      // this Runner (and cv_) as soon as it can take mu_; a notify after unlocking raced with
      // that destruction (TSan: pthread_cond_broadcast vs pthread_cond_destroy).
      cv_.notify_all();
    }
  }

  /// How long the plan runs as scheduled (no replies waited for), said once when progress is
  /// shown: a fixed schedule or request-rate plan knows it before anything is sent.
  void progress_start_note() {
    const size_t n = items_.size();
    if (o_.schedule.mode == LoadMode::kConcurrency) {
      diag::note(fmt::format("{} requests, {} at a time: the ETA estimates from the requests left and the rate so far",
                             n, o_.concurrency ? std::to_string(o_.concurrency) : std::string("all")));
      return;
    }
    const double len_s = expected_end_ms(items_, sent_ms_, ended_ms_, 0, 0) / 1000.0;
    const std::string what =
        o_.schedule.mode == LoadMode::kFixedSchedule
            ? fmt::format("fixed schedule{}", o_.schedule.speedup != 1
                                                  ? fmt::format(" at --speedup {:g}", o_.schedule.speedup)
                                                  : std::string())
            : fmt::format("request rate {:g} req/s", o_.schedule.request_rate);
    diag::note(
        fmt::format("{}: {} requests over {} as scheduled (a session's later turns also wait for the "
                    "replies before them); the ETA follows the schedule",
                    what, n, clock_text(len_s)));
  }

  /// Seconds left: from the schedule (the plan's expected end with the mean latency so far) unless
  /// the plan is a closed loop (concurrency mode), where the rate so far and the requests left say it.
  std::optional<double> eta_s(double now_ms) const {
    if (o_.schedule.mode != LoadMode::kConcurrency) {
      const double lat = latency_n_ ? latency_sum_ / static_cast<double>(latency_n_) : 0;
      return std::max(0.0, expected_end_ms(items_, sent_ms_, ended_ms_, now_ms, lat) - now_ms) / 1000.0;
    }
    const double rate = now_ms > 0 ? static_cast<double>(done_) / now_ms : 0;  // per ms
    if (rate <= 0) return std::nullopt;
    return static_cast<double>(items_.size() - done_) / rate / 1000.0;
  }

  static std::string clock_text(double s) {
    if (s < 9.95) return fmt::format("{:.1f} s", std::max(0.0, s));
    const auto r = static_cast<long long>(std::llround(s));
    if (r < 60) return std::to_string(r) + " s";
    return fmt::format("{}:{:02d} min", r / 60, static_cast<int>(r % 60));
  }

  void progress_loop() {
    std::unique_lock<std::mutex> lk(mu_);
    progress_start_note();
    while (!finished_) {
      progress_cv_.wait_for(lk, std::chrono::milliseconds(250));
      const double now = RealClock::instance().now_ms() - mono0_;
      const double rate = now > 0 ? static_cast<double>(done_) * 1000.0 / now : 0;
      const auto eta = eta_s(now);
      std::fputs(fmt::format("\r{}: {}/{} done, {} in flight, {} errors, {:.1f} req/s, {} elapsed, ETA {}   ",
                             diag::program(), done_, items_.size(), in_flight_, stats_.errors, rate,
                             clock_text(now / 1000.0), eta ? clock_text(*eta) : std::string("?"))
                     .c_str(),
                 stderr);
    }
    std::fputs("\n", stderr);
  }

  const records::Workload& w_;
  const LiveOptions& o_;
  io::Output& out_;
  const std::vector<PlanItem>& items_;
  http::ConnectionPool& pool_;
  bool warmup_;
  LiveStats& stats_;
  const std::vector<std::optional<SizedPrompt>>& sized_;  // by row; empty without --tokenizer-url
  std::mutex mu_;
  std::condition_variable cv_, progress_cv_;
  std::priority_queue<std::pair<double, size_t>, std::vector<std::pair<double, size_t>>, std::greater<>> ready_;
  std::vector<size_t> remaining_;
  std::vector<double> dep_end_;
  std::map<size_t, ToolCallStart> tool_started_;  ///< tool waits under way, by the item they precede
  std::vector<std::vector<size_t>> dependents_;
  std::map<size_t, double> end_rel_;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> history_;
  std::set<http::Transport*> in_flight_conns_;        // what interrupt() cancels
  std::mutex gate_mu_;                                // guards gate_ only (never held with mu_)
  std::map<GateKey, std::condition_variable*> gate_;  // dispatched, not yet handed over -> its waiter
  size_t in_flight_ = 0, done_ = 0, sent_ = 0;
  uint64_t transport_errors_ = 0;
  bool stopped_ = false, finished_ = false, pool_wait_ = false, interrupted_ = false;
  bool cut_off_ = false;                 // --benchmark-duration stopped the sending
  std::atomic<bool> grace_over_{false};  // and its grace period is over (read by execute unlocked)
  double mono0_ = 0, unix0_ = 0, first_start_ = 0, last_end_ = 0;
  // Per plan item, ms from run start (NaN until known): when it was sent and when it ended; the
  // progress line's ETA follows the schedule with these (expected_end_ms).
  std::vector<double> sent_ms_, ended_ms_;
  double latency_sum_ = 0;
  uint64_t latency_n_ = 0;
};

}  // namespace

void interrupt_live(const std::string& why) {
  std::lock_guard<std::mutex> g(g_interrupt_mu);
  g_interrupted = true;
  if (g_active) g_active->interrupt(why);
  else diag::note(why);  // between runs: no connection thread is writing rows
}

LiveStats run_live(const records::Workload& w, const LiveOptions& o, io::Output& out) {
  Plan plan = build_plan(w, o.schedule);
  for (const auto& e : plan.errors) diag::error("", e);
  if (!plan.errors.empty())
    throw Fatal(kExitBadData, std::to_string(plan.errors.size()) + " workload error(s); nothing was sent");
  LiveStats stats;
  stats.planned = plan.items.size();
  // --tokenizer-url: size every synthetic prompt the run sends before anything is sent, so the
  // schedule is not delayed by /tokenize calls; an unusable tokenizer stops the run here.
  std::vector<std::optional<SizedPrompt>> sized;
  if (!o.tokenizer_url.empty() && !w.rows.empty()) {
    std::vector<bool> need(w.rows.size(), false);
    for (const auto& it : plan.items) need[it.row] = true;
    for (uint64_t k = 0; k < o.warmup_count; ++k) need[k % w.rows.size()] = true;
    sized.resize(w.rows.size());
    uint64_t count = 0, off = 0;
    for (size_t r = 0; r < w.rows.size(); ++r) {
      if (!need[r] || w.rows[r].text_input) continue;  // literal prompts are sent as written
      auto s = size_prompt(o, w.rows[r], w.block_size);
      if (!s) throw Fatal(s.error().exit_code, "--tokenizer-url: " + s.error().message + "; nothing was sent");
      ++count;
      if (!s->exact) ++off;
      sized[r] = std::move(*s);
    }
    if (off)
      diag::warning("tokenizer", std::to_string(off) + " of " + std::to_string(count) +
                                     " prompts could not be sized to exactly input_length tokens of " +
                                     o.tokenizer_url + " (dyn.prompt_sizing in their rows)");
  }
  http::raise_fd_limit();
  size_t pool_size = o.max_connections;
  if (o.concurrency) pool_size = std::min<size_t>(pool_size, o.concurrency);
  http::ConnectionPool pool(o.client, pool_size, 256 * 1024, RealClock::instance(), o.transport);
  if (o.warmup_count && !w.rows.empty()) {
    std::vector<PlanItem> warm;
    for (uint64_t k = 0; k < o.warmup_count; ++k) {
      PlanItem it;
      it.row = k % w.rows.size();
      it.at_ms = 0;
      it.request_id = "warmup-" + std::to_string(k);
      warm.push_back(std::move(it));
    }
    LiveOptions wo = o;
    wo.history = History::kCumulative;
    if (!wo.concurrency) wo.concurrency = std::min<uint64_t>(o.warmup_count, 16);
    Runner(w, wo, out, warm, pool, true, stats, sized).run();
  }
  Runner(w, o, out, plan.items, pool, false, stats, sized).run();
  return stats;
}

}  // namespace dyn::replay
