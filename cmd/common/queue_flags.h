// Router queue flags (SPEC 3.4) shared by dyn-route serve and dyn-replay --sim: the policy file,
// the default class's policy, and SGLang's router limits --queue-size and --queue-timeout-secs.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/route/queue.h"

namespace dyn::cmd {

/// Values of the router queue flags, as parsed.
struct QueueFlags {
  std::string policy_file;
  route::QueuePolicy policy = route::QueuePolicy::kFcfs;
  CLI::Option* policy_opt = nullptr;
  size_t size = 100;
  double timeout_s = 60;

  /// The queue these flags describe: the policy file's classes and defaults (Fatal, exit 3 or
  /// 4, when it cannot be read), else one class with --router-queue-policy; with the flags'
  /// limits. --router-queue-policy with a policy file is a usage error: the file names each
  /// class's policy.
  route::QueueConfig config() const {
    route::QueueConfig q;
    if (!policy_file.empty()) {
      if (policy_opt && policy_opt->count() > 0)
        throw Fatal(kExitUsage, "--router-queue-policy and --router-policy-config: the file names each class's policy");
      auto f = route::QueueConfig::load(policy_file);
      if (!f) throw Fatal(f.error().exit_code, f.error().message);
      q = std::move(*f);
    } else {
      q.classes[0].policy = policy;
    }
    q.max_requests = size;
    q.timeout_ms = timeout_s * 1000.0;
    return q;
  }
};

/// Registers the router queue flags on `app` in the group "Router queue".
inline void add_queue_flags(CLI::App& app, QueueFlags& f) {
  const char* g = "Router queue";
  app.add_option("--router-policy-config", f.policy_file,
                 "Router queue policy classes (JSON): strict tiers, fcfs/wspt/edf/session_las inside a class, "
                 "deficit round robin across classes, per-session defaults (docs/cli.md)")
      ->envname("DYN_ROUTER_POLICY_CONFIG")
      ->type_name("FILE")
      ->group(g);
  f.policy_opt = cli::add_choice(app, "--router-queue-policy", f.policy, route::kQueuePolicies,
                                 "Order of the router queue without a policy file: " +
                                     cli::choices_help(route::kQueuePolicies, "; ", ": "))
                     ->envname("DYN_ROUTER_QUEUE_POLICY")
                     ->group(g);
  app.add_option("--queue-size", f.size,
                 "Requests the router queue holds at most; one more that must wait gets 429 (0 = none wait)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))
      ->group(g);
  app.add_option("--queue-timeout-secs", f.timeout_s,
                 "A request waiting longer in the router queue gets 503 with Retry-After")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.001, 86400.0 * 365))
      ->group(g);
}

}  // namespace dyn::cmd
