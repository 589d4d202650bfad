// The dispatch plan of a replay: when each request may start (absolute offsets or "after these
// requests end, plus a delay"), for every load mode of SPEC 6.3.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/named.h"
#include "dyn/base/random.h"
#include "dyn/replay/session.h"
#include "dyn/records/workload.h"

namespace dyn::replay {

/// SPEC 6.3 load modes. kFixedSchedule replays timestamps; kRequestRate issues session starts
/// at a rate; kConcurrency keeps a fixed number of requests in flight.
enum class LoadMode { kFixedSchedule, kRequestRate, kConcurrency };
enum class RateMode { kConstant, kPoisson, kGamma };
/// Every arrival process of --request-rate (--request-rate-mode), in help order.
inline constexpr Named<RateMode> kRateModes[] = {
    {RateMode::kConstant, "constant", ""},
    {RateMode::kPoisson, "poisson", ""},
    {RateMode::kGamma, "gamma", ""},
};

struct ScheduleOptions {
  LoadMode mode = LoadMode::kFixedSchedule;
  double speedup = 1;  ///< > 0; divides every timestamp gap and delay
  /// Fixed schedule: keep rows with start <= timestamp <= end (inclusive, AIPerf); run time zero
  /// is the start offset when given, else the first kept timestamp with auto_offset, else 0.
  std::optional<double> start_offset_ms, end_offset_ms;
  bool auto_offset = false;
  double request_rate = 0;  ///< requests/s (request-rate mode), > 0
  RateMode rate_mode = RateMode::kConstant;
  double gamma_shape = 1;  ///< gamma: shape k (1 = Poisson; larger = smoother)
  uint64_t seed = 0;
  uint64_t request_count = 0;  ///< 0 = every row; else the first N rows in schedule order
};

/// One request of the plan.
struct PlanItem {
  size_t row = 0;               ///< index into Workload::rows
  std::optional<double> at_ms;  ///< earliest start, ms from run start (after speedup)
  std::vector<size_t> deps;     ///< plan items that must end first
  double delay_ms = 0;          ///< after the last dep ends (after speedup)
  uint32_t turn = 0;
  bool last_turn = true;
  std::string request_id;
  Identity identity;
};

struct Plan {
  std::vector<PlanItem> items;
  std::vector<std::string> errors;  ///< "file:line: what" (unknown wait_for ids, ...)
  uint64_t outside_offsets = 0;     ///< rows dropped by the start/end offsets
  uint64_t over_count = 0;          ///< rows dropped by request_count
  double zero_ms = 0;               ///< the trace timestamp that maps to run time 0
};

/// Builds the plan (SPEC 6.1, 6.3). Dependencies:
/// - later turn of a session: after the previous turn ends + `delay` (or, with timestamps only,
///   + the recorded gap between the two timestamps; 0 when neither is given);
/// - first turn of a child session without a timestamp: after the parent's latest preceding
///   turn ends + delay;
/// - `wait_for` ids: after those requests end (+ `tool_wait_ms`).
/// Other rows start at their timestamp (fixed schedule), at the next arrival of the rate
/// process (request rate), or at 0 (concurrency). Rows whose dependencies were cut by offsets or
/// the request count keep their own timing. Deterministic for a given seed.
Plan build_plan(const records::Workload& workload, const ScheduleOptions& options);

/// When the last request of a plan is expected to end, in ms from run start (dyn-replay's
/// progress line and its ETA). Each item starts at its known send time (`sent_ms[k]`, NaN while
/// unsent), else at the latest expected end of its dependencies plus its delay, and no earlier than
/// its at_ms nor before `now_ms`; it ends at its known end (`ended_ms[k]`, NaN while running), else `latency_ms` after
/// its start and no earlier than `now_ms` for one in flight. Dependencies come before their
/// dependents in a plan (build_plan), so one pass in plan order suffices. With no request sent
/// and `latency_ms` 0 this is the length of the schedule itself: the last arrival, or for a
/// session's later turns their recorded gaps. Spans must have items.size() entries.
double expected_end_ms(const std::vector<PlanItem>& items, const std::vector<double>& sent_ms,
                       const std::vector<double>& ended_ms, double now_ms, double latency_ms);

}  // namespace dyn::replay
