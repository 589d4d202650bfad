// The admission-control flags (SPEC 9) shared by dyn-route serve and dyn-replay --sim; names,
// environment variables and defaults follow Dynamo's ThunderAgent router.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "dyn/base/defaults.h"
#include "dyn/base/error.h"
#include "dyn/cli/choices.h"
#include "dyn/route/admission.h"

namespace dyn::cmd {

using cli::choice_names;
using cli::choices_help;

/// Parsed admission flags: the config (its defaults, route::AdmissionConfig's, are the ones --help
/// shows) and `kv_blocks`, 0 meaning "from the engine settings" (the simulator) or SPEC 8's
/// 16,384 (serve).
struct AdmissionFlags {
  route::AdmissionConfig config;
  uint64_t kv_blocks = 0;
};

/// Adds `--admission none|thunderagent` and its thresholds to `app` in an "Admission" group.
/// Flags win over environment variables (CLI11 envname), which win over SPEC 9 defaults.
/// `with_kv_blocks` adds `--admission-kv-blocks` (serve: the workers' KV blocks are not known
/// to the router).
inline void add_admission_flags(CLI::App& app, AdmissionFlags& f, bool with_kv_blocks) {
  const std::string g = "Admission (SPEC 9)";
  auto& c = f.config;
  cli::add_choice(app, "--admission", c.mode, route::kAdmissionModes,
                  "Program-aware admission: " + choices_help(route::kAdmissionModes, ", "))
      ->envname("DYN_ROUTER_ADMISSION")
      ->group(g);
  app.add_option("--pause-threshold", c.pause_threshold,
                 "Worker utilisation (fraction of KV capacity) that starts a pause cycle")
      ->envname("DYN_THUNDERAGENT_PAUSE_THRESHOLD")
      ->capture_default_str()
      ->group(g);
  app.add_option("--pause-target", c.pause_target, "Utilisation a pause cycle drains a worker down to")
      ->envname("DYN_THUNDERAGENT_PAUSE_TARGET")
      ->capture_default_str()
      ->group(g);
  app.add_option("--soft-demote-threshold", c.soft_demote_threshold,
                 "Start of the soft-demote band below --pause-threshold (programs there get lower queue priority)")
      ->envname("DYN_THUNDERAGENT_SOFT_DEMOTE_THRESHOLD")
      ->capture_default_str()
      ->group(g);
  app.add_option("--soft-demote-priority-jump", c.soft_demote_priority_jump_s,
                 "Queue-priority hint (seconds, negative = later) for soft-demoted programs")
      ->envname("DYN_THUNDERAGENT_SOFT_DEMOTE_PRIORITY_JUMP")
      ->capture_default_str()
      ->group(g);
  app.add_option("--resume-priority-boost", c.resume_priority_boost_s,
                 "Queue-priority hint (seconds) for the first request after a resume")
      ->envname("DYN_THUNDERAGENT_RESUME_PRIORITY_BOOST")
      ->capture_default_str()
      ->group(g);
  app.add_option("--resume-hysteresis", c.resume_hysteresis,
                 "Resume packs programs below (--pause-threshold minus this) of capacity")
      ->envname("DYN_THUNDERAGENT_RESUME_HYSTERESIS")
      ->capture_default_str()
      ->group(g);
  app.add_option("--resume-timeout-seconds", c.resume_timeout_s,
                 "Longest wait of a paused program's request before it is forced onto the worker with most headroom")
      ->envname("DYN_THUNDERAGENT_RESUME_TIMEOUT_SECONDS")
      ->capture_default_str()
      ->group(g);
  app.add_option("--acting-token-weight", c.acting_token_weight,
                 "Weight of an ACTING program's tokens on the pause side")
      ->envname("DYN_THUNDERAGENT_ACTING_TOKEN_WEIGHT")
      ->capture_default_str()
      ->group(g);
  app.add_option("--acting-decay-tau-seconds", c.acting_decay_tau_s,
                 "Tau of the 2^(-t/tau) decay of ACTING tokens on the resume side")
      ->envname("DYN_THUNDERAGENT_ACTING_DECAY_TAU_SECONDS")
      ->capture_default_str()
      ->group(g);
  app.add_option("--scheduler-interval-seconds", c.scheduler_interval_s, "Period of the pause/resume scheduler tick")
      ->envname("DYN_THUNDERAGENT_SCHEDULER_INTERVAL_SECONDS")
      ->capture_default_str()
      ->group(g);
  app.add_option("--admission-buffer-tokens", c.buffer_tokens_per_program,
                 "Decode headroom counted per active program (tokens)")
      ->envname("DYN_THUNDERAGENT_BUFFER_TOKENS")
      ->capture_default_str()
      ->group(g);
  if (with_kv_blocks)
    app.add_option("--admission-kv-blocks", f.kv_blocks,
                   "KV blocks per worker for admission capacity (x --kv-cache-block-size); default " +
                       std::to_string(kDefaultKvBlocks))
        ->envname("DYN_THUNDERAGENT_KV_BLOCKS")
        ->group(g);
}

/// The validated config. Throws Fatal(kExitUsage) naming the bad flag.
inline route::AdmissionConfig admission_config(const AdmissionFlags& f) {
  if (auto e = f.config.validate(); !e.empty()) throw Fatal(kExitUsage, e);
  return f.config;
}

}  // namespace dyn::cmd
