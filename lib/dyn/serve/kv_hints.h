// The router's KV retention policies in the live frontend (SPEC 6.4, `dyn-route serve
// --kv-policy`): what a turn, its end and a subagent's spawn tell the policies, and where each
// hint goes (the body forwarded, or the worker's POST /v1/kv_hints).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "dyn/base/clock.h"
#include "dyn/base/json.h"
#include "dyn/http/proxy.h"
#include "dyn/kvpolicy/kv_policy.h"
#include "dyn/kvpolicy/prefetch_plan.h"
#include "dyn/kvpolicy/session_prefix.h"
#include "dyn/serve/exchange.h"
#include "dyn/serve/fleet.h"

namespace dyn::serve {

/// Runs kvpolicy::KvPolicies over live traffic, with what serve knows of a session:
/// - a turn: each request of a session (x-dynamo-session-id or any SPEC 1 family), once, at its
///   first dispatch; its first turn is the first the router sees, its last the one marked
///   x-dynamo-session-final (or agent_context.session_final);
/// - a tool wait: a response that finished in a tool call (finish_reason tool_calls / tool_use,
///   or tool calls in it) begins one; the session's next request ends it (the moving averages
///   of tool-ttl's expected wait: the session's, and the tool's when the call named it);
/// - a subagent's spawn: the first request of a session whose parent_session_id is a session
///   the router is serving.
/// demote-prefetch (with KV tiers on the workers) acts where tool-ttl would: when a tool wait
/// begins, kv.demote of the session's lineage on the worker past its shared prefix (the blocks
/// of its latest turn's prompt), when the expected wait E is at least 4 one-way copies C of
/// those blocks (KvPolicyConfig's copy settings), and a kv.prefetch of its lineage planned for
/// E - 2C later (kvpolicy::PrefetchPlan, kept by the sender thread), cancelled when the
/// session's next request arrives first or it ends; the returning request's row notes the
/// prefetch sent before it.
/// Hints tied to a request (evict-on-final's kv.evict of the last turn's own blocks) travel in
/// the body sent to the worker as nvext.kv_hint (what dyn-mocker and Dynamo's experiment read;
/// applied at the request's completion). Hints not tied to a request (tool-ttl's kv.retain of
/// the session's blocks when the response says a tool call began: the router learns it only
/// then; parent-retain's kv.retain of the parent's blocks at spawn) go to the worker's control
/// endpoint POST /v1/kv_hints (its base URL from the worker list), from one sender thread in
/// the order made, so the loop never waits on them. Every hint is counted with its outcome
/// (the worker's answer per action for the endpoint; "forwarded" for one in a body) and noted
/// in its request's trace row (dyn.kv_hints). A session-prefix index (kvpolicy::
/// SessionPrefixIndex) keeps each session's block lineage per worker, from the turns placed
/// there; a kv.retain for a session on a worker names that lineage (block_hashes, root first, as
/// Dynamo's experiment policy writes them) beside its session_id, so an engine that does not
/// track sessions can honour it, and the lineage outlives the blocks' eviction (GET
/// /v1/session_prefix). Per-session state is bounded: past kMaxSessions the session seen
/// longest ago is forgotten. Thread-safe.
class KvPolicyRunner {
 public:
  static constexpr size_t kMaxSessions = 16384;
  /// The outcomes counted: "forwarded" (in a body), the worker's (engine::kHintOutcomes'
  /// names), "failed" (the endpoint did not answer 200 with results).
  static constexpr const char* kOutcomes[] = {"forwarded", "accepted",       "clipped",
                                              "rejected",  "passed_through", "failed"};
  /// The hints the policies send, one (policy, action_type, via) each: kKinds in kv_hints.cpp.
  static constexpr size_t kHintKinds = 5;

  /// `block_size`: the router's (evict-on-final's block offsets); `timeout_ms`: the control
  /// endpoint's connect and read timeouts.
  KvPolicyRunner(const kvpolicy::KvPolicyConfig& cfg, Fleet& fleet, const Clock& clock, uint32_t block_size,
                 double timeout_ms);
  ~KvPolicyRunner();
  KvPolicyRunner(const KvPolicyRunner&) = delete;
  KvPolicyRunner& operator=(const KvPolicyRunner&) = delete;

