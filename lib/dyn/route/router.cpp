// Router: placement (SPEC 3.2), load accounting, and the affinity table with initializing waiters,
// leases, idle TTL, hard invalidation and versioned soft rebinds (SPEC 2).
#include "dyn/route/router.h"

#include <algorithm>
#include <iterator>
#include <chrono>
#include <cmath>

#include "dyn/session/normalize.h"

namespace dyn::route {

const char* binding_name(BindingOutcome b) {
  switch (b) {
    case BindingOutcome::kNone: return "none";
    case BindingOutcome::kNew: return "new";
    case BindingOutcome::kHit: return "hit";
    case BindingOutcome::kRebound: return "rebound";
    case BindingOutcome::kExpired: return "expired";
  }
  return "none";
}

Expected<KvEvent> kv_event_from_json(const Json& j) {
  if (!j.is_object()) return bad_data("KV event is not an object");
  auto t = j.find("type");
  if (t == j.end()) t = j.find("kind");
  if (t == j.end() || !t->is_string()) return bad_data("KV event has no \"type\"");
  KvEvent e;
  const std::string& k = t->get_ref<const std::string&>();
  if (k == "stored") e.kind = KvEvent::Kind::kStored;
  else if (k == "removed") e.kind = KvEvent::Kind::kRemoved;
  else if (k == "cleared" || k == "all_blocks_cleared") e.kind = KvEvent::Kind::kCleared;
  else return bad_data("unknown KV event type '" + k + "'");
  if (e.kind != KvEvent::Kind::kCleared) {
    auto b = j.find("block_hashes");
    if (b == j.end() || !b->is_array()) return bad_data("KV event '" + k + "' has no block_hashes array");
    for (auto& h : *b) {
      if (!h.is_number_unsigned() && !(h.is_number_integer() && h.get<int64_t>() >= 0))
        return bad_data("KV event block hash is not an unsigned 64-bit integer: " + h.dump());
      e.block_hashes.push_back(h.get<uint64_t>());
    }
    auto p = j.find("parent_hash");
    if (p != j.end() && (p->is_number_unsigned() || (p->is_number_integer() && p->get<int64_t>() >= 0)))
      e.parent_hash = p->get<uint64_t>();
  }
  if (auto m = j.find("medium"); m != j.end() && !m->is_null()) {
    auto tier = m->is_string() ? kv::tier_of_medium(m->get_ref<const std::string&>()) : std::nullopt;
    if (!tier) return bad_data("KV event medium " + m->dump() + " is not a tier the router indexes");
    e.tier = *tier;
  }
  return e;
}

namespace {
constexpr uint32_t kNoSlot = 0xffffffffu;
double ttl_ms(const RouterConfig& c) { return static_cast<double>(c.affinity_ttl_secs) * 1000.0; }
}  // namespace

struct Router::Impl {
  struct Worker {
    WorkerSpec spec;
    bool present = true;
    bool healthy = true;
    bool draining = false;
    uint64_t kv_blocks = 0;
    uint64_t active_requests = 0, active_blocks = 0, prefill_tokens = 0;
    uint64_t decisions = 0;
  };
  struct Entry {
    uint32_t worker = 0;
    bool initializing = false;
    uint64_t leases = 0;
    uint64_t version = 0;
    uint64_t gen = 0;
    double idle_since_ms = 0;
    std::string parent;  // set for parent groups
  };
  enum class Role : uint8_t { kNone, kOwner, kHolder, kRebind };
  struct Active {
    bool used = false;
    bool committed = false;
    bool prefill_done = false;
    Role role = Role::kNone;
    uint32_t w = 0;
    uint64_t blocks = 0;
    uint64_t prefill_tokens = 0;
    std::string key;
    uint64_t gen = 0;
    uint64_t seen_version = 0;
    std::vector<uint64_t> seq;
    // Back to a free slot, keeping the key's and seq's buffers: slots are reused by the next
    // placements, so a freed slot allocates nothing (issue 17: malloc was a top cost offline).
    void reset() {
      used = committed = prefill_done = false;
      role = Role::kNone;
      w = 0;
      blocks = prefill_tokens = gen = seen_version = 0;
      key.clear();
      seq.clear();
    }
  };

  explicit Impl(const RouterConfig& c)
      // Event-fed, the workers say when a block goes: no TTL and no budget (SPEC 3.3), as the
      // lower tiers; the index then keeps no LRU order at all (kv::PrefixIndex).
      : index(kv::IndexConfig{c.kv_events ? 0.0 : c.kv_ttl_secs * 1000.0,
                              c.kv_events       ? 0
                              : c.max_tree_size ? c.max_tree_size
                                                : c.worker_kv_blocks,
                              c.prune_target_ratio}),
        host(lower_tier_config(c, c.host_ttl_secs, c.host_max_tree_size)),
        disk(lower_tier_config(c, c.disk_ttl_secs, c.disk_max_tree_size)),
        shared(kv::IndexConfig{0, 0, c.prune_target_ratio}),
        rng(c.seed),
        tiers_tracked(c.kv_events || c.host_ttl_secs > 0 || c.disk_ttl_secs > 0 ||
                      c.shared_cache_type != SharedCacheType::kNone) {
    shared.set_worker_count(1);
  }
  // A lower tier's index (SPEC 3.3): event-fed, blocks stay until the worker removes them;
  // predicted, a routed block is resident for the tier's TTL since its last use, within its budget.
  static kv::IndexConfig lower_tier_config(const RouterConfig& c, double ttl_secs, uint64_t budget) {
    return kv::IndexConfig{c.kv_events ? 0.0 : ttl_secs * 1000.0, c.kv_events ? 0 : budget, c.prune_target_ratio};
  }

