// The engine flags of dyn-mocker (docs/cli.md, SPEC 8 defaults), shared with `dyn-replay --sim` and
// dyn-bench fidelity.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/engine/config.h"
#include "dyn/engine/profile.h"

namespace dyn::cmd {

/// Help of --perf-profile: what the default is and what a profile may be (SPEC 8).
inline const char* const kPerfProfileHelp =
    "Step timing from a profile of real hardware: a Dynamo profiler directory or its two raw_data.npz files "
    "(A.npz,B.npz), the mocker's converted .npz, or dyn's JSON profile (dyn-bench calibrate -o); its engine "
    "settings apply unless given here. Default: Dynamo's mocker polynomial, a fit of one H200 running "
    "Llama-3.1-8B-Instruct-FP8 at TP1 on vLLM";

/// What the engine flags need once parsing is done: the profile to load, the memory budget, and
/// which settings the command line gave (those win over the profile's).
struct EngineFlags {
  std::string perf_profile;
  double gpu_memory_gib = 0, gpu_memory_utilization = 0.9, reserved_memory_gib = 0;
  const CLI::Option *block_size = nullptr, *num_blocks = nullptr, *max_num_seqs = nullptr, *max_batched = nullptr,
                    *chunked = nullptr, *interval = nullptr, *partial = nullptr, *kv_bytes = nullptr, *g2 = nullptr;
  std::vector<const CLI::Option*> tier_tuning;  // --offload-batch-size, --bandwidth-*: need --num-g2-blocks

  static bool given(const CLI::Option* o) { return o && o->count() > 0; }

