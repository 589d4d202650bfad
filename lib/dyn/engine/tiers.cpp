// KV tiers below the GPU: processor-sharing links, LRU tier stores, offload and onboard legs.
#include "dyn/engine/tiers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dyn::engine {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// A transfer due within 1 ns of a time is done by then: a real-time caller's clock has nanosecond
// ticks, and a completion a fraction of one away would otherwise never be reached.
constexpr double kSlackMs = 1e-6;
}  // namespace

std::string_view tier_medium(Tier t) {
  switch (t) {
    case Tier::kG1: return "GPU";
    case Tier::kG2: return "CPU_PINNED";
    case Tier::kG3: return "DISK";
    case Tier::kG4: return "EXTERNAL";
  }
  return "GPU";
}

// ---- Link ----

uint64_t Link::start(double now_ms, double bytes) {
  advance(now_ms, finished_);  // the next advance() reports what completed by now
  const uint64_t id = next_id_++;
  active_.push_back({id, bytes_per_ms_ > 0 ? bytes : 0.0});
  return id;
}

double Link::next_finish_ms() const {
  if (!finished_.empty()) return now_;
  if (active_.empty()) return kInf;
  if (bytes_per_ms_ <= 0) return now_;
  double least = active_.front().remaining;
  for (const Transfer& t : active_) least = std::min(least, t.remaining);
  return now_ + least * static_cast<double>(active_.size()) / bytes_per_ms_;
}

void Link::advance(double now_ms, std::vector<uint64_t>& done) {
  if (&done != &finished_ && !finished_.empty()) {
    done.insert(done.end(), finished_.begin(), finished_.end());
    finished_.clear();
  }
  if (now_ms < now_) return;
  while (!active_.empty()) {
    const double n = static_cast<double>(active_.size());
    size_t least = 0;
    for (size_t i = 1; i < active_.size(); ++i)
      if (active_[i].remaining < active_[least].remaining) least = i;
    const double rate = bytes_per_ms_ / n;  // bytes per ms each; 0 = unbounded
    const double finish = rate > 0 ? now_ + active_[least].remaining / rate : now_;
    if (finish > now_ms + kSlackMs) {
      if (rate > 0)
        for (Transfer& t : active_) t.remaining = std::max(0.0, t.remaining - (now_ms - now_) * rate);
      break;
    }
    if (rate > 0)
      for (Transfer& t : active_) t.remaining = std::max(0.0, t.remaining - (finish - now_) * rate);
    now_ = std::max(now_, finish);
    done.push_back(active_[least].id);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(least));  // keeps start order among ties
  }
  now_ = now_ms;
}

// ---- TierStore ----

void TierStore::insert(uint64_t h, std::optional<uint64_t> parent, std::vector<uint64_t>& evicted) {
  if (contains(h)) {
    touch(h);
    return;
  }
  while (!lru_.empty() && map_.size() >= capacity_) {
    evicted.push_back(lru_.front());
    map_.erase(lru_.front());
    lru_.pop_front();
  }
  if (capacity_ == 0) return;
  lru_.push_back(h);
  map_[h] = Entry{std::prev(lru_.end()), parent, false};
}

void TierStore::set_ready(uint64_t h) {
  if (auto it = map_.find(h); it != map_.end()) it->second.ready = true;
}

void TierStore::touch(uint64_t h) {
  if (auto it = map_.find(h); it != map_.end()) lru_.splice(lru_.end(), lru_, it->second.pos);
}

std::optional<uint64_t> TierStore::parent(uint64_t h) const {
  auto it = map_.find(h);
  return it == map_.end() ? std::nullopt : it->second.parent;
}

// ---- SharedTier ----

namespace {
void run(SharedTier::Handlers& handlers, const std::vector<uint64_t>& done, double t) {
  for (uint64_t id : done)
    if (auto it = handlers.find(id); it != handlers.end()) {
      auto fn = std::move(it->second.second);
      handlers.erase(it);
      fn(t);
    }
}
}  // namespace

