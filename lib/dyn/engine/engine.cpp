// The engine scheduler: queues, chunked prefill, prefix reuse, LIFO preemption, step timing.
#include "dyn/engine/engine.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dyn::engine {

struct Engine::Seq {
  RequestSpec spec;
  uint64_t target = 0;     // tokens to prefill: prompt, or prompt + generated after preemption
  uint64_t computed = 0;   // tokens whose KV is held
  uint64_t generated = 0;  // output tokens emitted
  uint64_t cached = 0;     // prefix hit at first admission
  int64_t rank = 0;        // KvEviction::kPriority: the request's importance, higher kept longer
  bool admitted_once = false;
  bool onboarded = false;        // lower-tier blocks were onboarded (once per request)
  uint64_t tier_tokens[3] = {};  // of `cached`: onboarded from G2, G3, G4
  bool running = false;
  bool done = false;
  size_t held_hashed = 0;  // leading spec.block_hashes acquired
  uint64_t held_private = 0;
  // Pool slots of the held hashed blocks (slots[i] holds block_hashes[i], i < held_hashed): a
  // release goes by slot, without a hash lookup per block.
  std::vector<uint32_t> slots;
};

Engine::Engine(EngineConfig config)
    : cfg_(config),
      pool_(config.num_blocks, config.kv_events, config.kv_eviction == KvEviction::kSession,
            config.kv_eviction == KvEviction::kPriority),
      leases_(pool_, config.kv_hints, config.tiers.enabled()) {
  if (cfg_.tiers.enabled()) {
    tiers_ = std::make_unique<Tiers>(cfg_.tiers, cfg_.kv_bytes_per_token * cfg_.block_size, cfg_.speedup_ratio,
                                     cfg_.shared_g4, [this](KvEvent e) { pool_.push_event(std::move(e)); });
    // Whatever eviction order picks the G1 victim, it is offloaded (SPEC 8.7).
    pool_.set_evict_hook([this](uint64_t h, std::optional<uint64_t> parent) { tiers_->on_g1_evict(h, parent, now_); });
    leases_.set_prefetcher([this](const std::vector<uint64_t>& h, double now_ms) { return prefetch(h, now_ms); });
  }
}

Engine::~Engine() = default;

Expected<bool> Engine::add(RequestSpec spec) {
  if (spec.prompt_tokens == 0) return Error{"empty prompt (0 tokens)", kExitBadData};
  if (seqs_.count(spec.id)) return Error{fmt::format("duplicate request id {}", spec.id), kExitBadData};
  if (spec.max_output_tokens == 0) spec.max_output_tokens = 1;
  const uint64_t bs = cfg_.block_size;
  // ceil((prompt + output) / bs), term by term: a sum near 2^64 must not wrap to a small count
  // that fits the pool (an output_length of 2^64 - 1 then ran for ever).
  const uint64_t in = spec.prompt_tokens, out = spec.max_output_tokens;
  uint64_t need = 0;
  if (__builtin_add_overflow(in / bs, out / bs, &need) ||
      __builtin_add_overflow(need, (in % bs + out % bs + bs - 1) / bs, &need))
    need = UINT64_MAX;
  if (need > cfg_.num_blocks)
    return Error{fmt::format("request needs {} KV blocks ({} prompt + {} output tokens), the pool has {}", need,
                             spec.prompt_tokens, spec.max_output_tokens, cfg_.num_blocks),
                 kExitBadData};
  // Only full prompt blocks can be hashed; ignore extra hashes a caller may pass.
  if (spec.block_hashes.size() > spec.prompt_tokens / bs) spec.block_hashes.resize(spec.prompt_tokens / bs);
  auto s = std::make_unique<Seq>();
  s->target = spec.prompt_tokens;
  // The pool keeps higher ranks longer; ~p reverses the order without overflowing (KvEviction::kPriority).
  s->rank = cfg_.low_priority_values_first ? ~spec.priority : spec.priority;
  s->spec = std::move(spec);
  Seq* p = s.get();
  seqs_.emplace(p->spec.id, std::move(s));
  if (cfg_.scheduling_policy == SchedulingPolicy::kPriority) {
    // Behind every waiting request that goes before it or ties (arrival order among equals).
    const bool low_first = cfg_.low_priority_values_first;
    auto after = [&](const Seq* w) {
      return low_first ? w->spec.priority > p->spec.priority : w->spec.priority < p->spec.priority;
    };
    waiting_.insert(std::find_if(waiting_.begin(), waiting_.end(), after), p);
  } else {
    waiting_.push_back(p);
  }
  ++counters_.requests_added;
  return true;
}

