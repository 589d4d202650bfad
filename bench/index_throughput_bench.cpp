// Prefix index throughput under a replayed Mooncake timeline (issue 54), what Dynamo's
// lib/kv-router/benches/mooncake_bench.rs measures for its indexers: each worker's request and
// KV-event timeline comes from the trace run through dyn's engine model (lib/dyn/engine, the
// one dyn-mocker and dyn-replay --sim use), then the merged timeline is replayed against a
// kv::PrefixIndex at rising compression until achieved operations per second stop tracking the
// offered rate. An operation is one lookup (overlaps() of a request's blocks) or one KV event (a
// stored / removed / cleared batch from one worker); in approximate mode (no events, what
// dyn-route runs without --worker-kv-events) it is one lookup or one insert() of a request's
// blocks with the router's TTL and budget. Each step's lookup latency p50/p99 is a lookup's own
// time, its lock included, from its start. Every lookup is checked against a naive reference
// index (per-worker hash sets) in a separate pass; the timed single-thread passes must reproduce
// the same checksum of overlaps. The memory anchor times random 16-byte cell updates in a table of
// the event-fed index's size, in runs of an op's blocks: the bound this machine's memory sets.
//
// usage: index_throughput_bench TRACE.jsonl[.gz] [--workers N] [--copies C] [--passes P]
//                               [--threads T] [--rows R] [--start-rate OPS] [--check 0|1] [--cold 0|1]
//                               [--approximate 0|1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <list>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dyn/base/defaults.h"
#include "dyn/engine/engine.h"
#include "dyn/kv/prefix_index.h"
#include "dyn/records/workload.h"
#include "dyn/tokens/hash.h"

using namespace dyn;

