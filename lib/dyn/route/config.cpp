// RouterConfig names and validation.
#include "dyn/route/config.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dyn::route {

const char* mode_name(Mode m) { return name_in(kModes, m); }
std::optional<Mode> parse_mode(std::string_view n) { return parse_in(kModes, n); }
const char* affinity_mode_name(AffinityMode m) { return name_in(kAffinityModes, m); }
std::optional<AffinityMode> parse_affinity_mode(std::string_view n) { return parse_in(kAffinityModes, n); }

std::optional<Error> RouterConfig::validate() const {
  auto usage = [](std::string m) { return Error{std::move(m), kExitUsage}; };
  if (affinity_ttl_secs > kMaxAffinityTtlSecs)
    return usage("--router-session-affinity-ttl-secs " + std::to_string(affinity_ttl_secs) + " is out of range 1.." +
                 std::to_string(kMaxAffinityTtlSecs));
  if (block_size == 0) return usage("--kv-cache-block-size must be at least 1");
  if (!(overlap_score_weight >= 0)) return usage("--kv-overlap-score-weight must be >= 0");
  if (!(temperature >= 0)) return usage("--router-temperature must be >= 0");
  if (!(kv_ttl_secs > 0)) return usage("--router-ttl-secs must be > 0");
  if (!(host_cache_hit_weight >= 0 && host_cache_hit_weight <= 1))
    return usage("--router-host-cache-hit-weight must be in [0, 1]");
  if (!(disk_cache_hit_weight >= 0 && disk_cache_hit_weight <= 1))
    return usage("--router-disk-cache-hit-weight must be in [0, 1]");
  if (shared_cache_multiplier && !(*shared_cache_multiplier >= 0 && *shared_cache_multiplier <= 1))
    return usage("--shared-cache-multiplier must be in [0, 1]");
  if (shared_cache_type == SharedCacheType::kNone && shared_multiplier() > 0)
    return usage("--shared-cache-multiplier credits a shared pool: set --shared-cache-type");
  if (shared_cache_type == SharedCacheType::kEvents && !kv_events)
    return usage("--shared-cache-type events learns the pool from KV events: add --router-kv-events");
  if (!(host_ttl_secs >= 0) || !(disk_ttl_secs >= 0)) return usage("--router-host/disk-ttl-secs must be >= 0");
  // Lower tiers are predicted only where nothing tells the router: with events, a TTL would
  // contradict what the workers report.
  if (kv_events && (host_ttl_secs > 0 || disk_ttl_secs > 0))
    return usage(
        "--router-host-ttl-secs / --router-disk-ttl-secs predict lower tiers without KV events; with "
        "--router-kv-events the events say where blocks are");
  if (host_ttl_secs > 0 && host_ttl_secs <= kv_ttl_secs)
    return usage(
        "--router-host-ttl-secs must exceed --router-ttl-secs: a routed block is predicted on the host "
        "tier after it leaves the GPU");
  if (disk_ttl_secs > 0 && disk_ttl_secs <= std::max(kv_ttl_secs, host_ttl_secs))
    return usage("--router-disk-ttl-secs must exceed --router-ttl-secs and --router-host-ttl-secs");
  if (!(prune_target_ratio > 0 && prune_target_ratio <= 1))
    return usage("--router-prune-target-ratio must be in (0, 1]");
  if (worker_kv_blocks == 0) return usage("--router-worker-kv-blocks must be at least 1");
  if (active_decode_blocks_threshold && !(*active_decode_blocks_threshold >= 0 && *active_decode_blocks_threshold <= 1))
    return usage("--active-decode-blocks-threshold must be a fraction in [0, 1]");
  if (active_prefill_tokens_threshold_frac &&
      !(*active_prefill_tokens_threshold_frac >= 0 && std::isfinite(*active_prefill_tokens_threshold_frac)))
    return usage("--active-prefill-tokens-threshold-frac must be a number >= 0");
  if (max_num_batched_tokens == 0) return usage("the step budget max_num_batched_tokens must be at least 1");
  if (active_requests_threshold && *active_requests_threshold == 0)
    return usage("--active-requests-threshold must be at least 1");
  if (max_bindings == 0) return usage("the binding limit must be at least 1");
  // Only the kv policy reads the index the events feed (the others never look at it): accepting
  // the flag with them would promise event-fed routing that does not happen (issue 50).
  if (kv_events && mode != Mode::kKv)
    return usage(std::string("--router-kv-events: --router-mode ") + mode_name(mode) +
                 " does not use the KV index; use --router-mode kv, or drop --router-kv-events");
  return std::nullopt;
}

}  // namespace dyn::route