bool Engine::cancel(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  Seq* s = it->second.get();
  release_blocks(*s);
  if (s->running) running_.erase(std::find(running_.begin(), running_.end(), s));
  else if (auto o = std::find(onboarding_.begin(), onboarding_.end(), s); o != onboarding_.end()) onboarding_.erase(o);
  else waiting_.erase(std::find(waiting_.begin(), waiting_.end(), s));
  ++counters_.requests_cancelled;
  seqs_.erase(it);
  return true;
}

// Makes `s` hold the blocks for `new_computed` tokens: full prompt blocks as hashed blocks
// (shared, cached after release), everything else private. All or nothing.
bool Engine::ensure_blocks(Seq& s, uint64_t new_computed) {
  const uint64_t bs = cfg_.block_size;
  const uint64_t need_total = (new_computed + bs - 1) / bs;
  const size_t target_hashed =
      cfg_.enable_prefix_caching
          ? static_cast<size_t>(std::min<uint64_t>(s.spec.block_hashes.size(), new_computed / bs))
          : 0;
  const uint64_t target_private = need_total - target_hashed;
  if (target_hashed <= s.held_hashed && target_private == s.held_private) return true;
  // Count what is missing and what would be reactivated (no longer evictable).
  missing_.clear();
  present_.clear();
  uint64_t reactivated = 0;
  for (size_t i = s.held_hashed; i < std::min(target_hashed, s.held_hashed + 8); ++i)
    pool_.prefetch(s.spec.block_hashes[i]);  // the first cells, which the loop loads no earlier
  for (size_t i = s.held_hashed; i < target_hashed; ++i) {
    if (i + 8 < target_hashed) pool_.prefetch(s.spec.block_hashes[i + 8]);  // overlapped misses
    if (i + 4 < target_hashed) pool_.prefetch_entry(s.spec.block_hashes[i + 4]);
    const uint32_t slot = pool_.slot_of(s.spec.block_hashes[i]);  // one lookup per block
    if (slot == KvPool::kAbsent) {
      missing_.push_back(i);
    } else {
      if (pool_.slot_inactive(slot)) ++reactivated;
      present_.push_back(slot);
    }
  }
  const int64_t private_delta = static_cast<int64_t>(target_private) - static_cast<int64_t>(s.held_private);
  const int64_t need = static_cast<int64_t>(missing_.size()) + private_delta;
  if (need > 0 && static_cast<uint64_t>(need) + reactivated > pool_.available()) return false;
  // Protect present blocks from eviction first, then make room, then insert the new ones.
  if (target_hashed > s.held_hashed) s.slots.resize(target_hashed);
  {
    size_t m = 0, p = 0;  // the lookups above, in block order: missing_ holds indices, present_ slots
    for (size_t i = s.held_hashed; i < target_hashed; ++i) {
      if (m < missing_.size() && missing_[m] == i) {
        ++m;
        continue;
      }
      const uint32_t slot = present_[p++];
      pool_.acquire_slot(slot);  // no pool change since the lookups
      pool_.claim(slot, s.spec.session, s.rank);
      s.slots[i] = slot;
    }
  }
  if (private_delta < 0) pool_.free_private(static_cast<uint64_t>(-private_delta));
  const uint64_t grow = missing_.size() + static_cast<uint64_t>(std::max<int64_t>(private_delta, 0));
  pool_.make_room(grow);
  for (size_t i : missing_) {
    std::optional<uint64_t> parent;
    if (i > 0) parent = s.spec.block_hashes[i - 1];
    s.slots[i] = pool_.insert(s.spec.block_hashes[i], parent);
    pool_.claim(s.slots[i], s.spec.session, s.rank);
  }
  if (private_delta > 0) pool_.alloc_private(static_cast<uint64_t>(private_delta));
  s.held_hashed = std::max(s.held_hashed, target_hashed);
  s.held_private = target_private;
  return true;
}

