// Unit tests for lib/dyn/replay load.h and summary.h: dyn-replay's load-mode choice (SPEC 6.3, the
// same for the live replay and --sim) and the run summary (stderr line, JSON, exit status).
#include <doctest/doctest.h>

#include <string>

#include "dyn/base/error.h"
#include "dyn/replay/load.h"
#include "dyn/replay/summary.h"

using namespace dyn::replay;
using dyn::Json;

namespace {

/// The usage error `fn` throws ("" when it throws none; any other exception fails the test).
template <class Fn>
std::string usage_error(Fn fn) {
  try {
    fn();
  } catch (const dyn::Fatal& e) {
    CHECK(e.exit_code() == dyn::kExitUsage);
    return e.what();
  }
  return "";
}

LoadFlags flags(bool fixed, double rate, uint64_t concurrency) {
  LoadFlags f;
  f.fixed_schedule = fixed;
  f.schedule.request_rate = rate;
  f.concurrency = concurrency;
  return f;
}

}  // namespace

TEST_CASE("load mode: explicit flags win; without them the workload's timestamps decide") {
  // --fixed-schedule wins over --concurrency (it caps the schedule then), whatever the workload.
  Load l = choose_load(flags(true, 0, 3), false);
  CHECK(l.mode == LoadMode::kFixedSchedule);
  CHECK(l.concurrency == 3);
  CHECK(choose_load(flags(false, 5, 0), true).mode == LoadMode::kRequestRate);
  CHECK(choose_load(flags(false, 5, 2), true).concurrency == 2);  // a rate with a cap
  l = choose_load(flags(false, 0, 4), true);
  CHECK(l.mode == LoadMode::kConcurrency);
  CHECK(l.concurrency == 4);
  // No mode flag: the timestamps' schedule, else one request at a time in file order (AIPerf).
  CHECK(choose_load(flags(false, 0, 0), true).mode == LoadMode::kFixedSchedule);
  l = choose_load(flags(false, 0, 0), false);
  CHECK(l.mode == LoadMode::kConcurrency);
  CHECK(l.concurrency == 1);
}

TEST_CASE("load flags: the timestamp rule of the live replay's workload") {
  dyn::records::WorkloadOptions fixed, none, rate;
  require_timestamps(flags(true, 0, 0), fixed);
  CHECK(fixed.require_timestamps);
  CHECK_FALSE(fixed.require_timestamps_if_first_has);
  require_timestamps(flags(false, 0, 0), none);
  CHECK_FALSE(none.require_timestamps);
  CHECK(none.require_timestamps_if_first_has);
  require_timestamps(flags(false, 2, 0), rate);
  CHECK_FALSE(rate.require_timestamps);
  CHECK_FALSE(rate.require_timestamps_if_first_has);
}

TEST_CASE("load flags that cannot hold together are usage errors naming the flag") {
  CHECK(usage_error([] { refuse_schedule_with_rate(flags(true, 5, 0)); }) ==
        "--request-rate cannot be used with --fixed-schedule: choose the schedule or a rate");
  CHECK(usage_error([] { refuse_schedule_with_rate(flags(false, 5, 0)); }).empty());

  LoadFlags f = flags(false, 5, 0);
  f.schedule.start_offset_ms = 0;
  CHECK(usage_error([&] { refuse_offsets_off_schedule(f); }) ==
        "--fixed-schedule-start-offset applies to the fixed schedule; it cannot be used with --request-rate");
  f = flags(false, 0, 2);
  f.schedule.auto_offset = true;
  CHECK(usage_error([&] { refuse_offsets_off_schedule(f); }) ==
        "--fixed-schedule-auto-offset applies to the fixed schedule; it cannot be used with --concurrency without "
        "--fixed-schedule");
  f.fixed_schedule = true;  // --concurrency caps a fixed schedule: the offsets apply
  CHECK(usage_error([&] { refuse_offsets_off_schedule(f); }).empty());
  CHECK(choose_load(f, true).mode == LoadMode::kFixedSchedule);

  // No mode flag: the offsets are refused only once the workload turns out to have no timestamps.
  f = flags(false, 0, 0);
  f.schedule.end_offset_ms = 5;
  CHECK(usage_error([&] { refuse_offsets_off_schedule(f); }).empty());
  CHECK(usage_error([&] { choose_load(f, true); }).empty());
  CHECK(usage_error([&] { choose_load(f, false); }) ==
        "--fixed-schedule-end-offset applies to the fixed schedule; it cannot be used with a workload without "
        "timestamps (its first row has none; add --fixed-schedule to require them)");
}