  std::mutex mu;
  std::condition_variable cv;
  kv::PrefixIndex index;                  // the device tier (G1)
  kv::PrefixIndex host;                   // G2: event-fed, or predicted when --router-host-ttl-secs is set
  kv::PrefixIndex disk;                   // G3: likewise with --router-disk-ttl-secs
  kv::PrefixIndex shared;                 // the shared pool (G4), one holder (slot 0): --shared-cache-type events
  std::vector<kv::IndexEvent> event_run;  // apply_kv_events' scratch (under mu)
  kv::PrefixIndex& tier(kv::Tier t) { return t == kv::Tier::kHost ? host : t == kv::Tier::kDisk ? disk : index; }
  void for_tiers(auto&& f) {
    f(index);
    f(host);
    f(disk);
  }
  Rng rng;
  // Whether any index below the GPU can hold blocks: when not, routing reads the GPU tier only,
  // at the cost it had before tiers (one test per placement).
  const bool tiers_tracked;
  std::vector<Worker> workers;
  std::unordered_map<uint64_t, uint32_t> by_id;
  uint64_t rr = 0;
  std::unordered_map<std::string, Entry> table;
  // Bindings dropped with their removed worker, by key: the key's next placement is reported as
  // a move with this reason (never followed); forgotten after the affinity TTL.
  struct Dropped {
    RebindReason reason = RebindReason::kNone;
    double at_ms = 0;
  };
  std::unordered_map<std::string, Dropped> dropped;
  uint64_t next_gen = 1;
  std::vector<Active> slots;
  std::vector<uint32_t> free_slots;
  RouterStats stats;
  double next_sweep_ms = 0;
  // No binding can expire before this (router clock ms): the earliest idle deadline among the
  // bindings the last scan kept, lowered by every binding that goes idle since (idle()). A
  // periodic sweep before it would erase nothing, so it skips the scan of the table (issue 17:
  // the scan was 4 % of dyn-route decide).
  double no_expiry_before_ms = 0;
  // Starts e's idle TTL at `now` (SPEC 2.2.3); the only writer of idle_since_ms.
  void idle(Entry& e, double now, double ttl_ms) {
    e.idle_since_ms = now;
    no_expiry_before_ms = std::min(no_expiry_before_ms, now + ttl_ms);
  }
  BindingListener* listener = nullptr;
  std::vector<uint32_t> ov;  // scratch: overlaps per worker slot
  // Scratch: tier-exclusive host and disk overlaps per slot, and their sum ov + host + disk (where
  // the disk run starts). Filled only while lower_on (else all 0).
  std::vector<uint32_t> ov_host, ov_disk, ov_upto;
  bool lower_on = false;
  // Scratch: shared_beyond[k] = the request's blocks at positions >= k in the shared pool (filled
  // while shared_on; Dynamo's SharedCacheHits::hits_beyond).
  std::vector<uint32_t> shared_beyond;
  bool shared_on = false;
  uint32_t shared_credit_blocks(uint32_t s) const { return shared_on ? shared_beyond[ov[s]] : 0; }
  std::vector<uint32_t> cand;
  // cand was built by the placement under way and nothing it read has changed since: with no
  // busy threshold, eligibility is usability, which charging the chosen worker leaves alone, so
  // the scores reuse it instead of a second pass over every worker (issue 54).
  bool cand_fresh = false;
  std::vector<double> cost;
  // cost[i] is slot cand[i]'s cost (pick_kv), from the state a placement's measure sees for
  // every worker but the chosen one: the measure takes these instead of scoring every worker
  // again (issue 54). eligible_set() and each placement's start clear it.
  bool cost_fresh = false;
  // The slots of the present, healthy, not draining workers, ascending: with no busy threshold and
  // nothing to avoid, the eligible set, copied instead of testing every worker per placement.
  // Rebuilt when stale (a worker added, removed, drained or its health changed).
  std::vector<uint32_t> usable_slots;
  bool usable_stale = true;
};

namespace {
// Over a busy threshold (SPEC 3.2, 3.4): decode blocks beyond a share of the KV pool, prefill
// tokens in flight beyond a count or a share of the step budget, or requests in flight at a count.
bool worker_busy(const RouterConfig& cfg, const Router::Impl::Worker& w) {
  if (cfg.active_decode_blocks_threshold &&
      static_cast<double>(w.active_blocks) > *cfg.active_decode_blocks_threshold * static_cast<double>(w.kv_blocks))
    return true;
  if (cfg.active_prefill_tokens_threshold && w.prefill_tokens > *cfg.active_prefill_tokens_threshold) return true;
  if (cfg.active_prefill_tokens_threshold_frac &&
      static_cast<double>(w.prefill_tokens) >
          *cfg.active_prefill_tokens_threshold_frac * static_cast<double>(cfg.max_num_batched_tokens))
    return true;
  if (cfg.active_requests_threshold && w.active_requests >= *cfg.active_requests_threshold) return true;
  return false;
}

// Whether any busy threshold is set: else no worker is ever busy (worker_busy is false).
bool busy_thresholds_set(const RouterConfig& cfg) {
  return cfg.active_decode_blocks_threshold || cfg.active_prefill_tokens_threshold ||
         cfg.active_prefill_tokens_threshold_frac || cfg.active_requests_threshold;
}

}  // namespace

Router::Router(RouterConfig config, const Clock& clock) : cfg_(config), clock_(clock) {
  if (auto e = cfg_.validate()) throw Fatal(e->exit_code, e->message);
  impl_ = std::make_unique<Impl>(cfg_);
}

Router::~Router() = default;

std::optional<Error> Router::add_worker(const WorkerSpec& spec) {
  if (spec.block_size != 0 && spec.block_size != cfg_.block_size)
    return Error{"worker " + std::to_string(spec.id) + " uses KV block size " + std::to_string(spec.block_size) +
                     " but the router uses --kv-cache-block-size " + std::to_string(cfg_.block_size) +
                     ": prefix overlaps would always be 0; set --kv-cache-block-size " +
                     std::to_string(spec.block_size),
                 kExitUsage};
  std::lock_guard lk(impl_->mu);
  auto& I = *impl_;
  auto it = I.by_id.find(spec.id);
  if (it != I.by_id.end()) {
    auto& w = I.workers[it->second];
    w.spec = spec;
    w.present = true;
    w.healthy = true;
    w.draining = false;
    w.kv_blocks = spec.kv_blocks ? spec.kv_blocks : cfg_.worker_kv_blocks;
    I.usable_stale = true;
    return std::nullopt;
  }
  Impl::Worker w;
  w.spec = spec;
  w.kv_blocks = spec.kv_blocks ? spec.kv_blocks : cfg_.worker_kv_blocks;
  I.by_id.emplace(spec.id, static_cast<uint32_t>(I.workers.size()));
  I.workers.push_back(w);
  I.usable_stale = true;
  I.for_tiers([&](kv::PrefixIndex& x) { x.set_worker_count(static_cast<uint32_t>(I.workers.size())); });
  I.ov.resize(I.workers.size());
  I.ov_host.resize(I.workers.size());
  I.ov_disk.resize(I.workers.size());
  I.ov_upto.resize(I.workers.size());
  I.stats.decisions_per_worker.emplace_back(spec.id, 0);
  return std::nullopt;
}

size_t Router::remove_worker(uint64_t id) {
  std::lock_guard lk(impl_->mu);
  auto& I = *impl_;
  auto it = I.by_id.find(id);
  if (it == I.by_id.end()) return 0;
  uint32_t s = it->second;
  I.workers[s].present = false;
  I.usable_stale = true;
  I.for_tiers([&](kv::PrefixIndex& x) { x.clear_worker(s); });
  const double now = clock_.now_ms();
  size_t erased = 0;
  for (auto e = I.table.begin(); e != I.table.end();) {
    if (e->second.worker == s) {
      if (I.listener) I.listener->dropped(e->first, e->second.parent, id);
      if (I.dropped.size() < cfg_.max_bindings) I.dropped[e->first] = Impl::Dropped{RebindReason::kRemoved, now};
      e = I.table.erase(e);
      ++erased;
    } else {
      ++e;
    }
  }
  if (erased) I.cv.notify_all();
  return erased;
}

void Router::set_draining(uint64_t id, bool draining) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return;
  impl_->workers[it->second].draining = draining;
  impl_->usable_stale = true;
}

void Router::note_moved(const std::string& key, RebindReason reason) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto it = I.table.find(key);
  if (it != I.table.end() && I.workers[it->second.worker].present) return;
  if (I.dropped.size() < cfg_.max_bindings) I.dropped[key] = Impl::Dropped{reason, clock_.now_ms()};
}

