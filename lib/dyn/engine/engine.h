// One simulated inference worker (SPEC 8): a scheduler with running and waiting queues over a
// KV block pool, stepping in batches whose duration comes from the SPEC 8 timing model. The
// engine has no clock: the caller runs steps in real time (dyn-mocker) or on a virtual clock
// (the simulator), so both use exactly this code.
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/engine/config.h"
#include "dyn/engine/hints.h"
#include "dyn/engine/kv_pool.h"
#include "dyn/engine/profile.h"
#include "dyn/engine/tiers.h"

namespace dyn::engine {

/// A request as the engine sees it.
struct RequestSpec {
  uint64_t id = 0;                     ///< unique among the engine's live requests
  uint64_t prompt_tokens = 0;          ///< ISL (> 0)
  std::vector<uint64_t> block_hashes;  ///< sequence hashes of the full prompt blocks at the
                                       ///< engine block size: floor(prompt_tokens / block_size)
  uint64_t max_output_tokens = 1;      ///< tokens to generate (>= 1)
  /// For KvEviction::kSession (ignored under kLru): the request's session, any nonzero tag (a
  /// hash of its session_id; 0 = none), and whether it is the session's last turn
  /// (x-dynamo-session-final): its own blocks then go first when room is needed.
  uint64_t session = 0;
  bool session_final = false;
  /// The engine's own priority value (the request body's `priority`, as vLLM and SGLang take
  /// it); used under SchedulingPolicy::kPriority and KvEviction::kPriority with the config's
  /// polarity.
  int64_t priority = 0;
  /// A KV hint tied to this request (SPEC 8.6): applied when it completes, with its blocks as
  /// the "current request" and its session's. Ignored unless EngineConfig::kv_hints.enabled.
  std::shared_ptr<const KvHint> hint = nullptr;
};

/// Tokens produced by one step for one request.
struct TokenOutput {
  uint64_t id = 0;
  uint64_t generated = 0;      ///< output tokens so far, this step's token included
  uint64_t cached_tokens = 0;  ///< prompt tokens found in the prefix cache at first admission
  /// Of cached_tokens, those onboarded from G2 host, G3 disk and G4 shared pool (SPEC 8.7); the
  /// rest were on G1.
  uint64_t g2_tokens = 0, g3_tokens = 0, g4_tokens = 0;
  bool finished = false;  ///< the last token; the request has left the engine
};

/// What one step did. `duration_ms` is the step's time from SPEC 8, divided by the speedup
/// ratio: with a profile (EngineConfig::profile) its step_ms(shape); else the default polynomial,
/// prefill_time(new prompt tokens) when the step prefilled plus decode_time(u) when it decoded
/// (u = active KV blocks / total after this step's allocation). Its outputs are available when
/// the step ends (start + duration).
struct StepResult {
  double duration_ms = 0;
  uint64_t prefill_tokens = 0;  ///< uncached prompt tokens computed
  uint64_t decode_tokens = 0;   ///< sequences that decoded one token
  uint32_t preempted = 0;       ///< sequences preempted (recompute) in this step
  StepShape shape;              ///< what the step computed (the timing model's input)
  std::vector<TokenOutput> outputs;
  void clear() {
    duration_ms = 0;
    prefill_tokens = decode_tokens = 0;
    preempted = 0;
    shape = {};
    outputs.clear();
  }
};

/// Counters and gauges for /metrics and for a router's load view.
struct EngineStats {
  uint64_t running = 0, waiting = 0;
  uint64_t total_blocks = 0, active_blocks = 0, cached_blocks = 0;  ///< cached = inactive reusable
  double kv_usage = 0;                                              ///< active / total
  uint64_t pending_prefill_tokens = 0;  ///< prompt tokens still to compute (running + waiting)
  uint64_t requests_added = 0, requests_finished = 0, requests_cancelled = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;  ///< totals
  uint64_t preemptions = 0, evictions = 0, steps = 0;
  /// Prompt tokens onboarded from G2, G3, G4 (included in cached_tokens), and the tiers' gauges.
  uint64_t g2_tokens = 0, g3_tokens = 0, g4_tokens = 0;
  bool tiered = false;  ///< EngineConfig::tiers enabled: `tiers` holds their state
  TierStats tiers;
  /// KV hints (SPEC 8.6): leases now, blocks they pin (present or not), the cap, pinned blocks
  /// evicted because nothing else was left, and actions by kHintActionTypes x kHintOutcomes.
  uint64_t hint_leases = 0, pinned_blocks = 0, pinned_cap = 0, pinned_evictions = 0;
  uint64_t hint_actions[kHintActionKinds][kHintOutcomeKinds] = {};
};

/// The scheduler (SPEC 8). Each step:
/// 1. running sequences, oldest first, each take their next prefill chunk (chunked prefill:
///    up to the remaining budget) or one decode token, within max_num_batched_tokens. When
///    the KV pool cannot hold a sequence's next tokens (after evicting inactive cached blocks,
///    least recently used first), the newest running sequence is preempted (LIFO): its blocks
///    are released and it goes back to the front of the waiting queue to recompute prompt +
///    generated tokens.
/// 2. when nothing was preempted, waiting sequences are admitted in FIFO order while budget,
///    max_num_seqs and KV blocks allow; on admission the leading prompt blocks already in the
///    pool are reused (prefix cache hit, reported as cached_tokens on first admission). With
///    prefill_schedule_interval N > 1 (vLLM's), admission waits until N steps have passed since
///    the last step that computed prompt tokens, unless no running sequence decodes this step.
/// 3. a sequence whose prefill completes in the step emits a token (its first); a decoding
///    sequence emits one token per step; the sequence finishes after max_output_tokens and
///    releases its blocks, last block first, so its full prompt blocks stay cached.
/// A fully cached prompt costs no prefill time; its first token comes from a decode step.
/// Not thread-safe: the owner serialises calls (dyn-mocker holds a mutex, the simulator is
/// single-threaded).
class Engine {
 public:
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return cfg_; }