void SharedTier::forget(const void* owner) {
  for (Handlers* h : {&up_owner, &down_owner})
    std::erase_if(*h, [&](const auto& kv) { return kv.second.first == owner; });
}

double SharedTier::next_finish_ms() const { return std::min(up.next_finish_ms(), down.next_finish_ms()); }

void SharedTier::advance(double now_ms) {
  std::vector<uint64_t> done;
  for (;;) {
    const double t = next_finish_ms();
    if (!(t <= now_ms + kSlackMs)) break;  // Link::advance completes what is due within the slack
    done.clear();
    up.advance(t, done);
    run(up_owner, done, t);
    done.clear();
    down.advance(t, done);
    run(down_owner, done, t);
  }
  done.clear();
  up.advance(now_ms, done);
  down.advance(now_ms, done);
}

// ---- Tiers ----

Tiers::Tiers(const TierConfig& cfg, uint64_t block_bytes, double speedup, std::shared_ptr<SharedTier> g4,
             EventSink events)
    : cfg_(cfg),
      block_bytes_(static_cast<double>(block_bytes)),
      link_scale_(1.0 / speedup),
      g4_(cfg.g4_blocks ? std::move(g4) : nullptr),
      events_(std::move(events)),
      g2_(cfg.g2_blocks),
      g3_(cfg.g3_blocks),
      g1_g2_(cfg.g1_to_g2_gbps),
      g2_g1_(cfg.g2_to_g1_gbps),
      g2_g3_(cfg.g2_to_g3_gbps),
      g3_g2_(cfg.g3_to_g2_gbps) {
  if (cfg.g4_blocks && !g4_) g4_ = std::make_shared<SharedTier>(cfg);
  if (cfg_.offload_batch_size == 0) cfg_.offload_batch_size = 1;
}

Tiers::~Tiers() {
  if (g4_) g4_->forget(this);
}

void Tiers::emit(KvEvent::Kind kind, Tier t, uint64_t h, std::optional<uint64_t> parent) {
  events_(KvEvent{kind, {h}, kind == KvEvent::Kind::kStored ? parent : std::nullopt, t});
}

void Tiers::store_g2(uint64_t h, std::optional<uint64_t> parent, bool ready) {
  if (g2_.contains(h)) {  // already stored (a copy under way): one store event per stay on a tier
    g2_.touch(h);
    if (ready) g2_.set_ready(h);
    return;
  }
  evicted_.clear();
  g2_.insert(h, parent, evicted_);
  if (ready) g2_.set_ready(h);
  emit(KvEvent::Kind::kStored, Tier::kG2, h, parent);
  for (uint64_t v : evicted_) emit(KvEvent::Kind::kRemoved, Tier::kG2, v, std::nullopt);
}

void Tiers::on_g1_evict(uint64_t h, std::optional<uint64_t> parent, double now_ms) {
  if (g2_.contains(h)) {  // Dynamo's presence filter: a block already on G2 is not copied again
    g2_.touch(h);
    return;
  }
  store_g2(h, parent, false);
  batch_.push_back(h);
  if (batch_.size() >= cfg_.offload_batch_size) flush(now_ms);
}

void Tiers::flush(double now_ms) {
  if (batch_.empty()) return;
  advance(now_ms);
  const double bytes = block_bytes_ * static_cast<double>(batch_.size());
  st_.offloaded_bytes += static_cast<uint64_t>(bytes);
  const uint64_t id = g1_g2_.start(now_ms, bytes * link_scale_);
  g1_g2_pending_[id] = Batch{std::move(batch_), nullptr};
  batch_.clear();
}

