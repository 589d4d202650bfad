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
                 "tool-ttl: expected tool wait of a session before it had one (then the moving average of its "
                 "own); the lease is 4x the expected wait")
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

/// Enables the policies `names` in `k`. A policy's setting without the policy would do nothing:
/// a usage error (Fatal, kExitUsage) naming the flag and the policy it needs.
inline void finish_kv_policy_flags(const CLI::App& app, kvpolicy::KvPolicyConfig& k,
                                   const std::vector<std::string>& names) {
  for (const auto& name : names) k.enable(*parse_in(kvpolicy::kKvPolicies, name));
  struct Needs {
    const char* flag;
    bool on;
    const char* policy;
  };
  for (Needs n : {Needs{"--kv-policy-tool-default-wait-s", k.tool_ttl, "tool-ttl"},
                  Needs{"--kv-policy-tool-max-wait-s", k.tool_ttl, "tool-ttl"},
                  Needs{"--kv-policy-parent-ttl-s", k.parent_retain, "parent-retain"}})
    if (!n.on && app.get_option(n.flag)->count() > 0)
      throw Fatal(kExitUsage, fmt::format("{} needs --kv-policy {}", n.flag, n.policy));
}

}  // namespace dyn::cmd
