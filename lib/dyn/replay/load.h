// A replay's load mode from its load flags (SPEC 6.3): one rule for the live replay and --sim, and
// the flag combinations neither can honour.
#pragma once

#include <cstdint>

#include "dyn/replay/schedule.h"
#include "dyn/records/workload.h"

namespace dyn::replay {

/// dyn-replay's load flags as given: --fixed-schedule, --concurrency and the schedule flags
/// (--request-rate, the fixed-schedule offsets, ...; `schedule.mode` is ignored: choose_load
/// chooses it).
struct LoadFlags {
  bool fixed_schedule = false;
  uint64_t concurrency = 0;        ///< 0 = not given
  bool rate_mode_given = false;    ///< --request-rate-mode was given
  bool gamma_shape_given = false;  ///< --request-rate-gamma-shape was given
  ScheduleOptions schedule;
};

/// A chosen load: the mode, and the cap on requests in flight (at least 1 in concurrency mode).
struct Load {
  LoadMode mode = LoadMode::kFixedSchedule;
  uint64_t concurrency = 0;
};

/// --request-rate with --fixed-schedule: Fatal(kExitUsage) (choose the schedule or a rate; the
/// schedule used to win silently).
void refuse_schedule_with_rate(const LoadFlags& f);

/// --request-rate-mode without --request-rate, or --request-rate-gamma-shape without a gamma
/// rate: Fatal(kExitUsage) naming the flag (neither would change anything).
void refuse_rate_shape_without_rate(const LoadFlags& f);

/// The fixed-schedule offsets (--fixed-schedule-start-offset, -end-offset, -auto-offset) when the
/// flags alone say the schedule is not fixed (--request-rate, or --concurrency without
/// --fixed-schedule): Fatal(kExitUsage) naming the first offset given. Checked before the workload
/// is read.
void refuse_offsets_off_schedule(const LoadFlags& f);

/// The live replay's timestamp rule into `wo`: --fixed-schedule requires a timestamp on every
/// row; with no mode flag (no rate, no concurrency) the first row decides (all rows or none).
void require_timestamps(const LoadFlags& f, records::WorkloadOptions& wo);

/// The load mode: explicit flags win (--fixed-schedule, then --request-rate, then --concurrency);
/// with none of them a fixed schedule exactly when the workload has timestamps, else one request
/// at a time in file order (AIPerf). --sim passes workload_has_timestamps = true (its default is
/// the fixed schedule; the workload is then read requiring timestamps). Fatal(kExitUsage) for
/// fixed-schedule offsets on a workload without timestamps (the flags' own conflicts are
/// refuse_offsets_off_schedule's).
Load choose_load(const LoadFlags& f, bool workload_has_timestamps);

}  // namespace dyn::replay