// Blocks copied down to G2 at `t` are readable there, and written through to G3 and G4.
void Tiers::landed_g2(const std::vector<uint64_t>& hashes, double t) {
  std::vector<uint64_t> to_g3, to_g4;
  for (uint64_t h : hashes) {
    if (!g2_.contains(h)) continue;  // evicted from G2 before its copy landed
    g2_.set_ready(h);
    if (cfg_.g3_blocks && !g3_.contains(h)) to_g3.push_back(h);
    if (g4_ && !g4_->store.contains(h)) to_g4.push_back(h);
  }
  if (!to_g3.empty()) {
    g3_queue_.push_back(std::move(to_g3));
    start_g3_write(t);
  }
  if (!to_g4.empty()) {
    for (uint64_t h : to_g4) {
      evicted_.clear();
      g4_->store.insert(h, g2_.parent(h), evicted_);
      emit(KvEvent::Kind::kStored, Tier::kG4, h, g2_.parent(h));
      for (uint64_t v : evicted_) emit(KvEvent::Kind::kRemoved, Tier::kG4, v, std::nullopt);
    }
    g4_->advance(t);
    const uint64_t id = g4_->down.start(t, block_bytes_ * link_scale_ * static_cast<double>(to_g4.size()));
    g4_->down_owner[id] = {this, [g4 = g4_.get(), hashes = std::move(to_g4)](double) {
                             for (uint64_t h : hashes) g4->store.set_ready(h);
                           }};
  }
}

// Dynamo's G2 -> G3 pipeline keeps one batch in flight: the next waits for the link.
void Tiers::start_g3_write(double t) {
  if (g2_g3_.active() > 0 || g3_queue_.empty()) return;
  std::vector<uint64_t> hashes = std::move(g3_queue_.front());
  g3_queue_.erase(g3_queue_.begin());
  for (uint64_t h : hashes) {
    evicted_.clear();
    g3_.insert(h, g2_.parent(h), evicted_);
    emit(KvEvent::Kind::kStored, Tier::kG3, h, g2_.parent(h));
    for (uint64_t v : evicted_) emit(KvEvent::Kind::kRemoved, Tier::kG3, v, std::nullopt);
  }
  const uint64_t id = g2_g3_.start(t, block_bytes_ * link_scale_ * static_cast<double>(hashes.size()));
  g2_g3_pending_[id] = Batch{std::move(hashes), nullptr};
}

void Tiers::up_to_g1(std::vector<uint64_t> hashes, double t, std::function<void(double)> done) {
  const double bytes = block_bytes_ * static_cast<double>(hashes.size());
  st_.onboarded_bytes += static_cast<uint64_t>(bytes);
  const uint64_t id = g2_g1_.start(t, bytes * link_scale_);
  g2_g1_pending_[id] = Batch{std::move(hashes), std::move(done)};
}

// Completes the transfers of `link` due at `t` (the caller has found one due then).
void Tiers::run_link(Link& link, std::unordered_map<uint64_t, Batch>& pending, double t) {
  std::vector<uint64_t> done;
  link.advance(t, done);
  for (uint64_t id : done) {
    auto it = pending.find(id);
    if (it == pending.end()) continue;
    Batch b = std::move(it->second);
    pending.erase(it);
    if (&link == &g1_g2_) {
      landed_g2(b.hashes, t);
    } else if (&link == &g2_g3_) {
      for (uint64_t h : b.hashes) g3_.set_ready(h);
      start_g3_write(t);
    } else if (b.done) {
      b.done(t);
    }
  }
}

double Tiers::next_finish_ms() const {
  double t =
      std::min({g1_g2_.next_finish_ms(), g2_g1_.next_finish_ms(), g2_g3_.next_finish_ms(), g3_g2_.next_finish_ms()});
  if (g4_) t = std::min(t, g4_->next_finish_ms());
  return t;
}