  /// Loads --perf-profile into `cfg.profile` and fills from its engine settings those the command
  /// line did not give; sizes the KV pool from --gpu-memory-gib when given; validates. With
  /// `router_block_size` (dyn-replay --sim, whose engine block size is the router's
  /// --kv-cache-block-size): that size, unless it was not given and the profile names one, which
  /// then serves both. Throws Fatal: the profile's error (kExitBadData, naming file and key), or
  /// kExitUsage for bad settings.
  void finish(engine::EngineConfig& cfg, std::optional<uint32_t> router_block_size = std::nullopt,
              bool router_block_size_given = false) const {
    const engine::ProfileEngine* pe = nullptr;
    if (!perf_profile.empty()) {
      auto p = engine::PerfProfile::load(perf_profile);
      if (!p) throw Fatal(p.error().exit_code, "--perf-profile " + p.error().message);
      cfg.profile = *p;
      pe = &cfg.profile->engine();
    }
    if (router_block_size)
      cfg.block_size = !router_block_size_given && pe && pe->block_size ? *pe->block_size : *router_block_size;
    else if (!given(block_size) && pe && pe->block_size) cfg.block_size = *pe->block_size;
    if (pe) {
      if (!given(max_num_seqs) && pe->max_num_seqs) cfg.max_num_seqs = *pe->max_num_seqs;
      if (!given(max_batched) && pe->max_num_batched_tokens) cfg.max_num_batched_tokens = *pe->max_num_batched_tokens;
      if (!given(chunked) && pe->enable_chunked_prefill) cfg.enable_chunked_prefill = *pe->enable_chunked_prefill;
      if (!given(interval) && pe->prefill_schedule_interval)
        cfg.prefill_schedule_interval = *pe->prefill_schedule_interval;
      if (!given(partial) && pe->max_num_partial_prefills) cfg.max_num_partial_prefills = *pe->max_num_partial_prefills;
      if (!given(num_blocks) && pe->num_gpu_blocks) cfg.num_blocks = *pe->num_gpu_blocks;
      else if (!given(num_blocks) && pe->kv_tokens)
        cfg.num_blocks = std::max<uint64_t>(1, *pe->kv_tokens / cfg.block_size);
    }
    // A tier half given is refused (Dynamo's mocker silently runs without offload, SPEC 8.7).
    if (auto err = cfg.tiers.validate(cfg.kv_bytes_per_token); !err.empty()) throw Fatal(kExitUsage, err);
    if (given(kv_bytes) && gpu_memory_gib <= 0 && !given(g2))
      throw Fatal(kExitUsage,
                  "--kv-bytes-per-token needs --gpu-memory-gib (to size the KV pool) or --num-g2-blocks (to time "
                  "KV tier transfers)");
    for (const CLI::Option* o : tier_tuning)
      if (given(o) && !cfg.tiers.enabled())
        throw Fatal(kExitUsage, o->get_name() + " needs --num-g2-blocks: it tunes the KV tiers below the GPU");
    if (gpu_memory_gib > 0) {
      auto b = engine::kv_blocks_for_memory(gpu_memory_gib, gpu_memory_utilization, reserved_memory_gib,
                                            cfg.kv_bytes_per_token, cfg.block_size);
      if (!b) throw Fatal(b.error().exit_code, b.error().message);
      cfg.num_blocks = *b;
    }
    if (auto err = cfg.validate(); !err.empty()) throw Fatal(kExitUsage, err);
  }
};

/// A profile's engine settings for an end model that only estimates (dyn-route decide): its block
/// size, KV pool and per-step token budget (the prefill chunk), each unless its flag was given.
template <class EndModel>
void apply_profile_to_end_model(const engine::PerfProfile& p, EndModel& m, bool block_size_given, bool blocks_given) {
  const engine::ProfileEngine& pe = p.engine();
  if (!block_size_given && pe.block_size) m.block_size = *pe.block_size;
  if (!blocks_given && pe.num_gpu_blocks) m.kv_blocks = *pe.num_gpu_blocks;
  else if (!blocks_given && pe.kv_tokens) m.kv_blocks = std::max<uint64_t>(1, *pe.kv_tokens / m.block_size);
  if (pe.max_num_batched_tokens) m.max_batched_tokens = *pe.max_num_batched_tokens;
}

/// The KV tier flags (SPEC 8.7), named as Dynamo's mocker names them (kvbm_offload/config.rs,
/// docs/mocker); --num-g4-blocks is dyn's (Dynamo's G4 object store has no size).
inline void add_tier_flags(CLI::App& app, engine::TierConfig& t, EngineFlags& f, const std::string& group) {
  const std::string tg = group + " KV tiers";
  f.g2 = app.add_option("--num-g2-blocks", t.g2_blocks,
                        "G2 host-memory KV blocks per engine: G1 evictions are copied there and onboarded back "
                        "before prefill (needs --kv-bytes-per-token; 0 = no tiers)")
             ->group(tg);
  app.add_option("--num-g3-blocks", t.g3_blocks,
                 "G3 local-disk KV blocks per engine, written through from G2 (0 = none; needs --num-g2-blocks)")
      ->group(tg);
  app.add_option("--num-g4-blocks", t.g4_blocks,
                 "G4 KV blocks of a pool shared by every engine of the process (dyn-replay --sim: all workers), "
                 "written through from G2 (0 = none; needs --num-g2-blocks)")
      ->group(tg);
  f.tier_tuning.push_back(
      app.add_option("--offload-batch-size", t.offload_batch_size, "G1 evictions copied to G2 per transfer")
          ->capture_default_str()
          ->check(dyn::cli::positive())
          ->group(tg));
  struct Bw {
    const char* name;
    double* v;
  };
  for (Bw b : {Bw{"--bandwidth-g1-to-g2-gbps", &t.g1_to_g2_gbps}, Bw{"--bandwidth-g2-to-g1-gbps", &t.g2_to_g1_gbps},
               Bw{"--bandwidth-g2-to-g3-gbps", &t.g2_to_g3_gbps}, Bw{"--bandwidth-g3-to-g2-gbps", &t.g3_to_g2_gbps},
               Bw{"--bandwidth-g2-to-g4-gbps", &t.g2_to_g4_gbps}, Bw{"--bandwidth-g4-to-g2-gbps", &t.g4_to_g2_gbps}})
    f.tier_tuning.push_back(app.add_option(b.name, *b.v,
                                           "Link bandwidth in GB/s (1e9 bytes/s), shared by the transfers in flight "
                                           "(each at B/N); 0 = unbounded")
                                ->capture_default_str()
                                ->check(CLI::NonNegativeNumber)
                                ->group(tg));
}

/// The bounds of the engine's KV hint leases (SPEC 8.6), as dyn-mocker names them.
inline void add_kv_hint_flags(CLI::App& app, engine::KvHintLimits& k, const std::string& group) {
  app.add_option("--kv-hint-max-pinned-fraction", k.max_pinned_fraction,
                 "Most of the KV pool that KV hint leases may pin at once (0 = refuse every kv.retain); a lease "
                 "beyond it is clipped root first, a more important one displaces less important ones")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  app.add_option("--kv-hint-max-ttl-s", k.max_ttl_s,
                 "Longest KV hint lease in seconds: a longer ttl_seconds is clipped to it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
}

/// Registers the engine flags on `app`, writing into `cfg` (whose current values are the
/// defaults shown) and `f` (call f.finish(cfg) before use). `with_block_size` adds --block-size
/// (dyn-mocker); dyn-replay --sim takes the engine block size from the router's
/// --kv-cache-block-size instead, so the two cannot disagree (and dyn-replay's own --block-size is
/// the workload's hash-id block size).
/// --speedup-ratio defaults to $DYN_MOCKER_SPEEDUP_RATIO when set (CLI11 envname: flag > environment >
/// default; a bad value is a usage error naming the variable).
inline void add_engine_flags(CLI::App& app, engine::EngineConfig& cfg, EngineFlags& f, bool with_block_size = true,
                             const std::string& group = "Engine") {
  app.add_option("--perf-profile", f.perf_profile, kPerfProfileHelp)->type_name("PATH")->group(group);
  if (with_block_size)
    f.block_size = app.add_option("--block-size", cfg.block_size, "Tokens per KV block (vLLM --block-size)")
                       ->capture_default_str()
                       ->check(dyn::cli::positive())
                       ->group(group);
  auto* blocks = app.add_option("--num-gpu-blocks-override", cfg.num_blocks, "KV blocks in each engine's pool")
                     ->capture_default_str()
                     ->check(dyn::cli::positive())
                     ->group(group);
  f.num_blocks = blocks;
  f.max_num_seqs = app.add_option("--max-num-seqs", cfg.max_num_seqs, "Most sequences running at once")
                       ->capture_default_str()
                       ->check(dyn::cli::positive())
                       ->group(group);
  f.max_batched = app.add_option("--max-num-batched-tokens", cfg.max_num_batched_tokens,
                                 "Token budget per engine step (prefill chunks + decodes)")
                      ->capture_default_str()
                      ->check(dyn::cli::positive())
                      ->group(group);
  f.interval = app.add_option("--prefill-schedule-interval", cfg.prefill_schedule_interval,
                              "Admit waiting requests (start new prefills) only every N steps while running ones "
                              "can decode, as vLLM's prefill_schedule_interval (1 = every step)")
                   ->capture_default_str()
                   ->check(dyn::cli::positive())
                   ->group(group);
  f.partial = app.add_option("--max-num-partial-prefills", cfg.max_num_partial_prefills,
                             "Most sequences computing prompt tokens in one step, as vLLM's max_num_partial_prefills "
                             "(0 = no limit)")
                  ->capture_default_str()
                  ->group(group);
  app.add_option("--long-prefill-token-threshold", cfg.long_prefill_token_threshold,
                 "A request with more prompt tokens left to compute than this is a long prefill and computes at "
                 "most this many per step, so requests behind it wait one short step (vLLM's option; 0 = off; "
                 "needs chunked prefill)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--speedup-ratio", cfg.speedup_ratio, "Divide every step time by this")
      ->envname("DYN_MOCKER_SPEEDUP_RATIO")
      ->capture_default_str()
      ->check(dyn::cli::positive())
      ->group(group);
  app.add_flag("!--no-prefix-caching", cfg.enable_prefix_caching, "Do not reuse cached KV blocks across requests")
      ->group(group);
  f.chunked = app.add_flag("!--no-chunked-prefill", cfg.enable_chunked_prefill,
                           "Prefill each prompt in one step instead of budget-sized chunks")
                  ->group(group);
  cli::add_choice(
      app, "--kv-eviction", cfg.kv_eviction, engine::kKvEvictions,
      "Which cached KV blocks go first when the pool is full: " + cli::choices_help(engine::kKvEvictions, "; ", ": "))
      ->group(group);
  // Priority scheduling in both engines' spellings and polarities (SPEC 8): vLLM's option, and
  // SGLang's switch with its own polarity flag (callbacks run in this order).
  CLI::Option* vllm = cli::add_choice(app, "--scheduling-policy", cfg.scheduling_policy, engine::kSchedulingPolicies,
                                      "How waiting requests are admitted (vLLM's option): " +
                                          cli::choices_help(engine::kSchedulingPolicies, "; ", ": "))
                          ->group(group);
  CLI::Option* sglang =
      app.add_flag_function(
             "--enable-priority-scheduling",
             [&cfg](int64_t) {
               cfg.scheduling_policy = engine::SchedulingPolicy::kPriority;
               cfg.low_priority_values_first = false;
             },
             "Admit waiting requests by the request's priority, higher values first (SGLang's switch)")
          ->excludes(vllm)
          ->group(group);
  app.add_flag_function(
         "--schedule-low-priority-values-first", [&cfg](int64_t) { cfg.low_priority_values_first = true; },
         "With --enable-priority-scheduling: lower priority values first (SGLang's flag)")
      ->needs(sglang)
      ->group(group);
  auto* kvb = app.add_option("--kv-bytes-per-token", cfg.kv_bytes_per_token,
                             "The model's KV cache size per token in bytes, all of one engine's GPUs together: with "
                             "--gpu-memory-gib it sizes the KV pool, with --num-g2-blocks it sizes tier transfers "
                             "(one of them is needed)")
                  ->check(dyn::cli::positive())
                  ->group(group);
  f.kv_bytes = kvb;
  add_tier_flags(app, cfg.tiers, f, group);
  auto* mem = app.add_option("--gpu-memory-gib", f.gpu_memory_gib,
                             "Size the KV pool from GPU memory, as vLLM: blocks = (GiB x --gpu-memory-utilization - "
                             "--reserved-memory-gib) / (--kv-bytes-per-token x block size); GiB of all of one "
                             "engine's GPUs")
                  ->check(CLI::PositiveNumber)
                  ->needs(kvb)
                  ->excludes(blocks)
                  ->group(group);
  app.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "Share of --gpu-memory-gib the engine may use (vLLM's gpu_memory_utilization)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0))
      ->needs(mem)
      ->group(group);
  app.add_option("--reserved-memory-gib", f.reserved_memory_gib,
                 "GiB of that budget that is not KV cache (weights, activations, CUDA graphs)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->needs(mem)
      ->group(group);
}

}  // namespace dyn::cmd
