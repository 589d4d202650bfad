// Router flags shared by dyn-route (decide, serve) and dyn-replay --sim: one table, flag > env > default.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/route/config.h"

namespace dyn::cmd {

using cli::choice_names;
using cli::choices_help;

/// Values of the router flags (SPEC 2.1, 3.1-3.3; docs/cli.md "Router flags"). Every flag falls back to
/// an environment variable DYN_ROUTER_* (CLI11 envname: a flag wins over the environment, the
/// environment over the default). Out-of-range values are usage errors (exit 2) before anything
/// runs, whether they come from a flag or the environment.
struct RouterFlags {
  /// Settings are bound straight into the config (its defaults are the ones --help shows); only
  /// the two optional thresholds need a CLI-side representation.
  route::RouterConfig cfg;
  double active_decode_blocks_threshold = -1;        // < 0 = unset
  int64_t active_prefill_tokens_threshold = -1;      // < 0 = unset
  double active_prefill_tokens_threshold_frac = -1;  // < 0 = unset
  int64_t active_requests_threshold = 0;             // 0 = unset
  double shared_cache_multiplier = -1;               // < 0 = unset (0.5 with a pool)
  CLI::Option* block_size_opt = nullptr;

  /// True when --kv-cache-block-size (or its environment variable) was given.
  bool block_size_given() const { return block_size_opt && block_size_opt->count() > 0; }

