// Session inference: a prefix tree of hash-id chains keyed by a 64-bit chained hash of each
// prefix (verified against the ids, so collisions cannot merge sessions).
#include "dyn/trace/sessionize.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "dyn/engine/config.h"

namespace dyn::trace {

namespace {

uint64_t mix(uint64_t h, uint64_t id) {
  // splitmix64 finalizer over the running hash and the next id.
  uint64_t z = h ^ (id + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct PrefixKey {
  uint64_t depth, hash;
  bool operator==(const PrefixKey& o) const { return depth == o.depth && hash == o.hash; }
};
struct PrefixKeyHash {
  size_t operator()(const PrefixKey& k) const { return static_cast<size_t>(mix(k.hash, k.depth)); }
};

/// Chained prefix hashes: out[i] = hash of ids[0..i] (i.e. the prefix of length i+1).
void prefix_hashes(const std::vector<uint64_t>& ids, std::vector<uint64_t>& out) {
  out.resize(ids.size());
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (size_t i = 0; i < ids.size(); ++i) out[i] = h = mix(h, ids[i]);
}

size_t full_blocks(const records::WorkloadRow& r, uint32_t block_size) {
  size_t n = r.hash_ids.size();
  if (n == 0) return 0;
  return r.input_length >= n * static_cast<uint64_t>(block_size) ? n : n - 1;
}

}  // namespace

double estimate_service_ms(uint64_t input_tokens, uint64_t cached_tokens, uint64_t output_tokens,
                           const engine::PerfProfile* profile) {
  if (profile) return profile->request_ms(input_tokens, cached_tokens, output_tokens, 0, 0);
  return engine::prefill_time_ms(input_tokens - std::min(cached_tokens, input_tokens)) +
         static_cast<double>(output_tokens) * engine::decode_time_ms(0.0);
}

SessionizeStats sessionize(std::vector<records::WorkloadRow>& rows, const SessionizeOptions& o) {
  SessionizeStats st;
  st.rows = rows.size();
  const uint32_t B = o.block_size ? o.block_size : records::kMooncakeBlockSize;
  std::vector<uint64_t> hs;

  // Pass 1: distinct full-block continuations of every prefix node.
  std::unordered_set<PrefixKey, PrefixKeyHash> edges;  // (depth of parent, hash(parent) ^ child) pairs
  std::unordered_map<PrefixKey, uint32_t, PrefixKeyHash> fanout;
  for (const auto& r : rows) {
    if (!r.session_id.empty()) continue;
    size_t f = full_blocks(r, B);
    prefix_hashes(r.hash_ids, hs);
    for (size_t i = 1; i < f; ++i) {
      PrefixKey parent{i, hs[i - 1]};
      if (edges.insert(PrefixKey{i, mix(hs[i - 1], r.hash_ids[i])}).second) ++fanout[parent];
    }
  }

  // Pass 2: chain rows in order.
  std::unordered_map<PrefixKey, size_t, PrefixKeyHash> latest;  // full prefix -> latest row with exactly it
  std::unordered_set<PrefixKey, PrefixKeyHash> seen;            // every full prefix of earlier rows
  std::vector<int64_t> session_of(rows.size(), -1);
  std::vector<uint64_t> cached(rows.size(), 0);
  std::vector<size_t> tail;     // session -> latest row
  std::vector<uint64_t> turns;  // session -> turns
  for (size_t j = 0; j < rows.size(); ++j) {
    auto& r = rows[j];
    if (!r.session_id.empty()) {
      ++st.kept;
      continue;
    }
    prefix_hashes(r.hash_ids, hs);
    size_t n = r.hash_ids.size();
    size_t shared = 0;
    for (size_t i = 1; i <= n; ++i) {
      auto it = fanout.find(PrefixKey{i, hs[i - 1]});
      if (it != fanout.end() && it->second >= o.shared_fanout) shared = i;
    }
    int64_t best = -1;
    for (size_t i = shared + 1; i <= n; ++i) {
      auto it = latest.find(PrefixKey{i, hs[i - 1]});
      if (it == latest.end() || static_cast<int64_t>(it->second) <= best) continue;
      const auto& p = rows[it->second].hash_ids;
      if (std::equal(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i), r.hash_ids.begin()))
        best = static_cast<int64_t>(it->second);
    }
    int64_t s;
    if (best >= 0 && tail[static_cast<size_t>(session_of[static_cast<size_t>(best)])] == static_cast<size_t>(best)) {
      s = session_of[static_cast<size_t>(best)];
      size_t prev = tail[static_cast<size_t>(s)];
      const auto& pr = rows[prev];
      double end = pr.timestamp_ms.value_or(0) +
                   estimate_service_ms(pr.input_length, cached[prev], pr.output_length.value_or(0), o.profile);
      r.delay_ms = std::round(std::max(0.0, r.timestamp_ms.value_or(0) - end));  // whole ms, like the timestamps
      ++st.continued;
    } else {
      s = static_cast<int64_t>(tail.size());
      tail.push_back(j);
      turns.push_back(0);
      if (best >= 0) {
        r.parent_session_id = o.id_prefix + std::to_string(session_of[static_cast<size_t>(best)]);
        ++st.forks;
      }
    }
    session_of[j] = s;
    tail[static_cast<size_t>(s)] = j;
    ++turns[static_cast<size_t>(s)];
    r.session_id = o.id_prefix + std::to_string(s);
    // Cached tokens under an infinite cache: the leading full blocks already seen.
    size_t f = full_blocks(r, B);
    size_t hit = 0;
    while (hit < f && seen.count(PrefixKey{hit + 1, hs[hit]})) ++hit;
    cached[j] = std::min<uint64_t>(r.input_length, hit * static_cast<uint64_t>(B));
    for (size_t i = 1; i <= f; ++i) seen.insert(PrefixKey{i, hs[i - 1]});
    if (f > 0) latest[PrefixKey{f, hs[f - 1]}] = j;
  }
  st.sessions = tail.size();
  for (uint64_t t : turns) {
    if (t >= 2) ++st.multi_turn_sessions, st.multi_turn_rows += t;
    st.longest = std::max(st.longest, t);
  }
  return st;
}

}  // namespace dyn::trace