TEST_CASE("live summary: every planned request accounted for; lag percentiles interpolated") {
  LiveStats st;
  st.planned = 10;
  st.sent = 8;
  st.ok = 7;
  st.errors = 1;
  st.not_sent = 2;
  CHECK(live_summary_line(st) == "10 requests planned: 8 sent (7 ok, 1 errors), 2 not sent");
  st.warmup = 3;
  st.interrupted = true;
  st.cancelled = 1;
  st.lag_ms = {4, 1, 3, 2};  // unsorted as measured
  st.duration_ms = 2000;
  // p50 between 2 and 3; p99 at position 2.97 between 3 and 4.
  CHECK(live_summary_line(st) ==
        "10 requests planned: 8 sent (7 ok, 1 errors, 1 cancelled), 2 not sent; 3 warmup; "
        "schedule lag p50 2.500 ms, p99 3.970 ms, max 4.000 ms; 4.0 req/s");
  Json j = live_summary_json(st, "http://h:1");
  CHECK(j["mode"] == "live");
  CHECK(j["url"] == "http://h:1");
  CHECK(j["requests_planned"] == 10);
  CHECK(j["not_sent"] == 2);
  CHECK(j["duration_s"] == 2.0);
  CHECK(j["schedule_lag_ms"]["p50"] == 2.5);  // the line's p50, not the upper middle value (3)
  CHECK(j["schedule_lag_ms"]["max"] == 4.0);
  CHECK(j["request_rate"] == 4.0);
  st.lag_ms.clear();
  CHECK_FALSE(live_summary_json(st, "u").contains("schedule_lag_ms"));
}

TEST_CASE("live summary after --benchmark-grace-period: the cancelled counted apart, out of the rate") {
  LiveStats st;  // case 53: 8 sent, 7 ok, 1 cancelled when the grace period ended, 4 not sent
  st.planned = 12;
  st.sent = 8;
  st.ok = 7;
  st.cancelled = 1;
  st.not_sent = 4;
  st.lag_ms = {0};
  st.duration_ms = 1600;  // first send to the last end of a request that was not cancelled
  CHECK(live_summary_line(st) ==
        "12 requests planned: 8 sent (7 ok, 0 errors, 1 cancelled), 4 not sent; "
        "schedule lag p50 0.000 ms, p99 0.000 ms, max 0.000 ms; 4.4 req/s");
  CHECK(live_request_rate(st) == doctest::Approx(7 / 1.6));
  CHECK(live_verdict(st, "u").exit_code == dyn::kExitOk);
  st.ok = 0;  // nothing finished in time: nothing was measured
  LiveVerdict v = live_verdict(st, "u");
  CHECK(v.exit_code == dyn::kExitIo);
  CHECK(v.error == "no request succeeded (0 errors, 1 cancelled); nothing was measured");
}

TEST_CASE("live verdict: interrupted 130, nothing answered or nothing succeeded 4, else 0") {
  LiveStats st;
  st.sent = 3;
  st.ok = 1;
  CHECK(live_verdict(st, "u").exit_code == dyn::kExitOk);
  CHECK(live_verdict(st, "u").error.empty());
  st.ok = 0;
  st.errors = 3;
  LiveVerdict v = live_verdict(st, "u");
  CHECK(v.exit_code == dyn::kExitIo);
  CHECK(v.error == "every request failed (3 errors); nothing was measured");
  st.all_transport_errors = true;
  v = live_verdict(st, "http://h:9");
  CHECK(v.exit_code == dyn::kExitIo);
  CHECK(v.error == "no request got a response from http://h:9");
  st.interrupted = true;  // an interrupted run says so by its status, whatever it measured
  CHECK(live_verdict(st, "u").exit_code == dyn::kExitInterrupted);
  CHECK(live_verdict(LiveStats{}, "u").exit_code == dyn::kExitOk);  // nothing to send is no failure
}

TEST_CASE("sim summary: hit rates in percent, speed over real time, skipped rows only when any") {
  SimSummary s;
  s.requests = 40;
  s.errors = 1;
  s.simulated_ms = 20000;
  s.wall_ms = 500;
  s.input_tokens = 1000;
  s.cached_tokens = 250;
  s.theoretical_hit = 0.3;
  s.preemptions = 2;
  CHECK(sim_hit_pct(s) == 25.0);
  CHECK(sim_hit_pct(SimSummary{}) == 0.0);
  CHECK(sim_summary_line(s, 4) ==
        "simulated 40 requests (1 errors) on 4 workers: 20.0 s simulated in 0.500 s wall (80 requests/s, 40x real "
        "time); prompt-cache hit 25.00 % (theoretical 30.00 %), 2 preemptions");
  CHECK(sim_skipped_line(s).empty());
  s.over_count = 3;
  CHECK(sim_skipped_line(s) ==
        "not simulated: 0 rows outside the fixed-schedule offsets, 3 over --request-count, 0 not sent within "
        "--benchmark-duration");
  Json j = sim_summary_json(s, 4);
  CHECK(j["mode"] == "sim");
  CHECK(j["workers"] == 4);
  CHECK(j["prompt_cache_hit_pct"] == 25.0);
  CHECK(j["theoretical_hit_pct"] == 30.0);
  CHECK(j["over_count"] == 3);
  CHECK(j["simulated_s"] == 20.0);
  CHECK(!j.contains("held_peak"));  // loaded whole: nothing to say
  s.kv_state_blocks = 4 * 16384;
  s.kv_state_bytes_per_block = 120;
  s.streamed = true;
  s.held_peak = 57;
  j = sim_summary_json(s, 4);
  CHECK(j["kv_state"]["blocks"] == 65536);
  CHECK(j["kv_state"]["bytes"] == 65536 * 120);
  CHECK(j["held_peak"] == 57);
}
