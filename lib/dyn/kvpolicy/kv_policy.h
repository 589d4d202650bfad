// The router's KV retention policies (SPEC 6.4: `dyn-replay --sim --kv-policy`, `dyn-route serve
// --kv-policy`): the KvHint v0.1 messages a session-aware layer sends, from what it knows of the
// session. One rule for the simulated and the live router; each decides where a hint goes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "dyn/base/json.h"
#include "dyn/base/named.h"

namespace dyn::kvpolicy {

enum class KvPolicy : uint8_t { kToolTtl, kEvictOnFinal, kParentRetain, kDemotePrefetch };
inline constexpr Named<KvPolicy> kKvPolicies[] = {
    {KvPolicy::kToolTtl, "tool-ttl",
     "a turn that ends in a tool call keeps its blocks (kv.retain) for 4x the session's expected tool wait when that "
     "is short enough to beat recomputing (Continuum)"},
    {KvPolicy::kEvictOnFinal, "evict-on-final",
     "a session's last turn puts its own blocks first out (kv.evict; Dynamo's continuum policy)"},
    {KvPolicy::kParentRetain, "parent-retain",
     "a subagent's spawn keeps its parent's blocks (kv.retain) for a TTL (Dynamo's continuum policy)"},
    {KvPolicy::kDemotePrefetch, "demote-prefetch",
     "with KV tiers: a turn that ends in a tool call moves its blocks to G2 (kv.demote), and they come back to G1 "
     "(kv.prefetch) before the session's predicted return (KVFlow, Tokencake)"},
};

/// Which policies run and their settings (docs/cli.md, SPEC 6.4). Times in seconds.
struct KvPolicyConfig {
  bool tool_ttl = false, evict_on_final = false, parent_retain = false, demote_prefetch = false;
  /// Expected tool wait before a session has had one (no tool names in a workload row).
  double tool_default_wait_s = 30;
  /// tool-ttl pins only when the expected wait is at most this: past it the pinned share of G1
  /// serves other sessions better than one session's return (keeping loses to recomputing).
  double tool_max_wait_s = 120;
  /// tool-ttl's lease is this many times the expected wait: a lease that ends before the session
  /// returns leaves its blocks the oldest in the eviction order (SPEC 8.6), worse than no hint,
  /// so it covers waits up to this multiple of the average.
  double tool_ttl_factor = 4;
  /// parent-retain's lease on the parent's blocks.
  double parent_ttl_s = 120;
  /// demote-prefetch demotes only when the expected wait is at least this many one-way copies
  /// of the blocks between G1 and G2: the demote and the prefetch take one each, and a return
  /// during either finds the blocks ready on neither tier (SPEC 8.7: G1 frees the slot at once).
  double demote_min_copies = 4;
  /// demote-prefetch's copy time C (SPEC 8.7): a turn's prompt blocks x kv_bytes_per_token bytes
  /// a token over the G2 -> G1 link (GB/s, 1e9 bytes/s; 0 = unbounded), divided by the engine's
  /// speedup_ratio. --sim takes the engine's settings, dyn-route serve its flags of the same
  /// names (the workers').
  double g2_to_g1_gbps = 14;
  uint64_t kv_bytes_per_token = 0;
  double speedup_ratio = 1;
  bool any() const { return tool_ttl || evict_on_final || parent_retain || demote_prefetch; }
  void enable(KvPolicy p) {
    switch (p) {
      case KvPolicy::kToolTtl: tool_ttl = true; break;
      case KvPolicy::kEvictOnFinal: evict_on_final = true; break;
      case KvPolicy::kParentRetain: parent_retain = true; break;
      case KvPolicy::kDemotePrefetch: demote_prefetch = true; break;
    }
  }
};

/// What the policies sent (the --sim summary's kv_policy): hints per policy, and tool-ending
/// turns not pinned because their expected wait was over tool_max_wait_s; demote-prefetch's
/// demotes (tool-ending turns), the tool-ending turns it kept on G1 (expected wait under
/// demote_min_copies copies) and its prefetches (sent before a predicted return).
struct KvPolicyCounts {
  uint64_t tool_retains = 0, tool_too_long = 0, final_evicts = 0, parent_retains = 0;
  uint64_t tool_demotes = 0, tool_not_demoted = 0, prefetches = 0;
};

/// The policies' state over one run: per session, the moving average of its tool waits. Each
/// hint is a KvHint v0.1 envelope in its wire form (Dynamo lib/kv-router/src/kv_hints.rs:
/// {"protocol_version": "0.1", "message_id", "actions": [{"action_id", "action_type",
/// "action_version": "1.0", "payload"}]}), message and action ids numbered from 1 in the order
/// sent. Deterministic; not thread-safe.
class KvPolicies {
 public:
  explicit KvPolicies(KvPolicyConfig c) : cfg_(c) {}

