// Engine block ids -> router sequence hashes, and into the router's index (see translate.h).
#include "dyn/kvevents/translate.h"

#include <fmt/format.h>

#include <mutex>

#include "dyn/tokens/hash.h"

namespace dyn::kvevents {

const char* skip_name(Skip s) {
  switch (s) {
    case Skip::kUndecodable: return "undecodable";
    case Skip::kOtherMedium: return "medium";
    case Skip::kOtherGroup: return "group";
    case Skip::kPlaceholder: return "placeholder";
    case Skip::kUnnamedAdapter: return "adapter";
    case Skip::kBlockSize: return "block_size";
    case Skip::kTokenCount: return "token_count";
    case Skip::kUnknownParent: return "parent";
  }
  return "undecodable";
}

bool is_problem(Skip s) {
  return s == Skip::kUndecodable || s == Skip::kUnnamedAdapter || s == Skip::kTokenCount || s == Skip::kUnknownParent;
}

void Adapters::add(std::string_view name) {
  {
    std::shared_lock lk(mu_);
    if (names_.find(name) != names_.end()) return;
  }
  std::unique_lock lk(mu_);
  names_.emplace(name);
  any_ = true;
}

uint64_t Adapters::seed_for(std::string_view model) const {
  if (!any_ || model.empty()) return tokens::kHashSeed;  // the common case: no adapter seen, no lock
  std::shared_lock lk(mu_);
  return names_.find(model) != names_.end() ? tokens::adapter_seed(model) : tokens::kHashSeed;
}

size_t Translator::KeyHash::operator()(const Key& k) const {
  return static_cast<size_t>(k.engine_id ^ (static_cast<uint64_t>(k.group) * 0x9E3779B97F4A7C15ull) ^
                             (static_cast<uint64_t>(k.medium) << 56));
}

Translator::Translator(uint32_t router_block_size, std::vector<std::string> media, Adapters* adapters)
    : router_bs_(router_block_size), media_(std::move(media)), adapters_(adapters), holders_(media_.size()) {
  if (router_bs_ == 0) throw Fatal(kExitUsage, "router block size must be > 0");
}

void Translator::clear() {
  blocks_.clear();
  for (auto& h : holders_) h.clear();
}

std::optional<uint32_t> Translator::medium_of(const std::optional<std::string>& m) const {
  const auto tier = kv::tier_of_medium(m ? std::optional<std::string_view>(*m) : std::nullopt);
  if (!tier) return std::nullopt;
  for (uint32_t i = 0; i < media_.size(); ++i)
    if (kv::tier_of_medium(media_[i]) == tier) return i;
  return std::nullopt;
}

// Dynamo's kv-router ZMQ filter (filter_reason): the event's own kind decides; else the kind
// learned for its group; else only group 0 (or none) counts as the main attention group.
bool Translator::main_group(std::optional<uint32_t> group, const std::optional<std::string>& kind) {
  auto is_main = [](std::string_view k) {
    return k == "full_attention" || k == "mla_attention" || k == "sink_full_attention";
  };
  if (kind) {
    if (group) group_is_main_[*group] = is_main(*kind);
    return is_main(*kind);
  }
  if (!group) return true;
  auto it = group_is_main_.find(*group);
  if (it != group_is_main_.end()) return it->second;
  return *group == 0;
}

// Drops one holder of each of `seqs`; those nobody holds any more go to `dropped`.
void Translator::release(uint32_t medium, const std::vector<uint64_t>& seqs, std::vector<uint64_t>& dropped) {
  auto& holders = holders_[medium];
  for (uint64_t h : seqs) {
    auto it = holders.find(h);
    if (it == holders.end()) continue;
    if (--it->second == 0) {
      holders.erase(it);
      dropped.push_back(h);
    }
  }
}

std::optional<Skipped> Translator::translate(const Event& e, std::vector<IndexUpdate>& out,
                                             const std::function<bool(uint32_t)>* accept_block_size) {
  if (std::holds_alternative<AllBlocksCleared>(e)) {
    clear();
    for (const std::string& m : media_) out.push_back(IndexUpdate{IndexUpdate::Kind::kCleared, m, {}});
    return std::nullopt;
  }
  if (const auto* r = std::get_if<BlockRemoved>(&e)) {
    auto medium = medium_of(r->medium);
    if (!medium) return Skipped{Skip::kOtherMedium, "BlockRemoved on medium " + r->medium.value_or("")};
    if (!main_group(r->group_idx, std::nullopt))
      return Skipped{Skip::kOtherGroup, fmt::format("BlockRemoved of KV cache group {}", r->group_idx.value_or(0))};
    IndexUpdate u{IndexUpdate::Kind::kRemoved, media_[*medium], {}};
    for (uint64_t h : r->block_hashes) {
      auto it = blocks_.find(Key{h, r->group_idx.value_or(0), *medium});
      if (it == blocks_.end()) continue;  // stored before we joined, or already forgotten
      release(*medium, it->second.completed, u.sequence_hashes);
      blocks_.erase(it);
    }
    if (!u.sequence_hashes.empty()) out.push_back(std::move(u));
    return std::nullopt;
  }
  const auto& s = std::get<BlockStored>(e);
  auto medium = medium_of(s.medium);
  if (!medium) return Skipped{Skip::kOtherMedium, "BlockStored on medium " + s.medium.value_or("")};
  if (!main_group(s.group_idx, s.kv_cache_spec_kind))
    return Skipped{Skip::kOtherGroup, fmt::format("BlockStored of KV cache group {} ({})", s.group_idx.value_or(0),
                                                  s.kv_cache_spec_kind.value_or("kind not known"))};
  return store(s, *medium, out, accept_block_size);
}

std::optional<Skipped> Translator::store(const BlockStored& s, uint32_t medium, std::vector<IndexUpdate>& out,
                                         const std::function<bool(uint32_t)>* accept_block_size) {
  if (s.block_size == 0 || (s.token_ids.empty() && !s.block_hashes.empty()))
    return Skipped{Skip::kPlaceholder, fmt::format("BlockStored of {} blocks without token ids (block size {})",
                                                   s.block_hashes.size(), s.block_size)};
  const std::string_view adapter = s.lora_name ? std::string_view(*s.lora_name) : std::string_view();
  if (adapter.empty() && s.lora_id && *s.lora_id != 0)
    return Skipped{Skip::kUnnamedAdapter,
                   fmt::format("BlockStored under LoRA adapter id {} without a lora_name (older vLLM): no request "
                               "can be matched to it",
                               *s.lora_id)};
  if (media_[medium] == kDeviceMedium && accept_block_size && *accept_block_size && !(*accept_block_size)(s.block_size))
    return Skipped{Skip::kBlockSize, fmt::format("BlockStored of block size {} refused", s.block_size)};
  if (s.token_ids.size() != s.block_hashes.size() * static_cast<size_t>(s.block_size))
    return Skipped{Skip::kTokenCount, fmt::format("BlockStored has {} token ids for {} blocks of {} tokens",
                                                  s.token_ids.size(), s.block_hashes.size(), s.block_size)};
  const uint32_t group = s.group_idx.value_or(0);
  State cur;
  if (s.parent_block_hash) {
    // The parent on the block's own medium, else on any other: an engine offloads the leaves of a
    // prefix first, so a host-tier block often continues one still on the GPU (dyn-mocker's G2
    // stores, SPEC 8.7); the chain's hashes are the same wherever the parent is.
    auto it = blocks_.find(Key{*s.parent_block_hash, group, medium});
    for (uint32_t m = 0; it == blocks_.end() && m < media_.size(); ++m)
      if (m != medium) it = blocks_.find(Key{*s.parent_block_hash, group, m});
    if (it == blocks_.end())
      return Skipped{Skip::kUnknownParent,
                     fmt::format("BlockStored continues block {:#x}, which was never stored (missed events)",
                                 *s.parent_block_hash)};
    cur.last_seq = it->second.last_seq;
    cur.tail = it->second.tail;
  }
  engine_block_size_ = s.block_size;
  if (!adapter.empty() && adapters_) adapters_->add(adapter);
  const uint64_t seed = tokens::adapter_seed(adapter);
  auto& holders = holders_[medium];
  IndexUpdate u{IndexUpdate::Kind::kStored, media_[medium], {}};
  std::vector<uint64_t> replaced;  // router blocks of engine blocks stored again (ids reused)
  for (size_t b = 0; b < s.block_hashes.size(); ++b) {
    cur.completed.clear();
    const uint32_t* tok = s.token_ids.data() + b * s.block_size;
    for (uint32_t k = 0; k < s.block_size; ++k) {
      cur.tail.push_back(tok[k]);
      if (cur.tail.size() == router_bs_) {
        uint64_t bh = tokens::hash_tokens(cur.tail, seed);
        uint64_t seq = cur.last_seq ? tokens::chain_hash(*cur.last_seq, bh) : bh;  // SPEC 4.1: seq[0] = block[0]
        cur.last_seq = seq;
        cur.completed.push_back(seq);
        u.sequence_hashes.push_back(seq);
        ++holders[seq];
        cur.tail.clear();
      }
    }
    auto [it, fresh] = blocks_.try_emplace(Key{s.block_hashes[b], group, medium});
    if (!fresh) release(medium, it->second.completed, replaced);
    it->second = cur;
  }
  // An engine id stored again with other content (no AllBlocksCleared in between): what only
  // the old content held leaves the index before the new content enters it.
  std::erase_if(replaced, [&](uint64_t h) { return holders.count(h) > 0; });
  if (!replaced.empty()) out.push_back(IndexUpdate{IndexUpdate::Kind::kRemoved, media_[medium], std::move(replaced)});
  if (!u.sequence_hashes.empty()) out.push_back(std::move(u));
  return std::nullopt;
}

WorkerFeed::WorkerFeed(uint32_t router_block_size, Adapters* adapters)
    : tr_(router_block_size, {std::begin(kTieredMedia), std::end(kTieredMedia)}, adapters) {}

void WorkerFeed::apply(const EventBatch& batch, const IndexSink& index,
                       const std::function<bool(uint32_t)>& accept_block_size,
                       const std::function<void(const std::string&)>& on_problem) {
  for (const RejectedEvent& r : batch.rejected) {
    counts_.skipped[static_cast<size_t>(Skip::kUndecodable)]++;
    if (on_problem) on_problem(r.reason);
  }
  updates_.clear();
  for (const Event& e : batch.events) {
    switch (e.index()) {
      case 0: counts_.stored++; break;
      case 1: counts_.removed++; break;
      default: counts_.cleared++; break;
    }
    if (auto s = tr_.translate(e, updates_, &accept_block_size)) {
      counts_.skipped[static_cast<size_t>(s->why)]++;
      if (on_problem && is_problem(s->why)) on_problem(s->detail);
    }
  }
  apply_updates(updates_, index);
  counts_.engine_blocks = tr_.known_blocks();
}

void WorkerFeed::apply_updates(std::vector<IndexUpdate>& updates, const IndexSink& index) {
  std::vector<kv::BlockEvent> events;
  events.reserve(updates.size());
  for (IndexUpdate& u : updates) {
    const auto tier = kv::tier_of_medium(u.medium);
    if (!tier) continue;
    kv::BlockEvent& e = events.emplace_back();
    e.tier = *tier;
    e.kind = u.kind == IndexUpdate::Kind::kStored    ? kv::BlockEvent::Kind::kStored
             : u.kind == IndexUpdate::Kind::kRemoved ? kv::BlockEvent::Kind::kRemoved
                                                     : kv::BlockEvent::Kind::kCleared;
    e.block_hashes = std::move(u.sequence_hashes);
  }
  if (!events.empty()) index(events);
}

void WorkerFeed::reset(const IndexSink& index) {
  tr_.clear();
  counts_.engine_blocks = 0;
  std::vector<kv::BlockEvent> cleared;
  for (size_t t = 0; t < kv::kTiers; ++t)
    cleared.push_back(kv::BlockEvent{kv::BlockEvent::Kind::kCleared, {}, std::nullopt, static_cast<kv::Tier>(t)});
  index(cleared);
}

}  // namespace dyn::kvevents