bool Router::any_eligible(std::span<const uint64_t> avoid) const {
  std::lock_guard lk(impl_->mu);
  for (const auto& w : impl_->workers)
    if (w.present && w.healthy && !w.draining && std::find(avoid.begin(), avoid.end(), w.spec.id) == avoid.end())
      return true;
  return false;
}

std::vector<std::pair<uint64_t, uint64_t>> Router::bindings_per_worker() const {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  std::vector<uint64_t> n(I.workers.size(), 0);
  const double now = clock_.now_ms();
  for (const auto& [k, e] : I.table)
    if (e.initializing || e.leases > 0 || e.idle_since_ms + ttl_ms(cfg_) > now) ++n[e.worker];
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t s = 0; s < I.workers.size(); ++s) out.emplace_back(I.workers[s].spec.id, n[s]);
  return out;
}

std::optional<Error> Router::set_workers(const std::vector<WorkerSpec>& specs) {
  std::vector<uint64_t> gone;
  {
    std::lock_guard lk(impl_->mu);
    for (auto& w : impl_->workers) {
      bool keep = std::any_of(specs.begin(), specs.end(), [&](const WorkerSpec& s) { return s.id == w.spec.id; });
      if (!keep && w.present) gone.push_back(w.spec.id);
    }
  }
  for (uint64_t id : gone) remove_worker(id);
  for (auto& s : specs)
    if (auto e = add_worker(s)) return e;
  return std::nullopt;
}

void Router::set_healthy(uint64_t id, bool healthy) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return;
  impl_->workers[it->second].healthy = healthy;
  impl_->usable_stale = true;
}

void Router::set_worker_kv_blocks(uint64_t id, uint64_t blocks) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->by_id.find(id);
  if (it == impl_->by_id.end()) return;
  impl_->workers[it->second].kv_blocks = blocks ? blocks : cfg_.worker_kv_blocks;
  // The index's budget is the workers' KV size unless --router-max-tree-size set one; event-fed,
  // it keeps no budget at all (SPEC 3.3).
  if (!cfg_.kv_events && cfg_.max_tree_size == 0) impl_->index.set_worker_budget(it->second, blocks);
}

std::optional<Error> BusyThresholds::validate() const {
  RouterConfig c;
  c.active_decode_blocks_threshold = active_decode_blocks;
  c.active_prefill_tokens_threshold = active_prefill_tokens;
  c.active_prefill_tokens_threshold_frac = active_prefill_tokens_frac;
  c.active_requests_threshold = active_requests;
  return c.validate();
}

bool Availability::can_take(uint64_t id) const {
  for (const Worker& w : workers)
    if (w.id == id) return !w.usable || !w.busy;
  return true;  // unknown: placement answers it
}

bool Availability::any() const {
  bool usable = false;
  for (const Worker& w : workers) {
    if (w.usable && !w.busy) return true;
    usable = usable || w.usable;
  }
  return !usable;
}

bool Availability::any_usable() const {
  return std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return w.usable; });
}

BusyThresholds Router::busy_thresholds() const {
  std::lock_guard lk(impl_->mu);
  return {cfg_.active_decode_blocks_threshold, cfg_.active_prefill_tokens_threshold,
          cfg_.active_prefill_tokens_threshold_frac, cfg_.active_requests_threshold};
}

std::optional<Error> Router::set_busy_thresholds(const BusyThresholds& t) {
  if (auto e = t.validate()) return e;
  std::lock_guard lk(impl_->mu);
  cfg_.active_decode_blocks_threshold = t.active_decode_blocks;
  cfg_.active_prefill_tokens_threshold = t.active_prefill_tokens;
  cfg_.active_prefill_tokens_threshold_frac = t.active_prefill_tokens_frac;
  cfg_.active_requests_threshold = t.active_requests;
  return std::nullopt;
}

Availability Router::availability() const {
  std::lock_guard lk(impl_->mu);
  Availability a;
  a.workers.reserve(impl_->workers.size());
  for (const auto& w : impl_->workers) a.workers.push_back({w.spec.id, w.present && w.healthy, worker_busy(cfg_, w)});
  return a;
}

uint64_t Router::predicted_cached_tokens(std::span<const uint64_t> sequence_hashes, uint64_t tokens) const {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  if (sequence_hashes.empty() || I.workers.empty()) return 0;
  std::vector<uint32_t> ov(I.workers.size(), 0);
  I.index.overlaps(sequence_hashes, clock_.now_ms(), ov);
  uint64_t best = 0;
  for (size_t s = 0; s < ov.size(); ++s)
    if (I.workers[s].present && I.workers[s].healthy) best = std::max<uint64_t>(best, ov[s]);
  return std::min(best * cfg_.block_size, tokens);
}

void Router::apply_kv_events(uint64_t worker_id, std::span<const KvEvent> events) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto it = I.by_id.find(worker_id);
  if (it == I.by_id.end()) return;
  const auto slot = static_cast<uint32_t>(it->second);
  const double now = clock_.now_ms();
  // The pending run of events on one tier, applied in one call when the tier changes or the batch ends.
  std::vector<kv::IndexEvent>& run = I.event_run;
  kv::Tier run_tier = kv::Tier::kDevice;
  auto flush = [&] {
    if (!run.empty()) I.tier(run_tier).apply_events(run, now);
    run.clear();
  };
  for (const KvEvent& e : events) {
    if (e.tier == kv::Tier::kShared) {
      // One pool for every worker: any worker's store or removal changes it; a worker's own clear
      // (its engine restarted) does not empty what the others share. Without a configured pool
      // the events have no reader.
      if (cfg_.shared_cache_type == SharedCacheType::kNone) continue;
      flush();
      if (e.kind == KvEvent::Kind::kStored) I.shared.apply_stored(0, e.block_hashes, e.parent_hash, now);
      else if (e.kind == KvEvent::Kind::kRemoved) I.shared.apply_removed(0, e.block_hashes);
      continue;
    }
    if (e.tier != run_tier) flush();
    run_tier = e.tier;
    run.push_back(kv::IndexEvent{e.kind, slot, e.block_hashes});
  }
  flush();
}

// Sweeps expired bindings and index blocks. Caller holds the lock.
// `periodic`: the lazy sweep of place(), which skips the binding scan while nothing can have
// expired (Impl::no_expiry_before_ms); the others scan always.
static void sweep_locked(Router::Impl& I, const RouterConfig& cfg, double now, bool periodic = false) {
  if (cfg.affinity_enabled() && (!periodic || now >= I.no_expiry_before_ms)) {
    double ttl = ttl_ms(cfg);
    double earliest = now + ttl;
    for (auto e = I.table.begin(); e != I.table.end();) {
      const auto& x = e->second;
      if (!x.initializing && x.leases == 0) {
        if (x.idle_since_ms + ttl <= now) {
          e = I.table.erase(e);
          continue;
        }
        earliest = std::min(earliest, x.idle_since_ms + ttl);
      }
      ++e;
    }
    I.no_expiry_before_ms = earliest;
    for (auto d = I.dropped.begin(); d != I.dropped.end();)
      d = d->second.at_ms + ttl <= now ? I.dropped.erase(d) : std::next(d);
  }
  if (!cfg.kv_events) {
    I.index.expire(now);
    if (cfg.host_ttl_secs > 0) I.host.expire(now);
    if (cfg.disk_ttl_secs > 0) I.disk.expire(now);
  }
  double period = 30'000;
  if (cfg.affinity_enabled()) period = std::min(period, ttl_ms(cfg));
  I.next_sweep_ms = now + period;
}