void Tiers::advance(double now_ms) {
  // Completions in time order: each may start a transfer on another link at its own time.
  for (;;) {
    const double t = next_finish_ms();
    // As in SharedTier::advance: a completion due within the slack is run here, or the last
    // advance below would complete it unseen and its request would wait for it for ever.
    if (!(t <= now_ms + kSlackMs)) break;
    if (g4_ && g4_->next_finish_ms() <= t) g4_->advance(t);
    run_link(g3_g2_, g3_g2_pending_, t);
    run_link(g1_g2_, g1_g2_pending_, t);
    run_link(g2_g3_, g2_g3_pending_, t);
    run_link(g2_g1_, g2_g1_pending_, t);
  }
  std::vector<uint64_t> none;
  for (Link* l : {&g1_g2_, &g2_g1_, &g2_g3_, &g3_g2_}) l->advance(now_ms, none);
  if (g4_) g4_->advance(now_ms);
}

void Tiers::match(std::span<const uint64_t> hashes, size_t from, std::vector<Tier>& out) const {
  out.clear();
  for (size_t i = from; i < hashes.size(); ++i) {
    const uint64_t h = hashes[i];
    if (g2_.ready(h)) out.push_back(Tier::kG2);
    else if (cfg_.g3_blocks && g3_.ready(h)) out.push_back(Tier::kG3);
    else if (g4_ && g4_->store.ready(h)) out.push_back(Tier::kG4);
    else break;
  }
}

void Tiers::onboard(std::span<const uint64_t> hashes, size_t from, const std::vector<Tier>& tiers, double now_ms,
                    std::function<void(double)> done) {
  advance(now_ms);
  std::vector<uint64_t> from_g2, from_g3, from_g4;
  for (size_t k = 0; k < tiers.size(); ++k) {
    const uint64_t h = hashes[from + k];
    ++st_.onboarded_blocks[static_cast<int>(tiers[k])];
    if (tiers[k] == Tier::kG2) {
      g2_.touch(h);
      from_g2.push_back(h);
    } else if (tiers[k] == Tier::kG3) {
      g3_.touch(h);
      from_g3.push_back(h);
    } else {
      g4_->store.touch(h);
      from_g4.push_back(h);
    }
  }
  // One count for the request: each leg into G1 lowers it; the last one calls `done`.
  auto legs = std::make_shared<int>(0);
  auto leg_done = [legs, done](double t) {
    if (--*legs == 0) done(t);
  };
  if (!from_g2.empty()) {
    ++*legs;
    up_to_g1(std::move(from_g2), now_ms, leg_done);
  }
  // G3/G4 -> G2 first; on landing the blocks are G2 blocks and go on up to G1.
  auto staged = [this, leg_done](std::vector<uint64_t> hs, Tier src) {
    return [this, leg_done, hs = std::move(hs), src](double t) {
      for (uint64_t h : hs) store_g2(h, src == Tier::kG3 ? g3_.parent(h) : g4_->store.parent(h), /*ready=*/true);
      up_to_g1(hs, t, leg_done);
    };
  };
  if (!from_g3.empty()) {
    ++*legs;
    const uint64_t id = g3_g2_.start(now_ms, block_bytes_ * link_scale_ * static_cast<double>(from_g3.size()));
    g3_g2_pending_[id] = Batch{{}, staged(std::move(from_g3), Tier::kG3)};
  }
  if (!from_g4.empty()) {
    ++*legs;
    const uint64_t id = g4_->up.start(now_ms, block_bytes_ * link_scale_ * static_cast<double>(from_g4.size()));
    g4_->up_owner[id] = {this, staged(std::move(from_g4), Tier::kG4)};
  }
  if (*legs == 0) done(now_ms);
}

TierStats Tiers::stats() const {
  TierStats s = st_;
  s.used[2] = g2_.used();
  s.capacity[2] = g2_.capacity();
  s.used[3] = g3_.used();
  s.capacity[3] = g3_.capacity();
  if (g4_) {
    s.used[4] = g4_->store.used();
    s.capacity[4] = g4_->store.capacity();
  }
  return s;
}

}  // namespace dyn::engine
