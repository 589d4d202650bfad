// The router's KV retention policy flags (SPEC 6.4), one definition for `dyn-replay --sim` and
// `dyn-route serve`.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "dyn/base/error.h"
#include "dyn/cli/choices.h"
#include "dyn/kvpolicy/kv_policy.h"

namespace dyn::cmd {

/// Registers --kv-policy (names into `names`) and each policy's settings (into `k`, whose values
/// are the defaults shown) in `group`.
inline void add_kv_policy_flags(CLI::App& app, kvpolicy::KvPolicyConfig& k, std::vector<std::string>& names,
                                const std::string& group) {
  app.add_option("--kv-policy", names,
                 "KV retention policies the router applies, a comma-separated list: " +
                     cli::choices_help(kvpolicy::kKvPolicies, "; ", ": "))
      ->delimiter(',')
      ->check(CLI::IsMember(cli::choice_names(kvpolicy::kKvPolicies)))
      ->group(group);
  app.add_option("--kv-policy-tool-default-wait-s", k.tool_default_wait_s,
                 "tool-ttl, demote-prefetch: expected tool wait of a session before it had one (then the moving "
                 "average of its own); tool-ttl's lease is 4x the expected wait, demote-prefetch's prefetch lands "
                 "before it ends")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--kv-policy-tool-max-wait-s", k.tool_max_wait_s,
                 "tool-ttl: pin only when the expected tool wait is at most this (longer: recomputing is cheaper "
                 "than holding the blocks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--kv-policy-parent-ttl-s", k.parent_ttl_s, "parent-retain: the lease on the parent's blocks")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
}

/// dyn-route serve's demote-prefetch copy settings (SPEC 6.4: the copy time C), named as the
/// engine flags they mirror (dyn-mocker's and dyn-replay --sim's): the workers' values.
inline void add_kv_policy_copy_flags(CLI::App& app, kvpolicy::KvPolicyConfig& k, const std::string& group) {
  app.add_option("--bandwidth-g2-to-g1-gbps", k.g2_to_g1_gbps,
                 "demote-prefetch: the workers' G2 -> G1 link in GB/s (their --bandwidth-g2-to-g1-gbps; 0 = "
                 "unbounded): a turn's blocks take C to copy back, its wait must be 4C to demote them, and the "
                 "prefetch goes 2C before the predicted return")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app.add_option("--kv-bytes-per-token", k.kv_bytes_per_token,
                 "demote-prefetch: the workers' KV bytes per token (their --kv-bytes-per-token), for C")
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--speedup-ratio", k.speedup_ratio,
                 "demote-prefetch: the workers' --speedup-ratio (C is divided by it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
}

/// Enables the policies `names` in `k`. A policy's setting without the policy would do nothing:
/// a usage error (Fatal, kExitUsage) naming the flag and the policy it needs; so are tool-ttl
/// with demote-prefetch, and demote-prefetch in `serve` without --kv-bytes-per-token (SPEC 6.4:
/// its copy time needs the workers' block bytes; --sim has its engine's).
inline void finish_kv_policy_flags(const CLI::App& app, kvpolicy::KvPolicyConfig& k,
                                   const std::vector<std::string>& names, bool serve = false) {
  for (const auto& name : names) k.enable(*parse_in(kvpolicy::kKvPolicies, name));
  struct Needs {
    const char* flag;
    bool on;
    const char* policy;
  };
  for (Needs n :
       {Needs{"--kv-policy-tool-default-wait-s", k.tool_ttl || k.demote_prefetch, "tool-ttl or demote-prefetch"},
        Needs{"--kv-policy-tool-max-wait-s", k.tool_ttl, "tool-ttl"},
        Needs{"--kv-policy-parent-ttl-s", k.parent_retain, "parent-retain"}})
    if (!n.on && app.get_option(n.flag)->count() > 0)
      throw Fatal(kExitUsage, fmt::format("{} needs --kv-policy {}", n.flag, n.policy));
  if (serve)
    for (const char* flag : {"--bandwidth-g2-to-g1-gbps", "--kv-bytes-per-token", "--speedup-ratio"})
      if (!k.demote_prefetch && app.get_option(flag)->count() > 0)
        throw Fatal(kExitUsage, fmt::format("{} needs --kv-policy demote-prefetch", flag));
  if (serve && k.demote_prefetch && k.kv_bytes_per_token == 0)
    throw Fatal(kExitUsage,
                "--kv-policy demote-prefetch needs --kv-bytes-per-token (the workers': the time their blocks "
                "take between G2 and G1)");
  // Both act on the same tool wait: one keeps the blocks on G1, the other moves them off it.
  if (k.tool_ttl && k.demote_prefetch)
    throw Fatal(kExitUsage,
                "--kv-policy tool-ttl and demote-prefetch exclude each other (pin vs demote across a "
                "tool call)");
}

}  // namespace dyn::cmd