  /// The hint tied to a request of `session` (applied by the engine at its completion), or
  /// nullopt: tool-ttl's kv.retain of the request's blocks when `ends_in_tool`, demote-prefetch's
  /// kv.demote of them past the session's first `shared_blocks` then too when the expected wait
  /// is at least demote_min_copies x `copy_s` (the blocks' one-way G1 <-> G2 copy), evict-on-final's
  /// kv.evict of the request's blocks past the session's first `shared_blocks` when `last_turn`
  /// (a prefix other sessions share, a system prompt, is not the session's to drop). Used where
  /// the router knows before the request runs whether it ends in a tool call (--sim).
  std::optional<Json> request_hint(const std::string& session, bool last_turn, bool ends_in_tool,
                                   uint64_t shared_blocks, double copy_s = 0);
  /// tool-ttl's hint when a turn of `session` has just ended in a call of tool `tool` ("" =
  /// not named) and the router learned it only from the response (serve): kv.retain of the
  /// session's latest blocks (payload session_id) for the same lease request_hint gives, the
  /// expected wait the tool's where it has one; not tied to a request. nullopt without
  /// tool-ttl or when the expected wait is over tool_max_wait_s.
  std::optional<Json> tool_wait_hint(const std::string& session, const std::string& tool = "");
  /// A tool wait of `session` seen (a turn after a tool call arrived), in seconds, after a call
  /// of `tool` ("" = not named: workload rows name none): the moving averages (EMA, weight 1/2
  /// on the newest) it feeds, the session's and the tool's, are tool-ttl's expected wait.
  /// Tools past kMaxToolNames are not averaged apart.
  void observe_tool_wait(const std::string& session, double wait_s, const std::string& tool = "");
  /// demote-prefetch's kv.prefetch of `session`'s latest blocks (payload session_id; not tied to
  /// a request), sent before the session returns from a tool call; nullopt without the policy.
  std::optional<Json> prefetch_hint(const std::string& session);
  /// demote-prefetch's hint when a turn of `session` has just ended in a call of tool `tool` and
  /// the router learned it only then (serve): kv.demote (an empty payload: the caller names the
  /// blocks) when the expected wait (expected_tool_wait_s) is at least demote_min_copies x
  /// `copy_s`, counted in tool_demotes; else nullopt, counted in tool_not_demoted. nullopt
  /// without the policy.
  std::optional<Json> demote_hint(const std::string& session, const std::string& tool, double copy_s);
  /// demote-prefetch's one-way copy time C of a turn of `prompt_tokens` tokens in blocks of
  /// `block_size`, in ms (KvPolicyConfig's copy settings; 0 when the link is unbounded).
  double copy_ms(uint64_t prompt_tokens, uint32_t block_size) const;
  /// When demote-prefetch's kv.prefetch goes, in ms after the turn's end: the expected wait
  /// `wait_ms` less two copies `copy_ms` (the copy lands before the predicted return), at least 0.
  static double prefetch_delay_ms(double wait_ms, double copy_ms) { return std::max(0.0, wait_ms - 2 * copy_ms); }
  /// parent-retain's hint when a subagent of `parent` spawns (not tied to a request), or nullopt.
  std::optional<Json> spawn_hint(const std::string& parent);
  /// The session ended (its last turn was seen): its moving average is forgotten.
  void end_session(const std::string& session) { tool_wait_s_.erase(session); }
  /// The expected wait of a call of `tool` by `session`, in seconds (issue 49: per tool name
  /// where names are known, per session otherwise): the tool's moving average once it has one,
  /// else the session's, else tool_default_wait_s.
  double expected_tool_wait_s(const std::string& session, const std::string& tool = "") const;
  static constexpr size_t kMaxToolNames = 1024;

  const KvPolicyConfig& config() const { return cfg_; }
  const KvPolicyCounts& counts() const { return counts_; }

 private:
  /// tool-ttl's lease TTL for `session`, counted; nullopt (counted as too long) past the limit.
  std::optional<double> tool_ttl_s(const std::string& session, const std::string& tool = "");
  /// demote-prefetch's rule (E >= demote_min_copies x C), counted either way.
  bool demotes(const std::string& session, const std::string& tool, double copy_s);
  Json envelope();
  void add_action(Json& envelope, const char* type, Json payload);

  KvPolicyConfig cfg_;
  KvPolicyCounts counts_;
  std::unordered_map<std::string, double> tool_wait_s_;       // session -> EMA of its tool waits
  std::unordered_map<std::string, double> tool_name_wait_s_;  // tool name -> EMA of its waits
  uint64_t next_id_ = 1;
};

}  // namespace dyn::kvpolicy