namespace {

enum class Kind : uint8_t { kLookup, kStored, kRemoved, kCleared, kInsert };

// One timeline entry; its blocks are hashes[off, off + len) of the Timeline.
struct Op {
  double t_ms;  // on the trace's clock (ms since its start)
  uint32_t worker;
  Kind kind;
  uint32_t off, len;
};

struct Timeline {
  std::vector<Op> ops;  // in time order
  std::vector<uint64_t> hashes;
  uint32_t workers = 0;
  double span_ms = 0;
  uint64_t lookups = 0, lookup_blocks = 0, stored = 0, stored_blocks = 0, removed = 0, removed_blocks = 0, cleared = 0,
           inserts = 0, rejected = 0, batches = 0;
};

// Whether ops[j] joins the event batch of ops[i] (i < j; i may wrap below 0): both KV events of
// one worker at one time, one engine step's.
bool same_batch(const std::vector<Op>& ops, size_t i, size_t j) {
  auto event = [](const Op& o) {
    return o.kind == Kind::kStored || o.kind == Kind::kRemoved || o.kind == Kind::kCleared;
  };
  return i < ops.size() && event(ops[i]) && event(ops[j]) && ops[i].worker == ops[j].worker &&
         ops[i].t_ms == ops[j].t_ms;
}

struct Row {
  double t;
  uint64_t tokens, out;
  std::vector<uint64_t> seq;
};

struct Args {
  std::string trace;
  uint32_t workers = 8, copies = 8, threads = 2;
  int passes = 3;
  size_t rows = 0;  // 0 = all
  double start_rate = 1e6;
  bool check = true;        // the reference pass (off only to profile the replays alone)
  bool warm = true;         // tables at working size before each timed replay (--cold 1: from a new index)
  bool approximate = true;  // also sweep the approximate index (off only to profile the event-fed one alone)
};

double cpu_seconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One worker's engine on a virtual clock: its requests arrive at their trace times, steps last
// what the engine model says, and the KV events a step emits are stamped at its end (when a
// worker would publish them). Returns the worker's ops (lookups at arrival, events).
void engine_timeline(const std::vector<const Row*>& rows, uint32_t w, Timeline& tl, std::vector<Op>& out) {
  engine::EngineConfig ec;
  ec.block_size = records::kMooncakeBlockSize;
  ec.num_blocks = kDefaultKvBlocks;  // 16,384 blocks per worker, as mooncake_bench's mock engine
  ec.kv_events = true;
  engine::Engine eng(ec);
  engine::StepResult res;
  double now = 0;
  size_t i = 0;
  auto emit = [&](double t, Kind k, std::span<const uint64_t> blocks) {
    out.push_back(Op{t, w, k, static_cast<uint32_t>(tl.hashes.size()), static_cast<uint32_t>(blocks.size())});
    tl.hashes.insert(tl.hashes.end(), blocks.begin(), blocks.end());
  };
  while (i < rows.size() || eng.has_work()) {
    if (!eng.has_work() && now < rows[i]->t) now = rows[i]->t;
    for (; i < rows.size() && rows[i]->t <= now; ++i) {
      const Row& r = *rows[i];
      emit(r.t, Kind::kLookup, r.seq);
      engine::RequestSpec spec;
      spec.id = i;
      spec.prompt_tokens = r.tokens;
      spec.block_hashes = r.seq;
      spec.max_output_tokens = std::max<uint64_t>(1, r.out);
      if (!eng.add(std::move(spec))) ++tl.rejected;
    }
    if (!eng.has_work()) continue;
    const double next = i < rows.size() ? rows[i]->t : INFINITY;
    // Identical decode steps up to the next arrival at once, as dyn-replay --sim does.
    if (uint64_t k = eng.steady_decode_steps(); k >= 2) {
      const uint64_t m = std::isfinite(next) ? eng.decode_steps_within(k, next - now) : k;
      if (m >= 2) now += eng.fast_forward(m);
      else {
        eng.step(res, now);
        now += res.duration_ms;
      }
    } else {
      eng.step(res, now);
      now += res.duration_ms;
    }
    for (const engine::KvEvent& e : eng.take_kv_events()) {
      if (e.tier != engine::Tier::kG1) continue;
      emit(now,
           e.kind == engine::KvEvent::Kind::kStored    ? Kind::kStored
           : e.kind == engine::KvEvent::Kind::kRemoved ? Kind::kRemoved
                                                       : Kind::kCleared,
           e.block_hashes);
    }
  }
}

// The whole fleet's timeline: rows partitioned over `workers` at random (seeded, as
// mooncake_bench's partition_trace), then `copies` replicas with their own workers and hashes
// (mooncake_bench's trace duplication), all in one time order.
Timeline build_timeline(const std::vector<Row>& rows, const Args& a, bool events) {
  Timeline tl;
  tl.workers = a.workers * a.copies;
  std::mt19937_64 rng(42);
  std::vector<std::vector<const Row*>> per(a.workers);
  for (const Row& r : rows) per[rng() % a.workers].push_back(&r);
  std::vector<Op> base;
  for (uint32_t w = 0; w < a.workers; ++w) {
    if (events) {
      engine_timeline(per[w], w, tl, base);
      continue;
    }
    for (const Row* r : per[w]) {  // approximate: lookup, then the router records the blocks
      for (Kind k : {Kind::kLookup, Kind::kInsert}) {
        base.push_back(Op{r->t, w, k, static_cast<uint32_t>(tl.hashes.size()), static_cast<uint32_t>(r->seq.size())});
        tl.hashes.insert(tl.hashes.end(), r->seq.begin(), r->seq.end());
      }
    }
  }
  std::stable_sort(base.begin(), base.end(), [](const Op& x, const Op& y) { return x.t_ms < y.t_ms; });
  const size_t base_hashes = tl.hashes.size();
  for (uint32_t c = 1; c < a.copies; ++c) {  // copy c: hashes xor a per-copy constant, workers shifted
    const uint64_t salt = 0x9E3779B97F4A7C15ull * c;
    for (size_t h = 0; h < base_hashes; ++h) tl.hashes.push_back(tl.hashes[h] ^ salt);
  }
  tl.ops.reserve(base.size() * a.copies);
  // The copies of an op run back to back, except that a worker's events of one step (same worker
  // and time) stay together in each copy: the replays apply them as one batch, as a worker's KV
  // event batch arrives. Each copy's own order is the base order either way.
  for (size_t i = 0, j; i < base.size(); i = j) {
    for (j = i + 1; base[i].kind != Kind::kLookup && j < base.size() && base[j].kind != Kind::kLookup &&
                    base[j].worker == base[i].worker && base[j].t_ms == base[i].t_ms;
         ++j) {
    }
    for (uint32_t c = 0; c < a.copies; ++c)
      for (size_t k = i; k < j; ++k)
        tl.ops.push_back(Op{base[k].t_ms, base[k].worker + c * a.workers, base[k].kind,
                            static_cast<uint32_t>(base[k].off + c * base_hashes), base[k].len});
  }
  // The hashes in replay order: each op's blocks follow the previous op's, so the replay reads
  // them as one stream. A router's event or request hashes are in cache when it applies them (it
  // just decoded or computed them); scattered over the array (by generation: worker by worker,
  // copy by copy), every op began with a cache miss of the harness's own, a fifth of apply_bits'
  // samples.
  std::vector<uint64_t> ordered;
  ordered.reserve(tl.hashes.size());
  for (Op& o : tl.ops) {
    const auto off = static_cast<uint32_t>(ordered.size());
    ordered.insert(ordered.end(), tl.hashes.begin() + o.off, tl.hashes.begin() + o.off + o.len);
    o.off = off;
  }
  tl.hashes = std::move(ordered);
  for (size_t i = 0; i < tl.ops.size(); ++i) {
    const Op& o = tl.ops[i];
    tl.batches += o.kind != Kind::kLookup && o.kind != Kind::kInsert && !same_batch(tl.ops, i - 1, i);
    tl.lookups += o.kind == Kind::kLookup;
    tl.lookup_blocks += o.kind == Kind::kLookup ? o.len : 0;
    tl.stored += o.kind == Kind::kStored;
    tl.stored_blocks += o.kind == Kind::kStored ? o.len : 0;
    tl.removed += o.kind == Kind::kRemoved;
    tl.removed_blocks += o.kind == Kind::kRemoved ? o.len : 0;
    tl.cleared += o.kind == Kind::kCleared;
    tl.inserts += o.kind == Kind::kInsert;
  }
  tl.span_ms = tl.ops.empty() ? 0 : tl.ops.back().t_ms - tl.ops.front().t_ms;
  return tl;
}

kv::IndexConfig index_config(bool events) {
  // dyn-route's: event-fed = no TTL, no budget; approximate = --router-ttl-secs 120 and a budget
  // of the worker's KV blocks (router.cpp Impl).
  return events ? kv::IndexConfig{0, 0, 0.8} : kv::IndexConfig{120'000, kDefaultKvBlocks, 0.8};
}

void apply(kv::PrefixIndex& ix, const Timeline& tl, const Op& o) {
  std::span<const uint64_t> b(tl.hashes.data() + o.off, o.len);
  switch (o.kind) {
    case Kind::kStored: ix.apply_stored(o.worker, b, std::nullopt, o.t_ms); break;
    case Kind::kRemoved: ix.apply_removed(o.worker, b); break;
    case Kind::kCleared: ix.clear_worker(o.worker); break;
    case Kind::kInsert: ix.insert(o.worker, b, o.t_ms); break;
    case Kind::kLookup: break;
  }
}

// The naive reference: per worker, the blocks it holds with their last use, in LRU order.
class NaiveIndex {
 public:
  NaiveIndex(uint32_t n, kv::IndexConfig c) : cfg_(c), w_(n) {}
  void apply(const Timeline& tl, const Op& o) {
    W& x = w_[o.worker];
    const uint64_t* b = tl.hashes.data() + o.off;
    switch (o.kind) {
      case Kind::kStored:
        for (uint32_t i = o.len; i-- > 0;) touch(x, b[i], o.t_ms);
        break;
      case Kind::kRemoved:
        for (uint32_t i = 0; i < o.len; ++i)
          if (auto it = x.at.find(b[i]); it != x.at.end()) x.lru.erase(it->second.first), x.at.erase(it);
        break;
      case Kind::kCleared: x = W{}; break;
      case Kind::kInsert:
        for (uint32_t i = o.len; i-- > 0;) touch(x, b[i], o.t_ms);
        while (!x.lru.empty() && x.at[x.lru.front()].second + cfg_.ttl_ms <= o.t_ms)
          x.at.erase(x.lru.front()), x.lru.pop_front();
        if (cfg_.budget_blocks && x.at.size() > cfg_.budget_blocks) {
          const auto target = static_cast<size_t>(static_cast<double>(cfg_.budget_blocks) * cfg_.prune_target_ratio);
          while (x.at.size() > target) x.at.erase(x.lru.front()), x.lru.pop_front();
        }
        break;
      case Kind::kLookup: break;
    }
  }
  uint32_t held(uint32_t w, const uint64_t* seq, uint32_t n, double now) const {
    const W& x = w_[w];
    uint32_t k = 0;
    for (; k < n; ++k) {
      auto it = x.at.find(seq[k]);
      if (it == x.at.end() || (cfg_.ttl_ms > 0 && it->second.second + cfg_.ttl_ms <= now)) break;
    }
    return k;
  }

 private:
  struct W {
    std::list<uint64_t> lru;  // oldest first
    std::unordered_map<uint64_t, std::pair<std::list<uint64_t>::iterator, double>> at;
  };
  void touch(W& x, uint64_t h, double now) {
    if (auto it = x.at.find(h); it != x.at.end()) x.lru.erase(it->second.first);
    x.lru.push_back(h);
    x.at[h] = {std::prev(x.lru.end()), now};
  }
  kv::IndexConfig cfg_;
  std::vector<W> w_;
};

// Adds a lookup's overlaps to a checksum that depends on which worker got which count: a sum
// weighted by an odd number per worker (a change of any one count changes it), chained across
// lookups. The weighted terms are independent, not one chain of dependent multiplies through every
// worker (64 of them in each timed lookup at 64 workers: the harness's CPU time, not the index's).
uint64_t mix(uint64_t sum, std::span<const uint32_t> out) {
  uint64_t s = 0;
  for (size_t w = 0; w < out.size(); ++w) s += out[w] * (2 * w + 1);
  return sum * 1000003 + s;
}

// Untimed: every lookup's overlaps against the naive index's. Returns the checksum, counts
// mismatches into *bad.
uint64_t check(const Timeline& tl, bool events, uint64_t* bad) {
  kv::PrefixIndex ix(index_config(events));
  ix.set_worker_count(tl.workers);
  NaiveIndex ref(tl.workers, index_config(events));
  std::vector<uint32_t> out(tl.workers);
  uint64_t sum = 0;
  for (const Op& o : tl.ops) {
    if (o.kind != Kind::kLookup) {
      apply(ix, tl, o);
      ref.apply(tl, o);
      continue;
    }
    ix.overlaps({tl.hashes.data() + o.off, o.len}, o.t_ms, out);
    for (uint32_t w = 0; w < tl.workers; ++w) *bad += out[w] != ref.held(w, tl.hashes.data() + o.off, o.len, o.t_ms);
    sum = mix(sum, out);
  }
  return sum;
}

struct Step {
  double offered = 0, achieved = 0, p50_us = 0, p99_us = 0, cpu_s = 0;
  uint64_t checksum = 0;
};

// Replays the timeline compressed `c` times on `threads` threads (worker w on thread
// w % threads, each keeping its own schedule), all sharing one index under one mutex, as
// dyn-route's router serializes index access under its lock.
Step replay(const Timeline& tl, bool events, double c, uint32_t threads, bool warm) {
  kv::PrefixIndex ix(index_config(events));
  ix.set_worker_count(tl.workers);
  if (warm) {
    // A running router's tables already have their working size: fill the index once and clear
    // every worker (the tables keep their capacity), so the timed replay starts empty but does
    // not pay for growing them (the kernel zeroing fresh pages was a quarter of a cold replay).
    for (const Op& o : tl.ops) apply(ix, tl, o);
    for (uint32_t w = 0; w < tl.workers; ++w) ix.clear_worker(w);
  }
  std::mutex mu;
  // Each thread's ops; a worker's events of one step are one item, applied in one call.
  struct Item {
    const Op* op;
    uint32_t ev_begin, ev_end;  // its events in evs[thread], for a batch
  };
  std::vector<std::vector<Item>> mine(threads);
  std::vector<std::vector<kv::IndexEvent>> evs(threads);
  for (size_t i = 0; i < tl.ops.size(); ++i) {
    const Op& o = tl.ops[i];
    const uint32_t k = o.worker % threads;
    if (same_batch(tl.ops, i - 1, i)) {
      mine[k].back().ev_end++;
    } else {
      const auto n = static_cast<uint32_t>(evs[k].size());
      mine[k].push_back(Item{&o, n, n + (o.kind == Kind::kLookup || o.kind == Kind::kInsert ? 0u : 1u)});
    }
    if (o.kind != Kind::kLookup && o.kind != Kind::kInsert)
      evs[k].push_back(kv::IndexEvent{o.kind == Kind::kStored    ? kv::BlockEvent::Kind::kStored
                                      : o.kind == Kind::kRemoved ? kv::BlockEvent::Kind::kRemoved
                                                                 : kv::BlockEvent::Kind::kCleared,
                                      o.worker, std::span<const uint64_t>(tl.hashes.data() + o.off, o.len)});
  }
  std::vector<std::vector<uint32_t>> lat(threads);  // ns
  std::vector<double> cpu(threads);
  uint64_t checksum = 0;
  using clk = std::chrono::steady_clock;
  const double t0_ms = tl.ops.empty() ? 0 : tl.ops.front().t_ms;
  const auto start = clk::now() + std::chrono::milliseconds(2);
  auto run = [&](uint32_t k) {
    std::vector<uint32_t> out(tl.workers);
    lat[k].reserve(mine[k].size());
    const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    auto now = clk::now();
    for (const Item& it : mine[k]) {
      const Op* o = it.op;
      const auto due = start + std::chrono::nanoseconds(static_cast<int64_t>((o->t_ms - t0_ms) * 1e6 / c));
      while (now < due) now = clk::now();  // spin: one thread is one busy core
      if (o->kind == Kind::kLookup) {
        // Its own latency, from its start: behind schedule `now` is an earlier lookup's end, and
        // counting from there added the event batches applied since (p99 14-22 us, 1.5 before).
        const auto before = clk::now();
        {
          std::lock_guard lk(mu);
          ix.overlaps({tl.hashes.data() + o->off, o->len}, o->t_ms, out);
        }
        const auto after = clk::now();
        lat[k].push_back(static_cast<uint32_t>(std::min<int64_t>((after - before).count(), UINT32_MAX)));
        now = after;
        if (threads == 1) checksum = mix(checksum, out);
      } else if (it.ev_end > it.ev_begin) {
        std::lock_guard lk(mu);
        ix.apply_events(std::span(evs[k]).subspan(it.ev_begin, it.ev_end - it.ev_begin), o->t_ms);
      } else {
        std::lock_guard lk(mu);
        apply(ix, tl, *o);
      }
    }
    cpu[k] = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
  };
  std::vector<std::thread> pool;
  for (uint32_t k = 1; k < threads; ++k) pool.emplace_back(run, k);
  run(0);
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(clk::now() - start).count();
  Step s;
  s.offered = static_cast<double>(tl.ops.size()) / (tl.span_ms / c / 1000.0);
  s.achieved = static_cast<double>(tl.ops.size()) / wall;
  std::vector<uint32_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  if (!all.empty()) {
    std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
    s.p50_us = all[all.size() / 2] / 1e3;
    std::nth_element(all.begin(), all.begin() + all.size() * 99 / 100, all.end());
    s.p99_us = all[all.size() * 99 / 100] / 1e3;
  }
  for (double x : cpu) s.cpu_s += x;
  s.checksum = checksum;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The sweep: compression doubles from the one offering `start_rate` until achieved has stayed
// below 90 % of offered for two steps (or 12 steps). Each step is the median of `passes`
// replays. Returns the per-core figure: the highest median of operations per CPU-second of the
// replaying threads (a thread spins while early, so below saturation this is lower; at
// saturation it is the core's throughput, which a shared machine's preemption does not change).
// Exits 1 on a checksum mismatch.
double sweep(const Timeline& tl, bool events, const Args& a, uint32_t threads, uint64_t want) {
  const char* mode = events ? "event-fed" : "approximate";
  std::printf("%s, %u thread%s sharing one index under one mutex, %s:\n", mode, threads, threads == 1 ? "" : "s",
              a.warm ? "tables at working size (filled and cleared before each replay)" : "from a new index");
  std::printf("  %12s %14s %14s %9s %9s %14s\n", "compression", "offered ops/s", "achieved ops/s", "p50 us", "p99 us",
              "ops per CPU-s");
  double c = a.start_rate * tl.span_ms / 1000.0 / static_cast<double>(tl.ops.size());
  double best = 0, best_cpu = 0;
  int saturated = 0;
  for (int step = 0; step < 12 && saturated < 2; ++step, c *= 2) {
    std::vector<double> ach, p50, p99, per_cpu;
    double offered = 0;
    for (int p = 0; p < a.passes; ++p) {
      const Step s = replay(tl, events, c, threads, a.warm);
      if (threads == 1 && a.check && s.checksum != want) {
        std::printf("MISMATCH: %s replay's overlaps differ from the checked pass\n", mode);
        std::exit(1);
      }
      offered = s.offered;
      ach.push_back(s.achieved);
      p50.push_back(s.p50_us);
      p99.push_back(s.p99_us);
      per_cpu.push_back(static_cast<double>(tl.ops.size()) / s.cpu_s);
    }
    const double m = median(ach);
    best = std::max(best, m);
    best_cpu = std::max(best_cpu, median(per_cpu));  // ops / CPU-seconds of all the threads: per core
    std::printf("  %12.0f %14.0f %14.0f %9.2f %9.2f %14.0f\n", c, offered, m, median(p50), median(p99),
                median(per_cpu));
    saturated = m < 0.9 * offered ? saturated + 1 : 0;
  }
  std::printf(
      "  %s, %u thread%s: achieved stops tracking offered at %.0f ops/s (wall); %.0f ops per CPU-second (per core)\n",
      mode, threads, threads == 1 ? "" : "s", best, best_cpu);
  return best_cpu;
}

bool parse(int argc, char** argv, Args& a) {
  if (argc < 2) return false;
  a.trace = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (v < 0 || (v == 0 && f != "--check" && f != "--cold" && f != "--approximate")) return false;
    if (f == "--workers") a.workers = static_cast<uint32_t>(v);
    else if (f == "--copies") a.copies = static_cast<uint32_t>(v);
    else if (f == "--passes") a.passes = static_cast<int>(v);
    else if (f == "--threads") a.threads = static_cast<uint32_t>(v);
    else if (f == "--rows") a.rows = static_cast<size_t>(v);
    else if (f == "--start-rate") a.start_rate = v;
    else if (f == "--check" && (v == 0 || v == 1)) a.check = v == 1;
    else if (f == "--cold" && (v == 0 || v == 1)) a.warm = v == 0;
    else if (f == "--approximate" && (v == 0 || v == 1)) a.approximate = v == 1;
    else return false;
  }
  return argc % 2 == 0 && a.workers > 0 && a.copies > 0 && a.threads > 0;
}

}  // namespace

// The memory anchor: what this machine's memory allows an index of this size. Random 16-byte
// cell updates (the event-fed index's cell: a sequence hash and its holder bits) in a table of
// `cells` cells, prefetched 32 ahead as PrefixIndex does, in runs of `run` cells with nothing in
// flight between runs (an op: its blocks' cells are known when it starts, the next op's are not).
// Returns ns per cell, the median of 3 passes of 4 million updates.
double memory_anchor_ns(size_t cells, size_t run) {
  struct Cell {
    uint64_t key, bits;
  };
  kv::HugeArray<Cell> t(cells);  // on huge pages, as the index's table
  for (size_t i = 0; i < cells; ++i) t[i] = Cell{i * 0x9E3779B97F4A7C15ull, 0};
  std::mt19937_64 rng(7);
  std::vector<uint32_t> idx(4'000'000);
  for (auto& x : idx) x = static_cast<uint32_t>(rng() % cells);
  constexpr size_t kAhead = 32;
  std::vector<double> ns;
  uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t b = 0; b < idx.size(); b += run) {
      const size_t e = std::min(idx.size(), b + run);
      for (size_t i = b; i < e && i < b + kAhead; ++i) __builtin_prefetch(&t[idx[i]], 1);
      for (size_t i = b; i < e; ++i) {
        if (i + kAhead < e) __builtin_prefetch(&t[idx[i + kAhead]], 1);
        Cell& c = t[idx[i]];
        c.bits |= uint64_t{1} << (i & 63);
        sink += c.key;
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                 static_cast<double>(idx.size()));
  }
  if (sink == 42) std::printf(" ");  // keeps the loads
  return median(ns);
}

