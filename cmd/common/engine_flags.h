// The engine flags of dyn-mocker (docs/cli.md, SPEC 8 defaults), shared with `dyn-replay --sim`.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/engine/config.h"

namespace dyn::cmd {

/// Registers the engine flags on `app`, writing into `cfg` (whose current values are the
/// defaults shown). `with_block_size` adds --block-size (dyn-mocker); dyn-replay --sim takes the
/// engine block size from the router's --kv-cache-block-size instead, so the two cannot
/// disagree (and dyn-replay's own --block-size is the workload's hash-id block size).
/// --speedup-ratio defaults to $DYN_MOCKER_SPEEDUP_RATIO when set (CLI11 envname: flag > environment >
/// default; a bad value is a usage error naming the variable).
inline void add_engine_flags(CLI::App& app, engine::EngineConfig& cfg, bool with_block_size = true,
                             const std::string& group = "Engine") {
  if (with_block_size)
    app.add_option("--block-size", cfg.block_size, "Tokens per KV block")
        ->capture_default_str()
        ->check(dyn::cli::positive())
        ->group(group);
  app.add_option("--num-gpu-blocks-override", cfg.num_blocks, "KV blocks in each engine's pool")
      ->capture_default_str()
      ->check(dyn::cli::positive())
      ->group(group);
  app.add_option("--max-num-seqs", cfg.max_num_seqs, "Most sequences running at once")
      ->capture_default_str()
      ->check(dyn::cli::positive())
      ->group(group);
  app.add_option("--max-num-batched-tokens", cfg.max_num_batched_tokens,
                 "Token budget per engine step (prefill chunks + decodes)")
      ->capture_default_str()
      ->check(dyn::cli::positive())
      ->group(group);
  app.add_option("--speedup-ratio", cfg.speedup_ratio, "Divide every step time by this")
      ->envname("DYN_MOCKER_SPEEDUP_RATIO")
      ->capture_default_str()
      ->check(dyn::cli::positive())
      ->group(group);
  app.add_flag("!--no-prefix-caching", cfg.enable_prefix_caching, "Do not reuse cached KV blocks across requests")
      ->group(group);
  app.add_flag("!--no-chunked-prefill", cfg.enable_chunked_prefill,
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
}

}  // namespace dyn::cmd