void Router::wake_waiters() {
  { std::lock_guard lk(impl_->mu); }
  impl_->cv.notify_all();
}

void Router::sweep() {
  std::lock_guard lk(impl_->mu);
  sweep_locked(*impl_, cfg_, clock_.now_ms());
}

namespace {

// What one placement decides with: the request, its blocks, the worker a retry avoids. The
// policies read the router's state (load, overlaps in I.ov) and write its scratch (I.cand,
// I.cost) and draw from its seeded Rng; the caller holds the lock.
struct Pick {
  Router::Impl& I;
  const RouterConfig& cfg;
  const RouteRequest& req;
  uint64_t new_blocks;            // blocks of the request's prompt at the router's block size
  std::optional<uint32_t> avoid;  // slot of the worker a retry must not get again

  uint32_t n() const { return static_cast<uint32_t>(I.workers.size()); }
  bool avoided(uint32_t s) const {
    if (avoid && *avoid == s) return true;
    for (uint64_t id : req.avoid_workers)
      if (I.workers[s].spec.id == id) return true;
    return false;
  }
  bool usable(uint32_t s) const {
    const auto& w = I.workers[s];
    return w.present && w.healthy && !w.draining && !avoided(s);
  }
  // Why a bound worker that is not kept lost its session (SPEC 2.3): gone, draining, unhealthy
  // (down or its circuit open), its dispatch just failed (the retry avoids it), else busy (soft
  // affinity only).
  RebindReason why_not(uint32_t s) const {
    const auto& w = I.workers[s];
    if (!w.present) return RebindReason::kRemoved;
    if (w.draining) return RebindReason::kDrained;
    if (!w.healthy) return RebindReason::kUnhealthy;
    if (avoided(s)) return RebindReason::kDispatchFailed;
    return RebindReason::kBusy;
  }
  // Over a busy threshold (SPEC 3.2, 3.4).
  bool busy(uint32_t s) const { return worker_busy(cfg, I.workers[s]); }
  // Eligible candidates into I.cand: usable and not busy, unless all usable ones are busy and the
  // request does not refuse busy workers (SPEC 3.2, 3.4).
  void eligible_set() const {
    I.cand_fresh = true;
    I.cost_fresh = false;
    const bool thresholds = busy_thresholds_set(cfg);
    if (!thresholds && !avoid && req.avoid_workers.empty()) {
      if (I.usable_stale) {
        I.usable_slots.clear();
        for (uint32_t s = 0; s < n(); ++s)
          if (usable(s)) I.usable_slots.push_back(s);
        I.usable_stale = false;
      }
      I.cand.assign(I.usable_slots.begin(), I.usable_slots.end());
      return;
    }
    I.cand.clear();
    for (uint32_t s = 0; s < n(); ++s)
      if (usable(s) && !(thresholds && busy(s))) I.cand.push_back(s);
    if (I.cand.empty() && !req.refuse_busy)
      for (uint32_t s = 0; s < n(); ++s)
        if (usable(s)) I.cand.push_back(s);
  }
  // Why select() found no slot: every usable worker busy (a refuse_busy request), or none usable.
  Error no_slot() const {
    for (uint32_t s = 0; s < n(); ++s)
      if (usable(s)) return Error{"every eligible worker is over a busy threshold", kPlaceAllBusy};
    return Error{"no healthy worker available", 503};
  }
  // A refuse_busy request pinned to slot s (an explicit worker, a hard binding) that is busy.
  std::optional<Error> pinned_busy(uint32_t s) const {
    if (!req.refuse_busy || !usable(s) || !busy(s)) return std::nullopt;
    if (req.busy_worker) *req.busy_worker = I.workers[s].spec.id;
    return Error{"worker " + std::to_string(I.workers[s].spec.id) + " (pinned) is over a busy threshold",
                 kPlacePinnedBusy};
  }
  // SPEC 3.2: the prefill the worker would have with this request: the uncached prompt tokens of
  // its requests still before their first token (queued in the engine or prefilling) plus this
  // prompt, less the overlap credit, device blocks at 1 and lower-tier blocks at their hit weights
  // (Dynamo's selector: prefill_tokens[w] is the worker's active prefill plus the request's new
  // tokens). A worker with a long prefill ahead is thus loaded even with few requests in flight.
  // `own`: tokens already charged to s by this request (scores built after its placement).
  double prefill_blocks(uint32_t s, uint64_t own = 0) const {
    const double B = cfg.block_size;
    double credit = I.ov[s];
    if (I.lower_on) credit += cfg.host_cache_hit_weight * I.ov_host[s] + cfg.disk_cache_hit_weight * I.ov_disk[s];
    if (I.shared_on) credit += cfg.shared_multiplier() * I.shared_credit_blocks(s);
    const double tokens = static_cast<double>(I.workers[s].prefill_tokens - own + req.tokens);
    return std::max(0.0, (tokens - credit * B) / B);
  }
  // SPEC 3.2's cost: overlap_score_weight * prefill blocks + decode blocks.
  double cost_of(uint32_t s) const {
    double decode = static_cast<double>(I.workers[s].active_blocks + new_blocks);
    return cfg.overlap_score_weight * prefill_blocks(s) + decode;
  }
};

// The per-mode policies: each picks one slot of the non-empty eligible set I.cand.

// Round robin over all slots from the cursor, taking the first eligible one (direct mode's
// fallback too, though direct requests name their worker).
uint32_t pick_round_robin(const Pick& p) {
  auto& I = p.I;
  const uint32_t n = p.n();
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t s = static_cast<uint32_t>((I.rr + i) % n);
    if (std::find(I.cand.begin(), I.cand.end(), s) != I.cand.end()) {
      I.rr = s + 1;
      return s;
    }
  }
  return I.cand[0];
}

uint32_t pick_random(const Pick& p) { return p.I.cand[p.I.rng.below(p.I.cand.size())]; }

// Two distinct seeded draws; the one with fewer active requests (the first on a tie).
uint32_t pick_power_of_two(const Pick& p) {
  auto& I = p.I;
  const size_t k = I.cand.size();
  if (k == 1) return I.cand[0];
  size_t a = I.rng.below(k), b = I.rng.below(k - 1);
  if (b >= a) ++b;
  uint32_t sa = I.cand[a], sb = I.cand[b];
  return I.workers[sb].active_requests < I.workers[sa].active_requests ? sb : sa;
}

// Fewest active requests, then fewest active blocks; remaining ties -> one seeded draw.
uint32_t pick_least_loaded(const Pick& p) {
  auto& I = p.I;
  uint64_t best = UINT64_MAX, best_blocks = UINT64_MAX;
  std::vector<uint32_t> ties;
  for (uint32_t s : I.cand) {
    auto& w = I.workers[s];
    if (w.active_requests < best || (w.active_requests == best && w.active_blocks < best_blocks)) {
      best = w.active_requests;
      best_blocks = w.active_blocks;
      ties.assign(1, s);
    } else if (w.active_requests == best && w.active_blocks == best_blocks) {
      ties.push_back(s);
    }
  }
  return ties.size() == 1 ? ties[0] : ties[I.rng.below(ties.size())];
}

