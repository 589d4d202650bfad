// dyn-replay's run summary (stderr line, --summary JSON, exit status) for the live replay and --sim.
#include "dyn/replay/summary.h"

#include <algorithm>

#include <fmt/format.h>

#include "dyn/base/error.h"
#include "dyn/records/percentile.h"

namespace dyn::replay {

double live_request_rate(const LiveStats& st) {
  return st.duration_ms > 0 ? 1000.0 * static_cast<double>(st.ok + st.errors) / st.duration_ms : 0.0;
}

std::string live_summary_line(const LiveStats& st) {
  std::string msg =
      fmt::format("{} requests planned: {} sent ({} ok, {} errors", st.planned, st.sent, st.ok, st.errors);
  if (st.interrupted || st.cancelled) msg += fmt::format(", {} cancelled", st.cancelled);
  msg += fmt::format("), {} not sent", st.not_sent);
  if (st.warmup) msg += fmt::format("; {} warmup", st.warmup);
  if (!st.lag_ms.empty()) {
    auto lag = st.lag_ms;
    std::sort(lag.begin(), lag.end());
    msg += fmt::format("; schedule lag p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms; {:.1f} req/s",
                       records::percentile_linear(lag, 50), records::percentile_linear(lag, 99), lag.back(),
                       live_request_rate(st));
  }
  return msg;
}

Json live_summary_json(const LiveStats& st, const std::string& url) {
  Json j{{"mode", "live"},
         {"url", url},
         {"requests_planned", st.planned},
         {"sent", st.sent},
         {"ok", st.ok},
         {"errors", st.errors},
         {"cancelled", st.cancelled},
         {"not_sent", st.not_sent},
         {"warmup", st.warmup},
         {"interrupted", st.interrupted},
         {"duration_s", st.duration_ms / 1000.0},
         {"errors_by_type", st.errors_by_type}};
  if (!st.lag_ms.empty()) {
    auto lag = st.lag_ms;
    std::sort(lag.begin(), lag.end());
    // The same interpolated p50 as the summary line.
    j["schedule_lag_ms"] = Json{{"p50", records::percentile_linear(lag, 50)}, {"max", lag.back()}};
    j["request_rate"] = live_request_rate(st);
  }
  return j;
}

LiveVerdict live_verdict(const LiveStats& st, const std::string& url) {
  if (st.interrupted) return {kExitInterrupted, ""};
  if (st.all_transport_errors) return {kExitIo, "no request got a response from " + url};
  if (st.sent > 0 && st.ok == 0)
    return {kExitIo, st.cancelled ? fmt::format("no request succeeded ({} errors, {} cancelled); nothing was measured",
                                                st.errors, st.cancelled)
                                  : fmt::format("every request failed ({} errors); nothing was measured", st.errors)};
  return {kExitOk, ""};
}

double sim_hit_pct(const SimSummary& s) {
  return s.input_tokens ? 100.0 * static_cast<double>(s.cached_tokens) / static_cast<double>(s.input_tokens) : 0.0;
}

std::string sim_summary_line(const SimSummary& s, uint32_t workers) {
  return fmt::format(
      "simulated {} requests ({} errors) on {} workers: {:.1f} s simulated in {:.3f} s wall ({:.0f} requests/s, {:.0f}x real time); "
      "prompt-cache hit {:.2f} % (theoretical {:.2f} %), {} preemptions",
      s.requests, s.errors, workers, s.simulated_ms / 1000.0, s.wall_ms / 1000.0,
      s.wall_ms > 0 ? static_cast<double>(s.requests) / (s.wall_ms / 1000.0) : 0.0,
      s.wall_ms > 0 ? s.simulated_ms / s.wall_ms : 0.0, sim_hit_pct(s), 100.0 * s.theoretical_hit, s.preemptions);
}

std::string sim_cancelled_line(const SimSummary& s) {
  if (!s.cancelled) return "";
  return fmt::format(
      "{} requests still in flight after --benchmark-grace-period were cancelled (rows with "
      "dyn.status cancelled; not in the requests above)",
      s.cancelled);
}

std::string sim_skipped_line(const SimSummary& s) {
  if (!s.outside_offsets && !s.over_count && !s.not_sent) return "";
  return fmt::format(
      "not simulated: {} rows outside the fixed-schedule offsets, {} over --request-count, "
      "{} not sent within --benchmark-duration",
      s.outside_offsets, s.over_count, s.not_sent);
}

std::string sim_stream_line(const SimSummary& s) {
  if (!s.streamed) return "";
  return fmt::format("workload streamed: at most {} of {} requests held at once", s.held_peak,
                     s.requests + s.outside_offsets + s.over_count + s.not_sent);
}

std::string sim_reference_line(const SimSummary& s) {
  if (s.references.empty()) return "";
  std::string line =
      fmt::format("reference caches (one pool of {} KV blocks, the same requests and timing): ", s.reference_blocks);
  for (size_t i = 0; i < s.references.size(); ++i) {
    const auto& r = s.references[i];
    line += fmt::format("{}{} hit {:.2f} % (this run {:.2f} %: {:.3f}x of it)", i ? ", " : "",
                        name_in(tokens::kReferencePolicies, r.policy), 100.0 * r.hit, 100.0 * s.reference_run_hit,
                        r.hit > 0 ? s.reference_run_hit / r.hit : 0.0);
  }
  return line;
}

Json sim_summary_json(const SimSummary& s, uint32_t workers) {
  Json refs = Json::object();
  for (const auto& r : s.references)
    refs[name_in(tokens::kReferencePolicies, r.policy)] = {
        {"hit_pct", 100.0 * r.hit}, {"run_ratio", r.hit > 0 ? s.reference_run_hit / r.hit : 0.0}};
  Json j = Json{{"mode", "sim"},
                {"requests", s.requests},
                {"errors", s.errors},
                {"workers", workers},
                {"simulated_s", s.simulated_ms / 1000.0},
                {"wall_s", s.wall_ms / 1000.0},
                {"prompt_cache_hit_pct", sim_hit_pct(s)},
                {"theoretical_hit_pct", 100.0 * s.theoretical_hit},
                {"preemptions", s.preemptions},
                {"outside_offsets", s.outside_offsets},
                {"over_count", s.over_count},
                {"not_sent", s.not_sent},
                {"cancelled", s.cancelled},
                {"decision_quality", route::quality_json(s.quality)},
                {"cache_prediction", route::staleness_json(s.staleness)},
                {"kv_state",
                 {{"blocks", s.kv_state_blocks},
                  {"bytes_per_block", s.kv_state_bytes_per_block},
                  {"bytes", s.kv_state_blocks * s.kv_state_bytes_per_block}}}};
  if (s.streamed) j["held_peak"] = s.held_peak;
  const kvpolicy::KvPolicyCounts& k = s.kv_policy;
  const bool dp = k.tool_demotes || k.tool_not_demoted || k.prefetches;
  if (k.tool_retains || k.tool_too_long || k.final_evicts || k.parent_retains || dp)
    j["kv_policy"] = {{"tool_retains", k.tool_retains},
                      {"tool_too_long", k.tool_too_long},
                      {"final_evicts", k.final_evicts},
                      {"parent_retains", k.parent_retains}};
  if (dp) {  // demote-prefetch's, only where it ran
    j["kv_policy"]["tool_demotes"] = k.tool_demotes;
    j["kv_policy"]["tool_not_demoted"] = k.tool_not_demoted;
    j["kv_policy"]["prefetches"] = k.prefetches;
  }
  if (!s.references.empty()) {
    j["reference_blocks"] = s.reference_blocks;
    j["reference_run_hit_pct"] = 100.0 * s.reference_run_hit;
    j["references"] = std::move(refs);
  }
  return j;
}

}  // namespace dyn::replay