void Engine::release_blocks(Seq& s, bool done) {
  pool_.free_private(s.held_private);
  s.held_private = 0;
  // Last block first: leaves enter the LRU before their prefixes and are evicted first.
  const uint64_t last_of =
      done && s.spec.session_final && cfg_.kv_eviction == KvEviction::kSession ? s.spec.session : 0;
  for (size_t i = s.held_hashed; i-- > 0;) {
    if (i >= 8) pool_.prefetch_slot(s.slots[i - 8]);  // held long ago: likely out of cache
    const uint32_t slot = s.slots[i];
    pool_.release_slot(slot, cfg_.enable_prefix_caching, last_of != 0 && pool_.owner(slot) == last_of);
  }
  s.held_hashed = 0;
}

void Engine::preempt_back() {
  Seq* v = running_.back();
  running_.pop_back();
  release_blocks(*v);
  v->running = false;
  v->computed = 0;
  v->target = v->spec.prompt_tokens + v->generated;
  waiting_.push_front(v);
  ++counters_.preemptions;
}

void Engine::finish(Seq& s) {
  release_blocks(s, /*done=*/true);
  s.done = true;
  ++counters_.requests_finished;
  if (!cfg_.kv_hints.enabled) return;
  // Request-level hints take effect at completion (Dynamo's execute_at request_completion),
  // when the step's tokens are out: the lease's TTL runs from the step's end.
  const std::vector<uint64_t>& blocks = s.spec.block_hashes;
  leases_.note_session(s.spec.session, blocks);
  if (s.spec.hint) leases_.apply(*s.spec.hint, HintTarget{next_ms_, s.spec.session, &blocks});
  // A session's last turn ends its leases: nothing will come back for what they keep.
  if (s.spec.session_final && s.spec.session != 0) leases_.end_session(s.spec.session);
}

std::vector<HintResult> Engine::apply_hint(const KvHint& h, double now_ms) {
  if (!cfg_.kv_hints.enabled) return {};
  const double now = std::max(now_, now_ms);
  leases_.expire(now);
  auto res = leases_.apply(h, HintTarget{now, 0, nullptr});
  if (tiers_) tiers_->flush(now_);  // a kv.demote's blocks start their copy down at once
  return res;
}

std::optional<bool> Engine::start_onboard(Seq& s) {
  const size_t g1 = pool_.match_prefix(s.spec.block_hashes);
  tiers_->match(s.spec.block_hashes, g1, tier_match_);
  if (tier_match_.empty()) return false;
  if (!ensure_blocks(s, (g1 + tier_match_.size()) * cfg_.block_size)) return std::nullopt;
  s.onboarded = true;
  for (Tier t : tier_match_) s.tier_tokens[static_cast<int>(t) - 2] += cfg_.block_size;
  onboarding_.push_back(&s);
  tiers_->onboard(s.spec.block_hashes, g1, tier_match_, now_,
                  [this, id = s.spec.id](double) { onboarded_.push_back(id); });
  return true;
}

std::pair<uint64_t, std::string> Engine::prefetch(const std::vector<uint64_t>& hashes, double now_ms) {
  now_ms = std::max(now_, now_ms);
  tiers_->advance(now_ms);  // a demote's copy down that has landed by now makes its blocks ready
  const size_t g1 = pool_.match_prefix(hashes);
  if (g1 == hashes.size()) return {0, ""};  // all on G1 already: nothing to move
  std::vector<Tier> tiers;
  tiers_->match(hashes, g1, tiers);
  if (tiers.empty()) return {0, fmt::format("none of its blocks past the {} on G1 is ready on a lower tier", g1)};
  std::vector<uint64_t> chain(hashes.begin(), hashes.begin() + static_cast<ptrdiff_t>(g1 + tiers.size()));
  tiers_->onboard(hashes, g1, tiers, now_ms,
                  [this, chain = std::move(chain)](double) mutable { prefetched_.push_back(std::move(chain)); });
  return {tiers.size(), ""};
}