  /// The request to send for a dispatch of `ex` to `worker` (`d`: as the client sent it, with
  /// the router's members). At its first dispatch the turn is seen (with the placement's
  /// `predicted_cached` tokens: on a session's first turn, its prefix shared with others, which
  /// evict-on-final leaves alone) and any hint it brings is made; each attempt carries the
  /// request's hint in its body: a member spliced in when the body has no nvext, else the body
  /// re-written with nvext.kv_hint set (the client's own kv_hint actions kept first).
  http::ProxyRequest request_for(Exchange& ex, size_t worker, uint64_t predicted_cached, const http::ProxyRequest& d);
  /// The response of `ex` ended (`ok`: a success, `f` its facts): tool-ttl's hint when it
  /// finished in a tool call of a session that goes on.
  void on_end(Exchange& ex, const ResponseFacts* f, bool ok);
  /// A harness tool event of `session_id` (ToolEventIngress, --tool-events-endpoint; issue 49):
  /// the harness knows when a tool runs, the response only that one was called. A tool_start
  /// (`start`) begins the session's tool wait when no response has begun one, and tool-ttl's
  /// kv.retain goes as on_end sends it (counted, in no request's row: no request carries it); a
  /// wait a response began only learns the tool's name (`tool`; "" and "unknown" = unnamed). The end of the
  /// session's last running tool (`last_done`) ends the wait: tool_start to tool_end feeds the
  /// moving averages, where without events the next turn's arrival does. Sessions the router has
  /// not served (or has forgotten) are ignored: no worker is known to hold their blocks.
  void on_tool_event(const std::string& session_id, const std::string& tool, bool start, bool last_done);
  /// Prometheus lines: dyn_kv_policy_hints_total{policy, action_type, via, outcome},
  /// dyn_kv_policy_tool_waits_not_pinned_total, and with demote-prefetch
  /// dyn_kv_policy_tool_waits_not_demoted_total and dyn_kv_policy_prefetches_cancelled_total.
  void append_metrics(std::string& out) const;
  /// GET /v1/session_prefix: the session-prefix index (SessionPrefixIndex::snapshot_json).
  Json session_prefix_json() const;

 private:
  struct Session {
    size_t worker = 0;
    uint64_t shared_blocks = 0;
    uint64_t turns = 0;                   ///< turns seen (a planned prefetch names the turn it follows)
    uint64_t input_tokens = 0;            ///< the latest turn's prompt (demote-prefetch's copy time)
    std::optional<double> tool_since_ms;  ///< a tool call ended its latest turn at this time
    std::string tool;                     ///< the name of that call's (first) tool, "" = none
    std::optional<size_t> prefetched;     ///< a kv.prefetch went to this worker in the current wait
    std::list<std::string>::iterator lru;
  };
  struct Control {
    size_t worker = 0;
    size_t kind = 0;
    std::string body;
  };
  /// The turn of `ex` (its first dispatch, to `worker`): the session's state, spawn and request hints.
  void see_turn(Exchange& ex, size_t worker, uint64_t predicted_cached);
  Session& session_locked(const std::string& id, bool* fresh);
  void forget_locked(const std::string& id);
  /// `hint` with each kv.retain and kv.prefetch for `session` naming its lineage on `worker` (block_hashes).
  Json with_lineage(Json hint, const std::string& session, size_t worker) const;
  /// A tool wait of `id` began (its latest turn on `worker` ended in a tool call, or the harness
  /// said one started; `ex`: the response's exchange, else null): tool-ttl's and demote-prefetch's hints.
  void tool_wait_began_locked(Exchange* ex, const std::string& id, Session& s, size_t worker);
  /// Queues `hint` (of kKinds[`kind`]) for `worker`'s control endpoint and notes it in `ex`'s row (none: null).
  void send_locked(Exchange* ex, size_t worker, size_t kind, const Json& hint);
  /// Sends the planned prefetches `due` whose session has not come back since (sender thread).
  void prefetch_due(const std::vector<kvpolicy::PrefetchPlan::Due>& due);
  void sender();
  void post(const Control& c);
  void count(size_t kind, size_t outcome) { counts_[kind][outcome].fetch_add(1, std::memory_order_relaxed); }

  Fleet& fleet_;
  const Clock& clock_;
  uint32_t block_size_;
  double timeout_ms_;
  mutable std::mutex mu_;
  kvpolicy::KvPolicies policies_;
  std::unordered_map<std::string, Session> sessions_;
  std::list<std::string> lru_;  ///< session ids, the one seen longest ago first
  kvpolicy::SessionPrefixIndex lineage_{kMaxSessions};
  std::array<std::array<std::atomic<uint64_t>, std::size(kOutcomes)>, kHintKinds> counts_{};
  std::atomic<uint64_t> prefetches_cancelled_{0};
  std::mutex send_mu_;  ///< after mu_ where both are held
  std::condition_variable send_cv_;
  std::deque<Control> pending_;
  kvpolicy::PrefetchPlan plan_;  ///< demote-prefetch's prefetches not yet due (send_mu_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dyn::serve