  /// The RouterConfig these flags describe (seed from the tool's own --seed). Fatal (exit 2) when
  /// it is not valid (RouterConfig::validate), before anything is read or bound: e.g.
  /// --router-kv-events with a mode that never reads the KV index.
  route::RouterConfig config(uint64_t seed = 0) const {
    route::RouterConfig c = cfg;
    if (active_decode_blocks_threshold >= 0) c.active_decode_blocks_threshold = active_decode_blocks_threshold;
    if (active_prefill_tokens_threshold >= 0)
      c.active_prefill_tokens_threshold = static_cast<uint64_t>(active_prefill_tokens_threshold);
    if (active_prefill_tokens_threshold_frac >= 0)
      c.active_prefill_tokens_threshold_frac = active_prefill_tokens_threshold_frac;
    if (active_requests_threshold > 0) c.active_requests_threshold = static_cast<uint64_t>(active_requests_threshold);
    if (shared_cache_multiplier >= 0) c.shared_cache_multiplier = shared_cache_multiplier;
    c.seed = seed;
    if (auto e = c.validate()) throw Fatal(e->exit_code, e->message);
    return c;
  }
};

/// Registers every router flag on `app` (a tool or a subcommand), in the "Router" group.
inline void add_router_flags(CLI::App& app, RouterFlags& f) {
  const char* g = "Router";
  cli::add_choice(app, "--router-mode", f.cfg.mode, route::kModes,
                  "Routing policy: " + choices_help(route::kModes, ", "))
      ->envname("DYN_ROUTER_MODE")
      ->group(g);
  app.add_option("--router-session-affinity-ttl-secs", f.cfg.affinity_ttl_secs,
                 "Bind each session to one worker; the binding expires after this many idle seconds (1.." +
                     std::to_string(route::kMaxAffinityTtlSecs) + "); unset = affinity off")
      ->envname("DYN_ROUTER_SESSION_AFFINITY_TTL_SECS")
      ->check(CLI::Range(1u, route::kMaxAffinityTtlSecs))
      ->type_name("SECS")
      ->group(g);
  app.add_option("--router-max-bindings", f.cfg.max_bindings,
                 "Live session bindings kept at most (SPEC 2.1); a new session beyond it gets HTTP 503")
      ->envname("DYN_ROUTER_MAX_BINDINGS")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str()
      ->group(g);
  cli::add_choice(app, "--router-session-affinity-mode", f.cfg.affinity_mode, route::kAffinityModes,
                  choices_help(route::kAffinityModes, "; ", ": "))
      ->envname("DYN_ROUTER_SESSION_AFFINITY_MODE")
      ->group(g);
  f.block_size_opt = app.add_option("--kv-cache-block-size", f.cfg.block_size,
                                    "Router KV block size in tokens; must equal the workers' block size")
                         ->envname("DYN_ROUTER_KV_CACHE_BLOCK_SIZE")
                         ->check(CLI::Range(1u, 1u << 20))
                         ->capture_default_str()
                         ->group(g);
  app.add_option("--kv-overlap-score-weight,--router-kv-overlap-score-weight", f.cfg.overlap_score_weight,
                 "Weight of prefill blocks in cost = weight x prefill_blocks + decode_blocks (0 = load only)")
      ->envname("DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-temperature", f.cfg.temperature,
                 "Softmax temperature over normalized costs; 0 = lowest cost (ties: fewest cached blocks, then seeded)")
      ->envname("DYN_ROUTER_TEMPERATURE")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-ttl-secs", f.cfg.kv_ttl_secs,
                 "Approximate KV index: seconds a routed block is assumed cached without reuse")
      ->envname("DYN_ROUTER_TTL_SECS")
      ->check(CLI::Range(0.001, 1e9))
      ->capture_default_str()
      ->group(g);
  app.add_flag("--router-kv-events,!--no-router-kv-events", f.cfg.kv_events,
               "Feed the KV index from worker KV events (stored/removed/cleared) instead of predicting it")
      ->envname("DYN_ROUTER_USE_KV_EVENTS")
      ->group(g);
  app.add_option("--host-cache-hit-weight,--router-host-cache-hit-weight", f.cfg.host_cache_hit_weight,
                 "Overlap credit of a block on a worker's host (CPU) tier, as a fraction of a GPU block's (0 and "
                 "--disk-cache-hit-weight 0 = GPU-only credit)")
      ->envname("DYN_ROUTER_HOST_CACHE_HIT_WEIGHT")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->group(g);
  app.add_option("--disk-cache-hit-weight,--router-disk-cache-hit-weight", f.cfg.disk_cache_hit_weight,
                 "Overlap credit of a block on a worker's disk tier, as a fraction of a GPU block's")
      ->envname("DYN_ROUTER_DISK_CACHE_HIT_WEIGHT")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->group(g);
  cli::add_choice(app, "--shared-cache-type", f.cfg.shared_cache_type, route::kSharedCacheTypes,
                  "Shared KV pool credited by the cost model: " + choices_help(route::kSharedCacheTypes, "; ", ": "))
      ->envname("DYN_SHARED_CACHE_TYPE")
      ->group(g);
  app.add_option("--shared-cache-multiplier", f.shared_cache_multiplier,
                 "Credit of a shared-pool block past a worker's GPU run, as a fraction of a GPU block's (0-1; "
                 "default 0.5 with a pool)")
      ->envname("DYN_SHARED_CACHE_MULTIPLIER")
      ->check(CLI::Range(0.0, 1.0))
      ->type_name("FRACTION")
      ->group(g);
  app.add_option("--router-host-ttl-secs", f.cfg.host_ttl_secs,
                 "Approximate KV index: seconds a routed block is predicted on the worker's host tier since its "
                 "last use (> --router-ttl-secs); 0 = not predicted")
      ->envname("DYN_ROUTER_HOST_TTL_SECS")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-disk-ttl-secs", f.cfg.disk_ttl_secs,
                 "Approximate KV index: seconds a routed block is predicted on the worker's disk tier (> the host "
                 "TTL); 0 = not predicted")
      ->envname("DYN_ROUTER_DISK_TTL_SECS")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-host-max-tree-size", f.cfg.host_max_tree_size,
                 "Approximate KV index: predicted host-tier budget per worker in blocks (0 = the TTL only)")
      ->envname("DYN_ROUTER_HOST_MAX_TREE_SIZE")
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-disk-max-tree-size", f.cfg.disk_max_tree_size,
                 "Approximate KV index: predicted disk-tier budget per worker in blocks (0 = the TTL only)")
      ->envname("DYN_ROUTER_DISK_MAX_TREE_SIZE")
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-max-tree-size", f.cfg.max_tree_size,
                 "Approximate KV index budget per worker in blocks (0 = --router-worker-kv-blocks)")
      ->envname("DYN_ROUTER_MAX_TREE_SIZE")
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-prune-target-ratio", f.cfg.prune_target_ratio,
                 "When a worker's index exceeds its budget, prune least-recently-used blocks to this fraction")
      ->envname("DYN_ROUTER_PRUNE_TARGET_RATIO")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str()
      ->group(g);
  app.add_option("--router-worker-kv-blocks", f.cfg.worker_kv_blocks,
                 "KV capacity of each worker in router blocks (base of --active-decode-blocks-threshold)")
      ->envname("DYN_ROUTER_WORKER_KV_BLOCKS")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str()
      ->group(g);
  app.add_option("--active-decode-blocks-threshold", f.active_decode_blocks_threshold,
                 "A worker is busy when its active blocks exceed this fraction (0-1) of its KV blocks; unset = never")
      ->envname("DYN_ROUTER_ACTIVE_DECODE_BLOCKS_THRESHOLD")
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->type_name("FRACTION")
      ->group(g);
  app.add_option("--active-prefill-tokens-threshold", f.active_prefill_tokens_threshold,
                 "A worker is busy when its prefill tokens in flight exceed this; unset = never")
      ->envname("DYN_ROUTER_ACTIVE_PREFILL_TOKENS_THRESHOLD")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->type_name("TOKENS")
      ->group(g);
  app.add_option("--active-prefill-tokens-threshold-frac", f.active_prefill_tokens_threshold_frac,
                 "A worker is busy when its prefill tokens in flight exceed this times its step budget (8192, SPEC "
                 "8); unset = never")
      ->envname("DYN_ROUTER_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC")
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.0, 1e6))
      ->type_name("FRACTION")
      ->group(g);
  app.add_option("--active-requests-threshold", f.active_requests_threshold,
                 "A worker is busy while this many requests are in flight on it; unset = never")
      ->envname("DYN_ROUTER_ACTIVE_REQUESTS_THRESHOLD")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->type_name("N")
      ->group(g);
}

}  // namespace dyn::cmd