// KV-aware (SPEC 3.2): lowest cost, or with a temperature a softmax draw over normalized costs.
uint32_t pick_kv(const Pick& p) {
  auto& I = p.I;
  const size_t k = I.cand.size();
  const double temperature = p.cfg.temperature;
  I.cost.resize(k);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < k; ++i) {
    I.cost[i] = p.cost_of(I.cand[i]);
    lo = std::min(lo, I.cost[i]);
    hi = std::max(hi, I.cost[i]);
  }
  I.cost_fresh = true;
  if (temperature > 0 && k > 1) {
    if (hi == lo) return I.cand[I.rng.below(k)];
    double total = 0;
    for (size_t i = 0; i < k; ++i) total += std::exp(-(I.cost[i] - lo) / ((hi - lo) * temperature));
    double u = I.rng.uniform() * total, acc = 0;
    for (size_t i = 0; i < k; ++i) {
      acc += std::exp(-(I.cost[i] - lo) / ((hi - lo) * temperature));
      if (u < acc) return I.cand[i];
    }
    return I.cand[k - 1];
  }
  // Lowest cost; ties -> fewest cached blocks; remaining ties -> one seeded draw.
  double eps = 1e-9 * std::max(1.0, std::fabs(lo));
  uint64_t least_cached = UINT64_MAX;
  uint32_t first = kNoSlot;
  size_t nties = 0;
  for (size_t i = 0; i < k; ++i) {
    if (I.cost[i] - lo > eps) continue;
    uint64_t c = I.index.blocks(I.cand[i]);
    if (c < least_cached) {
      least_cached = c;
      first = I.cand[i];
      nties = 1;
    } else if (c == least_cached) {
      ++nties;
    }
  }
  if (nties == 1) return first;
  size_t pick = I.rng.below(nties);
  for (size_t i = 0; i < k; ++i) {
    if (I.cost[i] - lo > eps || I.index.blocks(I.cand[i]) != least_cached) continue;
    if (pick-- == 0) return I.cand[i];
  }
  return first;
}

// The policy table, indexed by Mode. A new mode is its enumerator in Mode, its name in kModes
// (config.h) and its row here; the asserts below stop the build when a row is missing or out of
// place, so select() never indexes past the table.
using Policy = uint32_t (*)(const Pick&);
struct PolicyRow {
  Mode mode;
  Policy pick;
};
constexpr PolicyRow kPolicies[] = {
    {Mode::kRoundRobin, pick_round_robin},   {Mode::kRandom, pick_random}, {Mode::kPowerOfTwo, pick_power_of_two},
    {Mode::kLeastLoaded, pick_least_loaded}, {Mode::kKv, pick_kv},         {Mode::kDirect, pick_round_robin},
};
static_assert(std::size(kPolicies) == std::size(kModes), "every mode in kModes needs its row in kPolicies");
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kPolicies); ++i)
        if (static_cast<size_t>(kPolicies[i].mode) != i || static_cast<size_t>(kModes[i].value) != i) return false;
      return true;
    }(),
    "kPolicies and kModes list the modes in enum order");

// The mode's policy over the eligible set; kNoSlot when no worker is usable.
uint32_t select(const Pick& p) {
  p.eligible_set();
  if (p.I.cand.empty()) return kNoSlot;
  return kPolicies[static_cast<size_t>(p.cfg.mode)].pick(p);
}

// The affinity step's result: the worker, how the session's binding was met, the placement's
// role in the table (owner of a new binding, holder of a lease, soft rebinder) and its key.
struct Bound {
  uint32_t chosen = kNoSlot;
  BindingOutcome outcome = BindingOutcome::kNone;
  RebindReason reason = RebindReason::kNone;
  Router::Impl::Role role = Router::Impl::Role::kNone;
  std::string key;  // "" when the placement holds no binding (waiting gave up)
  uint64_t gen = 0, seen_version = 0;
};

}  // namespace

// Makes b.key's binding to b.chosen, initializing (SPEC 2: later turns wait for its first
// request) and leased by this request, which owns it. `parent` names a parent group's parent
// ("" for a session), listed by GET /v1/bindings. Caller holds the lock.
static void own_new_binding(Router::Impl& I, Bound& b, const std::string& parent) {
  Router::Impl::Entry e;
  e.worker = b.chosen;
  e.initializing = true;
  e.leases = 1;
  e.gen = I.next_gen++;
  e.parent = parent;
  if (!I.dropped.empty()) I.dropped.erase(b.key);  // bound again: its old move is told
  b.role = Router::Impl::Role::kOwner;
  b.gen = e.gen;
  I.table.emplace(b.key, std::move(e));
}

