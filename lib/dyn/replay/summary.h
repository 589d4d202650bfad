// A replay's run summary: the line dyn-replay prints on stderr, the JSON its --summary and
// --artifact-dir record, and the live replay's exit status, for the live replay and --sim.
#pragma once

#include <cstdint>
#include <string>

#include "dyn/base/json.h"
#include "dyn/replay/live.h"
#include "dyn/replay/sim.h"

namespace dyn::replay {

/// Requests that ended (ok or an error; cancelled ones are left out, as AIPerf leaves them out of
/// its metrics) per second of LiveStats::duration_ms; 0 for an empty run.
double live_request_rate(const LiveStats& st);

/// The live replay's summary line (every planned request accounted for): "P requests planned: S
/// sent (O ok, E errors[, C cancelled]), N not sent[; W warmup][; schedule lag p50 X ms, p99 Y
/// ms, max Z ms; R req/s]" (cancelled when interrupted or any was; the lag percentiles interpolated,
/// records::percentile_linear; 3 decimals).
std::string live_summary_line(const LiveStats& st);

/// The live replay's summary JSON: {mode "live", url, requests_planned, sent, ok, errors,
/// cancelled, not_sent, warmup, interrupted, duration_s, errors_by_type} and, when any request
/// was measured, schedule_lag_ms {p50, max} (ms; p50 as in live_summary_line) and request_rate
/// (req/s).
Json live_summary_json(const LiveStats& st, const std::string& url);

/// How a live replay ends: its exit status and, for a failure, the error to say on stderr.
struct LiveVerdict {
  int exit_code = 0;
  std::string error;  ///< "" = nothing to say
};
/// kExitInterrupted when interrupt_live stopped it; kExitIo when no request got a response from
/// `url`, or when requests were sent and none succeeded (HTTP errors, cut or incomplete streams:
/// the run measured nothing, which must not look like success to a script, issue 21.9); else 0.
LiveVerdict live_verdict(const LiveStats& st, const std::string& url);

/// Prompt-cache hit rate of a simulated run, in percent of its input tokens (0 with none).
double sim_hit_pct(const SimSummary& s);

/// The --sim summary line: requests and errors, `workers`, simulated and wall time, requests per
/// wall second and the speed-up over real time, prompt-cache and theoretical hit % (2 decimals),
/// preemptions.
std::string sim_summary_line(const SimSummary& s, uint32_t workers);

/// The requests cancelled at the end of --benchmark-grace-period, or "" when none were.
std::string sim_cancelled_line(const SimSummary& s);

/// The rows the load controls left out of a simulated run (outside the fixed-schedule offsets,
/// over --request-count, not sent within --benchmark-duration); "" when there are none, so a plain
/// run reads as before.
std::string sim_skipped_line(const SimSummary& s);

/// The --reference line: the pool's size, and per policy its hit % and this run's hit % over the
/// same requests as a fraction of it; "" without --reference.
std::string sim_reference_line(const SimSummary& s);

/// "workload streamed: at most H of N requests held at once" when the run streamed its input
/// (run_sim_files), else "".
std::string sim_stream_line(const SimSummary& s);

/// The --sim summary JSON: {mode "sim", requests, errors, workers, simulated_s, wall_s,
/// prompt_cache_hit_pct, theoretical_hit_pct, preemptions, outside_offsets, over_count, not_sent,
/// cancelled},
/// with --reference also reference_blocks, reference_run_hit_pct and references: {NAME:
/// {hit_pct, run_ratio}}.
Json sim_summary_json(const SimSummary& s, uint32_t workers);

}  // namespace dyn::replay