// A landed prefetch's blocks join G1 as inactive blocks, the most recently used, leaf first as a
// request releases them; its G1 prefix is touched with them. The slots are taken now (not while
// the copy was under way: nothing waited for them), evicting in the one order; with no room left
// the chain stops there (its root part is what a returning request reuses).
void Engine::land_prefetched() {
  for (const std::vector<uint64_t>& chain : prefetched_) {
    std::vector<uint64_t> held;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (!pool_.acquire(chain[i])) {
        if (!pool_.make_room(1)) break;
        pool_.insert(chain[i], i ? std::optional<uint64_t>(chain[i - 1]) : std::nullopt);
      }
      held.push_back(chain[i]);
    }
    for (auto h = held.rbegin(); h != held.rend(); ++h) pool_.release(*h, cfg_.enable_prefix_caching);
  }
  prefetched_.clear();
}

// Without this, requests holding onboarded blocks behind the front could take the G1 slots the
// front needs while nothing runs to free any: the front was retried every step for ever (the WEKA
// replay with G1 + G2 and soft affinity never ended). Only when nothing runs: a running request
// frees its blocks when it finishes or is preempted, so the holders keep their blocks meanwhile.
bool Engine::reclaim_waiting(const Seq& front) {
  if (!running_.empty()) return false;
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    Seq* w = *it;
    if (w == &front || (w->held_hashed == 0 && w->held_private == 0)) continue;
    release_blocks(*w);
    w->onboarded = false;  // its next turn matches its prefix again, tiers included
    std::fill(std::begin(w->tier_tokens), std::end(w->tier_tokens), 0);
    return true;
  }
  return false;
}

// Requests whose blocks have all landed go back to the front of the queue, in landing order
// (vLLM puts a request whose KV load finished back among the waiting ones).
void Engine::admit_onboarded() {
  for (size_t k = onboarded_.size(); k-- > 0;) {
    auto it = seqs_.find(onboarded_[k]);
    if (it == seqs_.end()) continue;  // cancelled meanwhile
    Seq* s = it->second.get();
    if (auto o = std::find(onboarding_.begin(), onboarding_.end(), s); o != onboarding_.end()) {
      onboarding_.erase(o);
      waiting_.push_front(s);
    }
  }
  onboarded_.clear();
}

// This step's evictions start their copy down; a step with nothing to compute while blocks are on
// their way up lasts until the next transfer lands (1 ns past it: Link's slack).
void Engine::tiers_step_end(StepResult& out) {
  tiers_->flush(now_);
  if (plan_.empty() && !onboarding_.empty()) {
    const double next = tiers_->next_finish_ms();
    if (std::isfinite(next)) out.duration_ms = std::max(0.0, next - now_) + 1e-6;
  }
}