// The affinity step (SPEC 2): the session's (or its parent group's) binding is met, waited for
// while its first request initializes it, kept, rebound (soft) or invalidated (hard), or made.
// Caller holds `lk`; waiting releases it, so `now` is refreshed. Errors: 503 when no worker is
// healthy or the table is full.
static Expected<Bound> bind_session(const Pick& p, std::unique_lock<std::mutex>& lk, const Clock& clock, double& now) {
  auto& I = p.I;
  const RouterConfig& cfg = p.cfg;
  const RouteRequest& req = p.req;
  using Role = Router::Impl::Role;
  Bound b;
  b.key = req.parent_session_id.empty() ? req.session_id : session::parent_group_key(req.parent_session_id);
  const std::string& key = b.key;
  BindingOutcome absent_outcome = BindingOutcome::kNew;
  // The wait's deadline, read from the clock only when a wait happens (a clock read on every
  // placement was 0.8 % of decide's time).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool gave_up = false;
  while (true) {
    auto it = I.table.find(key);
    if (it != I.table.end() && it->second.initializing) {
      if (req.wait_for_initializing) {
        if (req.fail_instead_of_waiting) return Error{"the session's binding is initializing", kPlaceWouldWait};
        ++I.stats.waits;
        uint64_t g = it->second.gen;
        auto given_up = [&] { return req.cancelled && req.cancelled->load(); };
        if (!deadline)
          deadline =
              std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                     std::chrono::duration<double, std::milli>(cfg.init_wait_ms));
        bool changed = I.cv.wait_until(lk, *deadline, [&] {
          auto j = I.table.find(key);
          return given_up() || j == I.table.end() || j->second.gen != g || !j->second.initializing;
        });
        if (given_up())
          return Error{"the request was cancelled while its session's binding initialized", kPlaceCancelled};
        if (!changed) {
          gave_up = true;
          break;
        }
        now = clock.now_ms();
        I.cand_fresh = I.cost_fresh = false;  // the workers may have changed while the lock was released
        continue;
      }
      // Single-threaded caller: follow the tentative worker now.
      b.chosen = it->second.worker;
      ++it->second.leases;
      b.role = Role::kHolder;
      b.gen = it->second.gen;
      b.outcome = BindingOutcome::kHit;
      break;
    }
    if (it != I.table.end() && it->second.leases == 0 && it->second.idle_since_ms + ttl_ms(cfg) <= now) {
      I.table.erase(it);
      it = I.table.end();
      absent_outcome = BindingOutcome::kExpired;
    }
    if (it != I.table.end()) {
      Router::Impl::Entry& e = it->second;
      uint32_t bw = e.worker;
      if (cfg.affinity_mode == AffinityMode::kHard)
        if (auto busy = p.pinned_busy(bw)) return *busy;
      bool keep = cfg.affinity_mode == AffinityMode::kHard ? p.usable(bw) : (p.usable(bw) && [&] {
        p.eligible_set();
        return std::find(I.cand.begin(), I.cand.end(), bw) != I.cand.end();
      }());
      b.reason = keep ? RebindReason::kNone : p.why_not(bw);
      // Soft: the worker the policy would move the session to (kNoSlot: none usable).
      uint32_t alt = kNoSlot;
      if (!keep && cfg.affinity_mode == AffinityMode::kSoft) {
        alt = select(p);
        if (alt == kNoSlot) return p.no_slot();
        // A busy bound worker under kv routing is left only for a cheaper one (SPEC 2.3): its
        // cached blocks, lower tiers at their credit, are weighed against the load difference in
        // the one cost model, instead of "busy => move", which lands sessions where nothing of
        // theirs is cached on any tier. Kept, the request waits for it as a pinned one would.
        if (cfg.mode == Mode::kKv && b.reason == RebindReason::kBusy && p.cost_of(bw) <= p.cost_of(alt)) {
          if (auto busy = p.pinned_busy(bw)) return *busy;
          keep = true;
          b.reason = RebindReason::kNone;
        }
      }
      if (keep) {
        b.chosen = bw;
        ++e.leases;
        b.role = Role::kHolder;
        b.gen = e.gen;
        b.outcome = BindingOutcome::kHit;
        break;
      }
      if (cfg.affinity_mode == AffinityMode::kSoft) {
        b.chosen = alt;
        ++e.leases;
        b.role = Role::kRebind;
        b.gen = e.gen;
        b.seen_version = e.version;
        b.outcome = BindingOutcome::kRebound;
        break;
      }
      // Hard: the bound worker is gone or unhealthy; invalidate and place once more normally.
      b.chosen = select(p);
      if (b.chosen == kNoSlot) {
        Error e = p.no_slot();
        if (e.exit_code != kPlaceAllBusy) I.table.erase(it);  // a refusal changes nothing
        return e;
      }
      I.table.erase(it);
      own_new_binding(I, b, req.parent_session_id);  // a rebound parent group stays a group
      b.outcome = BindingOutcome::kRebound;
      break;
    }
    // No live binding.
    if (I.table.size() >= cfg.max_bindings) {
      sweep_locked(I, cfg, now);
      if (I.table.size() >= cfg.max_bindings) {
        ++I.stats.table_full;
        return Error{"session binding table is full (" + std::to_string(cfg.max_bindings) + " live bindings)", 503};
      }
    }
    b.chosen = select(p);
    if (b.chosen == kNoSlot) return p.no_slot();
    b.outcome = (req.retry && req.retry->was_bound) ? BindingOutcome::kRebound : absent_outcome;
    if (b.outcome == BindingOutcome::kRebound) b.reason = RebindReason::kDispatchFailed;
    if (auto d = I.dropped.find(key); d != I.dropped.end()) {
      // Dropped with its removed worker: a forced move, never a new session.
      b.outcome = BindingOutcome::kRebound;
      b.reason = d->second.reason;
    }
    own_new_binding(I, b, req.parent_session_id);
    break;
  }
  if (gave_up) {
    b.key.clear();
    b.chosen = select(p);
  }
  return b;
}

namespace {
// The tier-exclusive host and disk overlaps of a request into I.ov_host / I.ov_disk (SPEC 3.3):
// host continues where each worker's device run stopped, disk where its host run stopped. Only
// when a lower tier can hold blocks (event-fed, or predicted) and is credited or explained, so
// GPU-only routing does no extra work. Caller holds the lock; I.ov is filled.
void lower_tier_overlaps(Router::Impl& I, const RouterConfig& cfg, const RouteRequest& req, double now) {
  if (!I.tiers_tracked) return;  // lower_on and shared_on stay false
  // The shared pool's hits beyond each worker's GPU run (Dynamo's shared-cache credit): the pool
  // may hold any positions, not only a leading run.
  I.shared_on =
      cfg.shared_cache_type != SharedCacheType::kNone && !req.sequence_hashes.empty() && I.shared.distinct_blocks() > 0;
  if (I.shared_on) {
    const size_t n = req.sequence_hashes.size();
    I.shared_beyond.assign(n + 1, 0);
    for (size_t i = n; i-- > 0;)
      I.shared_beyond[i] = I.shared_beyond[i + 1] + (I.shared.holds(0, req.sequence_hashes[i], now) ? 1 : 0);
  }
  const bool tracked = cfg.kv_events || cfg.host_ttl_secs > 0 || cfg.disk_ttl_secs > 0;
  const bool credited = cfg.host_cache_hit_weight > 0 || cfg.disk_cache_hit_weight > 0;
  I.lower_on = tracked && (credited || req.explain) && !req.sequence_hashes.empty() &&
               (I.host.distinct_blocks() > 0 || I.disk.distinct_blocks() > 0);
  if (!I.lower_on) return;
  I.host.continue_overlaps(req.sequence_hashes, now, I.ov, I.ov_host);
  for (size_t s = 0; s < I.ov.size(); ++s) I.ov_upto[s] = I.ov[s] + I.ov_host[s];
  I.disk.continue_overlaps(req.sequence_hashes, now, I.ov_upto, I.ov_disk);
}
}  // namespace

namespace {
// Slot s's score at the moment of decision: before this placement's own charge of `own_prefill`
// uncached tokens and the request's blocks on the chosen slot (SPEC 3.2; --explain, issue 55).
[[gnu::always_inline]] inline WorkerScore score_of(const Pick& pk, uint32_t s, bool chosen, uint64_t own_prefill,
                                                   bool eligible) {
  const Router::Impl& I = pk.I;
  WorkerScore sc;
  sc.worker = I.workers[s].spec.id;
  sc.overlap_blocks = I.ov[s];
  sc.host_blocks = I.lower_on ? I.ov_host[s] : 0;
  sc.disk_blocks = I.lower_on ? I.ov_disk[s] : 0;
  sc.shared_blocks = I.shared_credit_blocks(s);
  sc.prefill_blocks = pk.prefill_blocks(s, chosen ? own_prefill : 0);
  const uint64_t active = I.workers[s].active_blocks - (chosen ? pk.new_blocks : 0);
  sc.decode_blocks = static_cast<double>(active + pk.new_blocks);
  sc.cost = pk.cfg.overlap_score_weight * sc.prefill_blocks + sc.decode_blocks;
  sc.eligible = eligible || chosen;
  return sc;
}

// The placement on slot `chosen` measured against every present worker (assess_decision over
// their scores, streamed: a thousand workers' scores are never stored), the scores appended to
// `explain` in worker order when given. I.cand holds the eligible slots, ascending.
DecisionQuality measure_placement(const Pick& pk, uint32_t chosen, uint64_t own_prefill, Steer steer,
                                  std::vector<WorkerScore>* explain) {
  const Router::Impl& I = pk.I;
  std::optional<DecisionAssessor> acc;  // none when the chosen worker is not present: nothing to compare with
  if (I.workers[chosen].present)
    acc.emplace(score_of(pk, chosen, true, own_prefill, true), steer, pk.cfg.block_size, pk.req.tokens);
  if (acc && !explain && I.cost_fresh) {
    // The policy's costs of the eligible workers are their scores' (the assessor reads no other
    // field, and skips ineligible workers): one walk of I.cand instead of every worker scored.
    for (size_t i = 0; i < I.cand.size(); ++i) {
      if (I.cand[i] == chosen) continue;
      WorkerScore sc;
      sc.overlap_blocks = I.ov[I.cand[i]];
      sc.cost = I.cost[i];
      acc->add(sc);
    }
    return acc->finish();
  }
  // One walk of I.cand beside the loop tells eligibility without a search per worker.
  size_t next_cand = 0;
  for (uint32_t s = 0; s < pk.n(); ++s) {
    while (next_cand < I.cand.size() && I.cand[next_cand] < s) ++next_cand;
    if (!I.workers[s].present) continue;
    if (s == chosen) {
      if (explain) explain->push_back(acc->chosen());
      continue;
    }
    const WorkerScore sc = score_of(pk, s, false, 0, next_cand < I.cand.size() && I.cand[next_cand] == s);
    if (acc) acc->add(sc);
    if (explain) explain->push_back(sc);
  }
  return acc ? acc->finish() : DecisionQuality{};
}
}  // namespace

