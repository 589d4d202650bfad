// The load mode of a replay (SPEC 6.3), shared by the live replay and --sim.
#include "dyn/replay/load.h"

#include <string>

#include "dyn/base/error.h"

namespace dyn::replay {

namespace {

/// The first fixed-schedule offset flag given, or nullptr.
const char* first_offset_flag(const ScheduleOptions& s) {
  return s.start_offset_ms ? "--fixed-schedule-start-offset"
         : s.end_offset_ms ? "--fixed-schedule-end-offset"
         : s.auto_offset   ? "--fixed-schedule-auto-offset"
                           : nullptr;
}

/// The offsets outside a fixed schedule: a usage error naming the first one given and `why` the
/// schedule is not fixed; nothing when none was given.
void refuse_offsets(const ScheduleOptions& s, const std::string& why) {
  if (const char* name = first_offset_flag(s))
    throw Fatal(kExitUsage, std::string(name) + " applies to the fixed schedule; it cannot be used with " + why);
}

}  // namespace

void refuse_schedule_with_rate(const LoadFlags& f) {
  if (f.fixed_schedule && f.schedule.request_rate > 0)
    throw Fatal(kExitUsage, "--request-rate cannot be used with --fixed-schedule: choose the schedule or a rate");
}

void refuse_rate_shape_without_rate(const LoadFlags& f) {
  const bool rate = f.schedule.request_rate > 0;
  if (!rate && f.rate_mode_given) throw Fatal(kExitUsage, "--request-rate-mode needs --request-rate");
  if (f.gamma_shape_given && (!rate || f.schedule.rate_mode != RateMode::kGamma))
    throw Fatal(kExitUsage, "--request-rate-gamma-shape needs --request-rate with --request-rate-mode gamma");
}

void refuse_offsets_off_schedule(const LoadFlags& f) {
  const bool rate = f.schedule.request_rate > 0;
  if (!f.fixed_schedule && (rate || f.concurrency))
    refuse_offsets(f.schedule, rate ? "--request-rate" : "--concurrency without --fixed-schedule");
}

void require_timestamps(const LoadFlags& f, records::WorkloadOptions& wo) {
  if (f.fixed_schedule) {
    wo.require_timestamps = true;
  } else if (f.schedule.request_rate <= 0 && !f.concurrency) {
    wo.require_timestamps_if_first_has = true;
  }
}

Load choose_load(const LoadFlags& f, bool workload_has_timestamps) {
  refuse_offsets_off_schedule(f);
  const bool rate = f.schedule.request_rate > 0;
  if (f.fixed_schedule || (!rate && !f.concurrency && workload_has_timestamps))
    return Load{LoadMode::kFixedSchedule, f.concurrency};
  if (rate) return Load{LoadMode::kRequestRate, f.concurrency};
  // Here with --concurrency, or with no mode flag on a workload without timestamps.
  refuse_offsets(f.schedule,
                 "a workload without timestamps (its first row has none; add --fixed-schedule to require them)");
  return Load{LoadMode::kConcurrency, f.concurrency ? f.concurrency : 1};
}

}  // namespace dyn::replay