void Engine::step(StepResult& out, double now_ms) {
  out.clear();
  plan_.clear();
  ++counters_.steps;
  now_ = std::max(now_, now_ms);
  leases_.expire(now_);  // an expired lease's blocks are evictable again in this step
  if (tiers_) {
    tiers_->advance(now_);
    admit_onboarded();
    land_prefetched();
  }
  uint64_t budget = cfg_.max_num_batched_tokens;
  bool preempted = false;
  ++steps_since_prefill_;
  // 1. Running sequences, oldest first.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Seq* s = running_[i];
    const bool decode = s->computed >= s->target;
    uint64_t take = decode ? 1 : prefill_chunk(s->target - s->computed);
    if (!decode && take > budget) {
      if (!cfg_.enable_chunked_prefill && !plan_.empty()) continue;
      take = cfg_.enable_chunked_prefill ? budget : take;
    }
    bool placed = true;
    while (!ensure_blocks(*s, s->computed + take)) {
      preempted = true;
      ++out.preempted;
      if (running_.back() == s) {
        preempt_back();
        placed = false;
        break;
      }
      preempt_back();
    }
    if (!placed) break;
    plan_.push_back({s, take, decode});
    budget -= std::min(budget, take);
  }
  // 2. Admit waiting sequences (not in a step that had to preempt; with an interval, not before it
  // has passed unless nothing decodes: vLLM's prefill_schedule_interval).
  const bool deferred = cfg_.prefill_schedule_interval > 1 && steps_since_prefill_ < cfg_.prefill_schedule_interval &&
                        std::any_of(plan_.begin(), plan_.end(), [](const Planned& p) { return p.decode; });
  uint32_t prefills = 0;
  for (const Planned& p : plan_) prefills += p.decode ? 0 : 1;
  const uint32_t most = cfg_.max_num_partial_prefills ? cfg_.max_num_partial_prefills : UINT32_MAX;
  while (!preempted && !deferred && budget > 0 && !waiting_.empty() && running_.size() < cfg_.max_num_seqs &&
         prefills < most) {
    Seq* s = waiting_.front();
    if (tiers_ && cfg_.enable_prefix_caching && !s->admitted_once && !s->onboarded) {
      const auto started = start_onboard(*s);
      if (!started) {  // no G1 room for its blocks now
        if (reclaim_waiting(*s)) continue;
        break;
      }
      if (*started) {
        waiting_.pop_front();
        continue;
      }
    }
    uint64_t hit = 0;
    if (cfg_.enable_prefix_caching) hit = pool_.match_prefix(s->spec.block_hashes) * cfg_.block_size;
    s->computed = hit;
    const bool decode = hit >= s->target;  // fully cached prompt: first token from a decode step
    uint64_t take = decode ? 1 : prefill_chunk(s->target - hit);
    if (!decode && take > budget) {
      if (!cfg_.enable_chunked_prefill && !plan_.empty()) {
        s->computed = 0;
        break;
      }
      take = cfg_.enable_chunked_prefill ? budget : take;
    }
    if (!ensure_blocks(*s, s->computed + take)) {
      s->computed = 0;
      if (reclaim_waiting(*s)) continue;
      break;  // an onboarded request keeps its landed blocks while it waits (vLLM's order)
    }
    if (!s->admitted_once) {
      s->admitted_once = true;
      s->cached = hit;
      counters_.prompt_tokens += s->spec.prompt_tokens;
      counters_.cached_tokens += hit;
      counters_.g2_tokens += s->tier_tokens[0];
      counters_.g3_tokens += s->tier_tokens[1];
      counters_.g4_tokens += s->tier_tokens[2];
    }
    waiting_.pop_front();
    s->running = true;
    running_.push_back(s);
    plan_.push_back({s, take, decode});
    prefills += decode ? 0 : 1;
    budget -= std::min(budget, take);
  }
  // 3. Time of the step.
  StepShape& sh = out.shape;
  for (const Planned& p : plan_) {
    if (p.decode) {
      ++out.decode_tokens;
      sh.decode_kv_tokens += p.seq->computed + 1;  // the context the new token attends to
    } else {
      out.prefill_tokens += p.take;
      ++sh.prefill_seqs;
      sh.prefill_attention +=
          static_cast<double>(p.take) * (static_cast<double>(p.seq->computed) + static_cast<double>(p.take) / 2);
    }
  }
  sh.prefill_tokens = out.prefill_tokens;
  sh.decode_seqs = out.decode_tokens;
  if (out.prefill_tokens > 0) steps_since_prefill_ = 0;
  if (cfg_.profile) {
    out.duration_ms = cfg_.profile->step_ms(sh) / cfg_.speedup_ratio;
  } else {
    const double u = static_cast<double>(pool_.active()) / static_cast<double>(pool_.capacity());
    double ms = prefill_time_ms(out.prefill_tokens);
    if (out.decode_tokens > 0 || plan_.empty()) ms += decode_time_ms(u);
    out.duration_ms = ms / cfg_.speedup_ratio;
  }
  if (tiers_) tiers_step_end(out);
  next_ms_ = now_ + out.duration_ms;
  // 4. Apply: tokens out, finished sequences leave.
  bool any_done = false;
  for (const Planned& p : plan_) {
    Seq& s = *p.seq;
    bool emit;
    if (p.decode) {
      s.computed += 1;
      emit = true;
    } else {
      s.computed += p.take;
      emit = s.computed >= s.target;
    }
    if (!emit) continue;
    ++s.generated;
    ++counters_.generated_tokens;
    const bool last = s.generated >= s.spec.max_output_tokens;
    out.outputs.push_back(
        {s.spec.id, s.generated, s.cached, s.tier_tokens[0], s.tier_tokens[1], s.tier_tokens[2], last});
    if (last) {
      finish(s);
      any_done = true;
    }
  }
  if (any_done) {
    running_.erase(std::remove_if(running_.begin(), running_.end(), [](Seq* s) { return s->done; }), running_.end());
    for (const TokenOutput& o : out.outputs)
      if (o.finished) seqs_.erase(o.id);
  }
}