Expected<Placement> Router::place(const RouteRequest& req) {
  auto& I = *impl_;
  std::unique_lock lk(I.mu);
  double now = clock_.now_ms();

  const uint32_t n = static_cast<uint32_t>(I.workers.size());
  const uint64_t new_blocks = (req.tokens + cfg_.block_size - 1) / cfg_.block_size;
  I.cand_fresh = I.cost_fresh = false;
  std::optional<uint32_t> avoid;
  if (req.retry) {
    auto it = I.by_id.find(req.retry->avoid_worker);
    if (it != I.by_id.end()) avoid = it->second;
  }

  // Overlaps on every worker (also needed for a binding hit's predicted cached tokens).
  I.ov.assign(n, 0);
  if (!req.sequence_hashes.empty() && n > 0) I.index.overlaps(req.sequence_hashes, now, I.ov);
  lower_tier_overlaps(I, cfg_, req, now);
  const Pick pk{I, cfg_, req, new_blocks, avoid};

  bool any_present = std::any_of(I.workers.begin(), I.workers.end(), [](auto& w) { return w.present; });
  if (!any_present) return Error{"no workers available", 503};

  Bound b;
  if (req.worker) {
    auto it = I.by_id.find(*req.worker);
    if (it == I.by_id.end() || !I.workers[it->second].present)
      return Error{"unknown worker instance id " + std::to_string(*req.worker), 400};
    if (auto busy = pk.pinned_busy(it->second)) return *busy;
    b.chosen = it->second;
  } else if (cfg_.mode == Mode::kDirect) {
    return Error{"--router-mode direct needs an explicit worker (x-dynamo-worker-instance-id)", 400};
  } else if (cfg_.affinity_enabled() && !req.session_id.empty()) {
    auto r = bind_session(pk, lk, clock_, now);
    if (!r) return r.error();
    b = std::move(*r);
  } else {
    b.chosen = select(pk);
  }
  const uint32_t chosen = b.chosen;
  if (chosen == kNoSlot) return pk.no_slot();

  // The periodic sweep runs after this request met its own key, so a binding that expired since
  // the last sweep is reported as "expired" rather than silently "new".
  if (now >= I.next_sweep_ms) sweep_locked(I, cfg_, now, /*periodic=*/true);

  // Charge the load now so concurrent placements see it.
  auto& w = I.workers[chosen];
  uint32_t overlap = I.ov[chosen];
  uint64_t cached = std::min<uint64_t>(static_cast<uint64_t>(overlap) * cfg_.block_size, req.tokens);
  ++w.active_requests;
  w.active_blocks += new_blocks;
  w.prefill_tokens += req.tokens - cached;
  ++w.decisions;
  ++I.stats.decisions;
  ++I.stats.decisions_per_worker[chosen].second;
  switch (b.outcome) {
    case BindingOutcome::kNone: ++I.stats.binding_none; break;
    case BindingOutcome::kNew: ++I.stats.binding_new; break;
    case BindingOutcome::kHit: ++I.stats.binding_hit; break;
    case BindingOutcome::kRebound: ++I.stats.binding_rebound; break;
    case BindingOutcome::kExpired: ++I.stats.binding_expired; break;
  }

  uint32_t slot;
  if (!I.free_slots.empty()) {
    slot = I.free_slots.back();
    I.free_slots.pop_back();
  } else {
    slot = static_cast<uint32_t>(I.slots.size());
    I.slots.emplace_back();
  }
  Impl::Active& a = I.slots[slot];
  a.used = true;
  a.committed = false;
  a.prefill_done = false;
  a.role = b.role;
  a.w = chosen;
  a.blocks = new_blocks;
  a.prefill_tokens = req.tokens - cached;
  a.key = b.key;
  a.gen = b.gen;
  a.seen_version = b.seen_version;
  if (!cfg_.kv_events) a.seq.assign(req.sequence_hashes.begin(), req.sequence_hashes.end());
  else a.seq.clear();

  Placement p;
  p.router_ = this;
  p.slot_ = slot;
  p.worker_ = w.spec.id;
  p.binding_ = b.outcome;
  p.rebind_reason_ = b.reason;
  p.overlap_ = overlap;
  p.cached_tokens_ = cached;
  p.request_blocks_ = static_cast<uint32_t>(req.sequence_hashes.size());
  p.key_ = std::move(b.key);
  // Every placement is measured (issue 55's counters) against every present worker's score.
  if (!I.cand_fresh || busy_thresholds_set(cfg_)) pk.eligible_set();
  Steer steer = Steer::kPolicy;
  if (req.worker) steer = req.worker_from_admission ? Steer::kAdmission : Steer::kPinned;
  else if (b.outcome == BindingOutcome::kHit) steer = Steer::kAffinity;
  p.quality_ = measure_placement(pk, chosen, a.prefill_tokens, steer, req.explain ? &p.explain_ : nullptr);
  I.stats.quality.add(p.quality_);
  return p;
}

void Router::commit(Placement& p) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto& a = I.slots[p.slot_];
  if (a.committed) return;
  a.committed = true;
  double now = clock_.now_ms();
  if (!cfg_.kv_events && !a.seq.empty() && I.workers[a.w].present) {
    I.index.insert(a.w, a.seq, now);
    // Predicted lower tiers hold what was routed for their longer TTLs (a write-through hierarchy,
    // as KVBM's: each tier at least as large as the one above).
    if (cfg_.host_ttl_secs > 0) I.host.insert(a.w, a.seq, now);
    if (cfg_.disk_ttl_secs > 0) I.disk.insert(a.w, a.seq, now);
  }
  a.seq.clear();  // keeps its buffer for the slot's next placement
  if (a.key.empty()) return;
  auto it = I.table.find(a.key);
  if (it == I.table.end() || it->second.gen != a.gen) return;
  auto& e = it->second;
  if (a.role == Impl::Role::kOwner && e.initializing) {
    e.initializing = false;
    ++e.version;
    I.cv.notify_all();
  } else if (a.role == Impl::Role::kRebind && e.version == a.seen_version) {
    // Only the newest rebind wins: an older concurrent request must not overwrite it (SPEC 2.3).
    e.worker = a.w;
    ++e.version;
  }
}