// The memory's latency: ns per hop of a pointer chase through a table of `cells` 16-byte cells
// in one random cycle (each load waits for the one before), the median of 3 passes of 2 million
// hops. An op whose cells start loading only when it starts waits at least this long.
double memory_latency_ns(size_t cells) {
  // Cell i's first word holds the next cell's index (16-byte cells on huge pages, as the index's).
  kv::HugeArray<uint64_t> next(cells * 2);
  std::vector<uint32_t> order(cells);
  for (size_t i = 0; i < cells; ++i) order[i] = static_cast<uint32_t>(i);
  std::mt19937_64 rng(11);
  for (size_t i = cells - 1; i > 0; --i) std::swap(order[i], order[rng() % i]);  // Sattolo: one cycle
  for (size_t i = 0; i < cells; ++i) next[2 * order[i]] = order[(i + 1) % cells];
  std::vector<double> ns;
  uint64_t at = 0;
  constexpr size_t kHops = 2'000'000;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t h = 0; h < kHops; ++h) at = next[2 * at];
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kHops);
  }
  if (at == cells) std::printf(" ");  // keeps the chase
  return median(ns);
}

// The event-fed index's table size after the timeline: cells for its peak distinct blocks at the
// map's 50 % maximum load, a power of two (FlatMaskMap's growth rule); the peak is sampled every
// 1,024 ops of one unthrottled pass.
size_t table_cells(const Timeline& tl) {
  kv::PrefixIndex ix(index_config(true));
  ix.set_worker_count(tl.workers);
  uint64_t peak = 0;
  for (size_t i = 0; i < tl.ops.size(); ++i) {
    apply(ix, tl, tl.ops[i]);
    if (i % 1024 == 0) peak = std::max(peak, ix.distinct_blocks());
  }
  size_t cells = 16;
  while (cells < 2 * peak) cells *= 2;
  return cells;
}

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: index_throughput_bench TRACE.jsonl[.gz] [--workers N] [--copies C] [--passes P] "
                 "[--threads T] [--rows R] [--start-rate OPS] [--check 0|1] [--cold 0|1] [--approximate 0|1]\n");
    return 2;
  }
  records::WorkloadOptions wo;
  wo.block_size = records::kMooncakeBlockSize;
  auto wl = records::load_workload({a.trace}, wo);
  if (!wl.ok()) {
    std::fprintf(stderr, "index_throughput_bench: %s\n", wl.errors.front().c_str());
    return 3;
  }
  std::vector<Row> rows;
  for (auto& r : wl.rows) {
    if (a.rows && rows.size() == a.rows) break;
    rows.push_back(Row{r.timestamp_ms.value_or(0), r.input_length, r.output_length.value_or(1),
                       tokens::sequence_from_ids(r.hash_ids, wl.block_size, false, r.input_length, wl.block_size)});
  }
  int rc = 0;
  for (bool events : {true, false}) {
    if (!events && !a.approximate) break;
    const Timeline tl = build_timeline(rows, a, events);
    uint64_t bad = 0;
    const uint64_t want = a.check ? check(tl, events, &bad) : 0;
    std::printf(
        "%s timeline: %zu rows over %u workers x %u copies, span %.1f s; %zu ops: %llu lookups (mean %.1f "
        "blocks), %llu stored (%llu blocks), %llu removed (%llu blocks), %llu cleared (events in %llu batches, "
        "a worker's step each), %llu inserts; engine rejected %llu\n",
        events ? "event-fed" : "approximate", rows.size(), a.workers, a.copies, tl.span_ms / 1000.0, tl.ops.size(),
        static_cast<unsigned long long>(tl.lookups),
        tl.lookups ? static_cast<double>(tl.lookup_blocks) / static_cast<double>(tl.lookups) : 0.0,
        static_cast<unsigned long long>(tl.stored), static_cast<unsigned long long>(tl.stored_blocks),
        static_cast<unsigned long long>(tl.removed), static_cast<unsigned long long>(tl.removed_blocks),
        static_cast<unsigned long long>(tl.cleared), static_cast<unsigned long long>(tl.batches),
        static_cast<unsigned long long>(tl.inserts), static_cast<unsigned long long>(tl.rejected / a.copies));
    if (a.check)
      std::printf("check %s: %llu lookups x %u workers against the naive reference index, %llu mismatches\n",
                  events ? "event-fed" : "approximate", static_cast<unsigned long long>(tl.lookups), tl.workers,
                  static_cast<unsigned long long>(bad));
    if (bad) rc = 1;
    if (events) {
      // Per op, its blocks: a lookup's, or a batch's (a worker's step, applied in one call).
      const auto all_blocks = static_cast<double>(tl.lookup_blocks + tl.stored_blocks + tl.removed_blocks);
      const double blocks = all_blocks / static_cast<double>(tl.lookups + tl.batches);
      const double per_op = all_blocks / static_cast<double>(tl.ops.size());
      const size_t cells = table_cells(tl);
      const double ns = memory_anchor_ns(cells, static_cast<size_t>(blocks + 0.5));
      const double lat = memory_latency_ns(cells);
      std::printf(
          "anchor memory: random 16-byte cell updates in a %.0f MB table (the index's, %zu cells), prefetched 32 "
          "ahead in runs of %.0f (the blocks of a lookup or an event batch): %.1f ns each; at %.1f blocks per op "
          "the memory alone allows %.0f ops/s per core when ops overlap\n",
          static_cast<double>(cells) * 16 / 1048576.0, cells, blocks, ns, per_op, 1e9 / (ns * per_op));
      std::printf(
          "anchor memory: latency %.0f ns (pointer chase through that table): one op at a time, its cells loading "
          "only once it starts, waits at least that long: at most %.0f ops/s per core\n",
          lat, 1e9 / lat);
    }
    const double one = sweep(tl, events, a, 1, want);
    if (a.threads > 1) sweep(tl, events, a, a.threads, want);
    std::printf("RESULT %s ops_per_core=%.0f\n", events ? "event_fed" : "approximate", one);
  }
  return rc;
}
