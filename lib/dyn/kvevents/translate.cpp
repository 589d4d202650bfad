// Engine block ids -> router sequence hashes (see translate.h).
#include "dyn/kvevents/translate.h"

#include <fmt/format.h>

#include "dyn/tokens/hash.h"

namespace dyn::kvevents {

Translator::Translator(uint32_t router_block_size) : router_bs_(router_block_size) {
  if (router_bs_ == 0) throw Fatal(kExitUsage, "router block size must be > 0");
}

std::optional<Error> Translator::translate(const Event& e, std::vector<IndexUpdate>& out) {
  if (std::holds_alternative<AllBlocksCleared>(e)) {
    blocks_.clear();
    out.push_back(IndexUpdate{IndexUpdate::Kind::kCleared, {}});
    return std::nullopt;
  }
  if (const auto* r = std::get_if<BlockRemoved>(&e)) {
    IndexUpdate u{IndexUpdate::Kind::kRemoved, {}};
    for (uint64_t h : r->block_hashes) {
      auto it = blocks_.find(h);
      if (it == blocks_.end()) continue;  // stored before we joined, or already forgotten
      u.sequence_hashes.insert(u.sequence_hashes.end(), it->second.completed.begin(), it->second.completed.end());
      blocks_.erase(it);
    }
    if (!u.sequence_hashes.empty()) out.push_back(std::move(u));
    return std::nullopt;
  }
  const auto& s = std::get<BlockStored>(e);
  if (s.token_ids.size() != s.block_hashes.size() * static_cast<size_t>(s.block_size))
    return Error{fmt::format("BlockStored has {} token ids for {} blocks of {} tokens", s.token_ids.size(),
                             s.block_hashes.size(), s.block_size),
                 kExitBadData};
  engine_block_size_ = s.block_size;
  State cur;
  if (s.parent_block_hash) {
    auto it = blocks_.find(*s.parent_block_hash);
    if (it == blocks_.end())
      return Error{fmt::format("BlockStored continues block {:#x}, which was never stored (missed events)",
                               *s.parent_block_hash),
                   kExitBadData};
    cur.last_seq = it->second.last_seq;
    cur.tail = it->second.tail;
  }
  IndexUpdate u{IndexUpdate::Kind::kStored, {}};
  for (size_t b = 0; b < s.block_hashes.size(); ++b) {
    cur.completed.clear();
    const uint32_t* tok = s.token_ids.data() + b * s.block_size;
    for (uint32_t k = 0; k < s.block_size; ++k) {
      cur.tail.push_back(tok[k]);
      if (cur.tail.size() == router_bs_) {
        uint64_t bh = tokens::hash_tokens(cur.tail);
        uint64_t seq = cur.last_seq ? tokens::chain_hash(*cur.last_seq, bh) : bh;  // SPEC 4.1: seq[0] = block[0]
        cur.last_seq = seq;
        cur.completed.push_back(seq);
        u.sequence_hashes.push_back(seq);
        cur.tail.clear();
      }
    }
    blocks_[s.block_hashes[b]] = cur;
  }
  if (!u.sequence_hashes.empty()) out.push_back(std::move(u));
  return std::nullopt;
}

}  // namespace dyn::kvevents