  /// Queues a request. Errors (nothing queued): duplicate id, zero prompt, or a request whose
  /// prompt + output could never fit the whole KV pool ("needs N blocks, pool has M").
  Expected<bool> add(RequestSpec spec);
  /// Removes a waiting or running request and frees its blocks (client went away). False when
  /// unknown (already finished).
  bool cancel(uint64_t id);
  /// True while any request is running, waiting or onboarding.
  bool has_work() const { return !running_.empty() || !waiting_.empty() || !onboarding_.empty(); }
  /// Plans and applies one step (see class comment); `out` is cleared first. `now_ms`: when the
  /// step starts on the caller's clock (virtual or real, never going back), which the tier links
  /// run on (SPEC 8.7); without it, when the previous step ended. A step that can only wait for
  /// onboarding blocks lasts until the next transfer completes.
  void step(StepResult& out, double now_ms);
  void step(StepResult& out) { step(out, next_ms_); }

  /// Steps from now that would each be a pure decode step of the same running set with the same
  /// duration: every running sequence decoding, none finishing or needing a new block, nothing
  /// admissible waiting. 0 when the next step is not like that. For the simulator's fast-forward.
  uint64_t steady_decode_steps() const;
  /// Total duration of the next `k` such decode steps (speedup applied): k times one step with the
  /// polynomial (KV use does not change); step by step with a profile (each step's context is one
  /// token longer per sequence).
  double decode_steps_ms(uint64_t k) const;
  /// The most of the next `k` steady decode steps that end within `ms` (decode_steps_ms(m) <= ms).
  uint64_t decode_steps_within(uint64_t k, double ms) const;
  /// Runs `k` <= steady_decode_steps() decode steps at once (no outputs: no first or last
  /// tokens happen in them); returns their total duration (decode_steps_ms(k)). Same state as k
  /// calls to step().
  double fast_forward(uint64_t k);