void Router::first_token(Placement& p) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto& a = I.slots[p.slot_];
  if (a.prefill_done) return;
  a.prefill_done = true;
  I.workers[a.w].prefill_tokens -= a.prefill_tokens;
}

namespace {
// Releases a placement's load on its worker. Caller holds the lock.
void release_load(Router::Impl& I, Router::Impl::Active& a) {
  auto& w = I.workers[a.w];
  --w.active_requests;
  w.active_blocks -= a.blocks;
  if (!a.prefill_done) w.prefill_tokens -= a.prefill_tokens;
}
}  // namespace

RetryAdvice Router::fail(Placement& p, bool cancelled) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto& a = I.slots[p.slot_];
  RetryAdvice adv;
  adv.avoid_worker = I.workers[a.w].spec.id;
  if (!a.key.empty()) {
    auto it = I.table.find(a.key);
    if (it != I.table.end() && it->second.gen == a.gen) {
      auto& e = it->second;
      if (a.role == Impl::Role::kOwner && e.initializing) {
        // First dispatch failed: drop the entry; one waiter places itself (SPEC 2.2.2).
        if (I.listener) I.listener->dropped(a.key, e.parent, I.workers[e.worker].spec.id);
        I.table.erase(it);
        I.cv.notify_all();
        adv.was_bound = p.binding_ == BindingOutcome::kRebound;
        adv.retry = !cancelled;
      } else {
        if (e.leases > 0) --e.leases;
        bool hard_invalid = cfg_.affinity_mode == AffinityMode::kHard && !cancelled && e.worker == a.w;
        if (hard_invalid) {
          if (I.listener) I.listener->dropped(a.key, e.parent, I.workers[e.worker].spec.id);
          I.table.erase(it);
          I.cv.notify_all();
          adv.retry = true;
          adv.was_bound = true;
        } else {
          if (e.leases == 0) I.idle(e, clock_.now_ms(), ttl_ms(cfg_));
          if (I.listener) I.listener->lease_ended(a.key, e.parent, I.workers[e.worker].spec.id);
        }
      }
    }
  }
  release_load(I, a);
  a.reset();
  I.free_slots.push_back(p.slot_);
  p.router_ = nullptr;
  return adv;
}

void Router::finish(Placement& p) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto& a = I.slots[p.slot_];
  if (!a.key.empty()) {
    auto it = I.table.find(a.key);
    if (it != I.table.end() && it->second.gen == a.gen) {
      auto& e = it->second;
      if (e.leases > 0) --e.leases;
      if (e.leases == 0) I.idle(e, clock_.now_ms(), ttl_ms(cfg_));
      if (I.listener) I.listener->lease_ended(a.key, e.parent, I.workers[e.worker].spec.id);
    }
  }
  release_load(I, a);
  a.reset();
  I.free_slots.push_back(p.slot_);
  p.router_ = nullptr;
}

void Router::set_binding_listener(BindingListener* listener) {
  std::lock_guard lk(impl_->mu);
  impl_->listener = listener;
}

bool Router::adopt_binding(const std::string& key, const std::string& parent, uint64_t worker) {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  auto w = I.by_id.find(worker);
  if (w == I.by_id.end() || key.empty()) return false;
  double now = clock_.now_ms();
  if (!I.dropped.empty()) I.dropped.erase(key);
  auto it = I.table.find(key);
  if (it == I.table.end()) {
    if (I.table.size() >= cfg_.max_bindings) return false;
    Impl::Entry e;
    e.worker = w->second;
    e.version = 1;
    e.gen = I.next_gen++;
    I.idle(e, now, ttl_ms(cfg_));
    e.parent = parent;
    I.table.emplace(key, std::move(e));
    return true;
  }
  auto& e = it->second;
  if (e.initializing) return e.worker == w->second;
  if (e.worker != w->second) {
    e.worker = w->second;
    ++e.version;
  }
  // The store holds it live (its TTL was just restarted), so the local idle clock restarts too.
  if (e.leases == 0) I.idle(e, now, ttl_ms(cfg_));
  return true;
}

std::vector<BindingInfo> Router::bindings() const {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  std::vector<BindingInfo> out;
  out.reserve(I.table.size());
  double now = clock_.now_ms();
  for (auto& [k, e] : I.table) {
    if (!e.initializing && e.leases == 0 && e.idle_since_ms + ttl_ms(cfg_) <= now) continue;  // expired
    BindingInfo b;
    if (session::is_parent_group_key(k)) b.parent_session_id = e.parent;
    else b.key = k;
    b.worker = I.workers[e.worker].spec.id;
    b.initializing = e.initializing;
    b.active_leases = e.leases;
    b.version = e.version;
    if (!e.initializing && e.leases == 0) b.idle_deadline_ms = e.idle_since_ms + ttl_ms(cfg_);
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(), [](const BindingInfo& a, const BindingInfo& b) {
    return std::tie(a.key, a.parent_session_id) < std::tie(b.key, b.parent_session_id);
  });
  return out;
}

RouterStats Router::stats() const {
  std::lock_guard lk(impl_->mu);
  RouterStats s = impl_->stats;
  s.bindings_live = impl_->table.size();
  return s;
}

std::vector<WorkerLoad> Router::loads() const {
  auto& I = *impl_;
  std::lock_guard lk(I.mu);
  std::vector<WorkerLoad> out;
  for (uint32_t s = 0; s < I.workers.size(); ++s) {
    auto& w = I.workers[s];
    if (!w.present) continue;
    out.push_back(
        WorkerLoad{w.spec.id, w.healthy, w.active_requests, w.active_blocks, w.prefill_tokens, I.index.blocks(s)});
  }
  return out;
}

bool Router::committed(const Placement& p) const {
  std::lock_guard lk(impl_->mu);
  return impl_->slots[p.slot_].committed;
}

// ---- Placement ----

Placement::Placement(Placement&& o) noexcept { *this = std::move(o); }

Placement& Placement::operator=(Placement&& o) noexcept {
  if (this != &o) {
    release();
    router_ = o.router_;
    slot_ = o.slot_;
    worker_ = o.worker_;
    binding_ = o.binding_;
    rebind_reason_ = o.rebind_reason_;
    overlap_ = o.overlap_;
    cached_tokens_ = o.cached_tokens_;
    request_blocks_ = o.request_blocks_;
    key_ = std::move(o.key_);
    explain_ = std::move(o.explain_);
    quality_ = o.quality_;
    o.router_ = nullptr;
  }
  return *this;
}

void Placement::release() {
  if (!router_) return;
  try {
    if (router_->committed(*this)) router_->finish(*this);
    else router_->fail(*this, true);
  } catch (...) {
  }
}

Placement::~Placement() { release(); }

void Placement::commit() {
  if (router_) router_->commit(*this);
}
void Placement::first_token() {
  if (router_) router_->first_token(*this);
}
RetryAdvice Placement::fail(bool client_cancelled) {
  if (!router_) return {};
  return router_->fail(*this, client_cancelled);
}
void Placement::finish() { release(); }

}  // namespace dyn::route