uint64_t Engine::steady_decode_steps() const {
  if (!onboarding_.empty()) return 0;  // a landing request joins the batch
  if (running_.empty() || running_.size() > cfg_.max_num_batched_tokens) return 0;
  if (!waiting_.empty() && running_.size() < cfg_.max_num_seqs) return 0;
  uint64_t k = UINT64_MAX;
  const uint64_t bs = cfg_.block_size;
  for (const Seq* s : running_) {
    if (s->computed < s->target) return 0;
    const uint64_t held = (s->held_hashed + s->held_private) * bs;
    const uint64_t room = held > s->computed ? held - s->computed : 0;
    const uint64_t left = s->spec.max_output_tokens - s->generated;  // >= 1 while running
    k = std::min({k, room, left - 1});
    if (k == 0) return 0;
  }
  return k;
}

double Engine::polynomial_decode_ms() const {
  const double u = static_cast<double>(pool_.active()) / static_cast<double>(pool_.capacity());
  return decode_time_ms(u) / cfg_.speedup_ratio;
}

StepShape Engine::decode_shape(uint64_t ahead) const {
  StepShape sh;
  sh.decode_seqs = running_.size();
  for (const Seq* s : running_) sh.decode_kv_tokens += s->computed + 1 + ahead;
  return sh;
}

double Engine::decode_steps_ms(uint64_t k) const {
  if (!cfg_.profile) return polynomial_decode_ms() * static_cast<double>(k);
  StepShape sh = decode_shape(0);
  double total = 0;
  for (uint64_t i = 0; i < k; ++i, sh.decode_kv_tokens += sh.decode_seqs)
    total += cfg_.profile->step_ms(sh) / cfg_.speedup_ratio;
  return total;
}

uint64_t Engine::decode_steps_within(uint64_t k, double ms) const {
  if (!cfg_.profile) {
    const double d = polynomial_decode_ms();
    return std::min<uint64_t>(k, static_cast<uint64_t>(std::floor(ms / d)));
  }
  StepShape sh = decode_shape(0);
  double total = 0;
  uint64_t m = 0;
  for (; m < k; ++m, sh.decode_kv_tokens += sh.decode_seqs) {
    total += cfg_.profile->step_ms(sh) / cfg_.speedup_ratio;
    if (total > ms) break;
  }
  return m;
}

double Engine::fast_forward(uint64_t k) {
  const double span = decode_steps_ms(k);
  for (Seq* s : running_) {
    s->computed += k;
    s->generated += k;
  }
  counters_.generated_tokens += k * running_.size();
  counters_.steps += k;
  next_ms_ += span;
  return span;
}

EngineStats Engine::stats() const {
  EngineStats st = counters_;
  st.running = running_.size();
  st.waiting = waiting_.size();
  st.total_blocks = pool_.capacity();
  st.active_blocks = pool_.active();
  st.cached_blocks = pool_.inactive();
  st.kv_usage = static_cast<double>(pool_.active()) / static_cast<double>(pool_.capacity());
  st.evictions = pool_.evictions();
  if (tiers_) {
    st.tiered = true;
    st.tiers = tiers_->stats();
  }
  st.hint_leases = leases_.leases();
  st.pinned_blocks = pool_.pinned();
  st.pinned_cap = cfg_.kv_hints.enabled ? leases_.cap_blocks() : 0;
  st.pinned_evictions = pool_.pinned_evictions();
  std::copy(&leases_.counts()[0][0], &leases_.counts()[0][0] + kHintActionKinds * kHintOutcomeKinds,
            &st.hint_actions[0][0]);
  uint64_t pending = 0;
  for (const Seq* s : running_) pending += s->target > s->computed ? s->target - s->computed : 0;
  for (const Seq* s : waiting_) pending += s->target;
  st.pending_prefill_tokens = pending;
  return st;
}

}  // namespace dyn::engine