  EngineStats stats() const;
  const KvPool& pool() const { return pool_; }
  /// Leading prompt blocks of `block_hashes` cached here now (for tests and routers).
  size_t cached_prefix_blocks(const std::vector<uint64_t>& block_hashes) const {
    return pool_.match_prefix(block_hashes);
  }
  /// Applies a KV hint not tied to a request (dyn-mocker's POST /v1/kv_hints) at `now_ms` on
  /// the caller's clock (the step clock; at least the current step's start). Leases that expired
  /// by then end first. Empty unless config.kv_hints.enabled.
  std::vector<HintResult> apply_hint(const KvHint& h, double now_ms);
  /// Ends the leases whose TTL ran out by `now_ms` (each step does it at its start).
  void expire_hints(double now_ms) { leases_.expire(std::max(now_, now_ms)); }
  /// KV events since the last call (config.kv_events).
  std::vector<KvEvent> take_kv_events() { return pool_.take_events(); }

 private:
  struct Seq;
  /// Starts onboarding `s` when its prefix continues on lower tiers (SPEC 8.7): true when it
  /// left the waiting queue for onboarding_, false when there is nothing to onboard; nullopt
  /// when its G1 slots cannot be reserved now.
  std::optional<bool> start_onboard(Seq& s);
  void admit_onboarded();
  /// kv.prefetch (SPEC 8.6): starts copying up to G1 the blocks of `hashes` that continue its
  /// G1 prefix on a lower tier; they join G1 when the copy has landed (land_prefetched()).
  std::pair<uint64_t, std::string> prefetch(const std::vector<uint64_t>& hashes, double now_ms);
  void land_prefetched();
  /// When nothing runs and `front` cannot get its G1 blocks: releases the blocks of the waiting
  /// request nearest the back of the queue that holds any (onboarded, not yet admitted), which
  /// then onboards again at its turn (SPEC 8.7). False when none does (or something runs).
  bool reclaim_waiting(const Seq& front);
  void tiers_step_end(StepResult& out);
  bool ensure_blocks(Seq& s, uint64_t new_computed);
  /// Prompt tokens a sequence with `left` still to compute may take this step before the step's
  /// budget applies: at most long_prefill_token_threshold when set (vLLM V1 scheduler.py).
  uint64_t prefill_chunk(uint64_t left) const {
    const uint64_t most = cfg_.long_prefill_token_threshold;
    return most > 0 && left > most ? most : left;
  }
  /// `done`: the request finished (under kSession a final turn's own blocks then go first out).
  void release_blocks(Seq& s, bool done = false);
  void preempt_back();
  void finish(Seq& s);
  /// Shape of a steady decode step of the running set, `ahead` steps from now.
  StepShape decode_shape(uint64_t ahead) const;
  double polynomial_decode_ms() const;

  EngineConfig cfg_;
  KvPool pool_;
  KvLeases leases_;  // over pool_ (SPEC 8.6)
  std::unordered_map<uint64_t, std::unique_ptr<Seq>> seqs_;
  std::vector<Seq*> running_;  // admission order
  std::deque<Seq*> waiting_;
  struct Planned {
    Seq* seq;
    uint64_t take;
    bool decode;
  };
  std::vector<Planned> plan_;
  std::vector<uint64_t> missing_;
  std::vector<uint32_t> present_;  // ensure_blocks scratch: pool slots of the present blocks
  EngineStats counters_;
  uint64_t steps_since_prefill_ = UINT64_MAX / 2;  // prefill_schedule_interval's count
  // Tiers (SPEC 8.7): null when off. The clock: now_ = this step's start, next_ms_ = its end.
  std::unique_ptr<Tiers> tiers_;
  double now_ = 0, next_ms_ = 0;
  std::vector<Seq*> onboarding_;                   // reserved G1 slots, waiting for their blocks
  std::vector<uint64_t> onboarded_;                // ids whose blocks have all landed, in landing order
  std::vector<Tier> tier_match_;                   // scratch
  std::vector<std::vector<uint64_t>> prefetched_;  // kv.prefetch copies landed, not yet in G1
};

}  // namespace dyn::engine
