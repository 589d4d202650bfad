// Program-aware admission (ThunderAgent, SPEC 9): pause whole agent programs at tool boundaries
// under KV pressure and resume them by best-fit packing, on an injected clock.
#pragma once

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dyn/base/named.h"
#include "dyn/base/clock.h"
#include "dyn/base/json.h"

namespace dyn::route {

/// `--admission none|thunderagent`.
enum class AdmissionMode { kNone, kThunderAgent };
/// Every admission mode: the list parse_admission_mode, to_string and the CLI's choices use.
inline constexpr Named<AdmissionMode> kAdmissionModes[] = {
    {AdmissionMode::kNone, "none", ""},
    {AdmissionMode::kThunderAgent, "thunderagent",
     "pause whole agent sessions at tool boundaries under KV pressure, resume by best-fit packing"},
};
/// What a program is doing (SPEC 9): REASONING = a request in flight (or waiting to be admitted),
/// ACTING = between turns (a tool runs; its context still occupies KV cache).
enum class ProgramStatus { kReasoning, kActing };
/// Lifecycle: ACTIVE = placed on a worker and counted there; PAUSED = in the global queue, not
/// counted anywhere, its next request waits; TERMINATED = released (`session_final`).
enum class ProgramLifecycle { kActive, kPaused, kTerminated };

const char* to_string(AdmissionMode m);
const char* to_string(ProgramStatus s);
const char* to_string(ProgramLifecycle l);
/// "none" | "thunderagent" (case-sensitive); nullopt otherwise.
std::optional<AdmissionMode> parse_admission_mode(const std::string& s);

/// Settings with SPEC 9 defaults; names and defaults follow Dynamo's ThunderAgent router
/// (`--pause-threshold`, `DYN_THUNDERAGENT_PAUSE_THRESHOLD`, ...). Fractions are of a worker's
/// capacity in tokens; times in seconds.
struct AdmissionConfig {
  AdmissionMode mode = AdmissionMode::kNone;
  double pause_threshold = 0.95;              ///< pause-side utilisation that starts a pause cycle
  double pause_target = 0.80;                 ///< a pause cycle drains a worker down to this
  double soft_demote_threshold = 0.80;        ///< [this, pause_threshold) = soft-demote band
  double soft_demote_priority_jump_s = -2.0;  ///< queue-priority hint for demoted programs
  double resume_priority_boost_s = 1.0;       ///< hint for the first request after a resume
  double resume_hysteresis = 0.10;            ///< resume packs below pause_threshold - this
  double resume_timeout_s = 1800.0;           ///< a request waits at most this long, then is forced in
  double acting_token_weight = 1.0;           ///< weight of ACTING tokens on the pause side
  double acting_decay_tau_s = 1.0;            ///< ACTING tokens decay 2^(-t/tau) on the resume side
  double scheduler_interval_s = 5.0;          ///< tick period
  uint64_t buffer_tokens_per_program = 100;   ///< decode headroom per program (SPEC 9)

  /// "" when valid, else the first violated constraint as a message naming the flag (the same
  /// constraints as Dynamo: thresholds in [0, 1], target/soft/hysteresis <= pause threshold,
  /// weight, interval, timeout and tau > 0).
  std::string validate() const;
  bool enabled() const { return mode == AdmissionMode::kThunderAgent; }
};

/// One worker as the controller sees it: id (0..N-1 in the toolkit) and KV capacity in tokens
/// (SPEC 9: block size x KV blocks).
struct AdmissionWorker {
  int id = 0;
  uint64_t capacity_tokens = 0;
};

/// Result of admit(). When `admitted`, send the request to `worker`. Otherwise the request must
/// wait: it is released later by tick() (as a Release carrying `ticket`), never by polling.
struct AdmitDecision {
  bool admitted = false;
  int worker = -1;
  uint64_t ticket = 0;         ///< identifies the waiting request (admitted == false)
  bool reassigned = false;     ///< the program's worker left the live set and it was re-placed
  double priority_jump_s = 0;  ///< queue-priority hint (soft demotion < 0, resume boost > 0)
  std::string reason;          ///< "active", "new", "reassigned", "paused", "no_room",
                               ///< "behind_paused"
};

/// A waiting request let through by tick(): dispatch it to `worker`.
struct AdmissionRelease {
  uint64_t ticket = 0;
  std::string program_id;
  int worker = -1;
  double waited_ms = 0;  ///< time between admit() and the release (dyn.pause_ms)
  bool forced = false;   ///< released by the resume timeout, not by capacity
  double priority_jump_s = 0;
};

/// What one tick did, in order (program ids sorted within each list).
struct TickReport {
  double now_ms = 0;
  std::vector<std::string> demoted;        ///< step 1: soft-demoted this tick
  std::vector<std::string> resumed;        ///< step 2 (and forced resumes)
  std::vector<std::string> paused;         ///< step 3: ACTING programs paused now
  std::vector<std::string> marked;         ///< step 3: REASONING programs to pause at their next tool boundary
  std::vector<AdmissionRelease> released;  ///< waiting requests to dispatch now
};

/// One program as shown by GET /v1/programs.
struct ProgramView {
  std::string program_id, parent_session_id;
  ProgramLifecycle lifecycle = ProgramLifecycle::kActive;
  ProgramStatus status = ProgramStatus::kReasoning;
  std::optional<int> worker;  ///< assigned worker (ACTIVE); last worker while PAUSED
  uint64_t token_total = 0;
  uint64_t step_count = 0;
  uint64_t waiting_requests = 0;
  uint64_t pause_count = 0;
  bool marked_for_pause = false;
  bool soft_demoted = false;
  uint64_t tools_running = 0;  ///< harness tool_start events without their end yet
  double paused_ms_total = 0;  ///< time spent PAUSED so far (current pause included)
  double paused_for_ms = 0;    ///< length of the current pause (0 when ACTIVE)
};

/// Counters over the controller's lifetime.
struct AdmissionStats {
  uint64_t admitted_immediately = 0, waited = 0, released = 0, forced = 0;
  uint64_t pauses = 0, marks = 0, resumes = 0, reassigned = 0, ticks = 0;
  double wait_ms_total = 0;
};

/// The ThunderAgent scheduler (SPEC 9), independent of transport. Programs are keyed by session
/// id; a subagent (its own session with a parent) is its own program. Every method takes the
/// current time explicitly (`now_ms`, from any monotonic clock: RealClock live, virtual time in
/// the simulator), so runs on a FakeClock are deterministic: no hash-map iteration, ties broken
/// by worker id then program id.
///
/// Thread safety: every public method locks one internal mutex, so the live server may call
/// admit/on_response from many threads while a ticker thread calls tick(). admit_blocking()
/// waits on a condition variable (no polling) and is woken by the tick that releases it.
class AdmissionController {
 public:
  /// `workers`: the live worker set (ids need not be contiguous). Throws Fatal(2) when the
  /// config is invalid.
  AdmissionController(AdmissionConfig config, std::vector<AdmissionWorker> workers);
  ~AdmissionController();
  AdmissionController(const AdmissionController&) = delete;
  AdmissionController& operator=(const AdmissionController&) = delete;

  const AdmissionConfig& config() const { return config_; }

  /// Replaces the live worker set (health changes, scale up/down). Programs assigned to a worker
  /// that left keep their state; their next admit() re-places them (SPEC 9: a stale assignment
  /// must not fail the request).
  void set_workers(std::vector<AdmissionWorker> workers);

  /// A request of `program` arrives (SPEC 9 "Admission of a request"). `prompt_tokens` is the
  /// request's input length in tokens (an estimate is fine; the program's token_total becomes
  /// max(token_total, prompt_tokens) until the response reports usage). `parent` is the
  /// parent_session_id ("" for none; informational). Effects: step count + 1, status REASONING.
  /// - ACTIVE program: admitted on its worker (re-placed on the least-used live worker if its
  ///   worker is gone).
  /// - PAUSED program: waits until a tick resumes it or the resume timeout forces it in.
  /// - new program: placed on the least-used worker with room below
  ///   (pause_threshold - resume_hysteresis) x capacity, else waits; it also waits while older
  ///   paused programs have requests waiting (no overtaking).
  /// With mode none every request is admitted with worker -1 (the router decides).
  AdmitDecision admit(const std::string& program, const std::string& parent, uint64_t prompt_tokens, double now_ms);

  /// The response of a request of `program` ended with usage prompt + completion tokens: the
  /// program's token_total becomes their sum, and when no other request of it is in flight it
  /// turns ACTING (a tool boundary). A program marked for pause is paused here.
  void on_response(const std::string& program, uint64_t prompt_tokens, uint64_t completion_tokens, double now_ms);
  /// A request of `program` failed or was cancelled before usage was known: like on_response
  /// without changing token_total.
  void on_request_failed(const std::string& program, double now_ms);
  /// A harness tool event of `program` (issue 49: dyn-route serve --tool-events-endpoint):
  /// `running` at tool_start, not at tool_end / tool_error. The program is ACTING while a tool
  /// runs: a start with no request in flight makes it ACTING (since `now_ms` unless the response
  /// already did) and pauses it when it was marked for its next tool boundary; the end of its
  /// last running tool makes it REASONING (its next request is due, so it is not paused in the
  /// moment before it arrives). Without events, boundaries stay inferred from responses
  /// (on_response). Returns false when the program is unknown or terminated.
  bool on_tool_event(const std::string& program, bool running, double now_ms);
  /// `session_final`: the program ends (TERMINATED) and stops counting anywhere. Waiting
  /// requests of it are released first so that nothing blocks forever: returned for callers
  /// that wait without blocking (admit()).
  std::vector<AdmissionRelease> release_program(const std::string& program, double now_ms);
  /// The waiting request `ticket` of `program` went away before a release (its client hung up,
  /// issue 51.4): no tick releases it now, and a program left with nothing waiting or in flight
  /// is between turns (ACTING since `now_ms`), as after a failed request. False when the ticket
  /// is not waiting: a tick or release_program() released it already (it counts in flight, so
  /// its end is reported with on_request_failed()).
  bool withdraw(const std::string& program, uint64_t ticket, double now_ms);

  /// One scheduler tick at `now_ms` (call every scheduler_interval_s): forced resumes of
  /// requests that waited resume_timeout_s (onto the worker with most headroom), then SPEC 9
  /// steps (1) soft demotion, (2) best-fit-decreasing resume, (3) pause over pause_threshold.
  /// Blocking waiters released here are woken; all releases are also returned.
  TickReport tick(double now_ms);

  /// Live use: admit() and, when it must wait, block until a tick releases the request. `clock`
  /// supplies admit time and release time. Returns the decision with admitted == true (and
  /// `priority_jump_s`), plus the wait in `*waited_ms`; returns admitted == false only after
  /// shutdown().
  AdmitDecision admit_blocking(const std::string& program, const std::string& parent, uint64_t prompt_tokens,
                               const Clock& clock, double* waited_ms);
  /// Wakes every blocked admit_blocking() (they return admitted == false) and refuses new waits.
  void shutdown();

  /// Programs (TERMINATED ones are dropped), sorted by id.
  std::vector<ProgramView> programs(double now_ms) const;
  /// {"admission", "now_ms", "workers": [{worker, capacity_tokens, used_tokens, utilization,
  /// resume_used_tokens, programs}], "programs": [...], "stats": {...}} for GET /v1/programs.
  Json snapshot_json(double now_ms) const;
  AdmissionStats stats() const;
  /// Pause-side utilisation of worker `id` (0 when unknown), for tests and reports.
  double utilization(int worker_id, double now_ms) const;

 private:
  struct Program {
    std::string id, parent;
    ProgramLifecycle lifecycle = ProgramLifecycle::kActive;
    ProgramStatus status = ProgramStatus::kReasoning;
    std::optional<int> worker, last_worker;
    uint64_t token_total = 0, step_count = 0, inflight = 0, pause_count = 0, tools_running = 0;
    bool marked_for_pause = false, soft_demoted = false, resume_boost = false;
    double acting_since_ms = 0, paused_since_ms = 0, paused_ms_total = 0;
    uint64_t pause_order = 0;                          ///< FIFO order among paused programs (ties)
    std::vector<std::pair<uint64_t, double>> waiting;  ///< (ticket, since_ms)
  };

  AdmitDecision admit_locked(const std::string& program, const std::string& parent, uint64_t prompt_tokens,
                             double now_ms);
  bool worker_live(int id) const;
  uint64_t capacity(int id) const;
  double pause_side_used(int id, double now_ms) const;
  double resume_side_used(int id, double now_ms) const;
  double program_weight_resume(const Program& p, double now_ms) const;
  bool any_waiting_paused() const;
  int least_used_with_room(uint64_t tokens, double now_ms) const;
  int most_headroom(double now_ms) const;
  void pause(Program& p, double now_ms);
  void activate(Program& p, int worker, double now_ms, bool forced, TickReport* report);
  double jump_for(Program& p);

  AdmissionConfig config_;
  std::vector<AdmissionWorker> workers_;  ///< sorted by id
  std::map<std::string, Program> programs_;
  AdmissionStats stats_;
  uint64_t next_ticket_ = 1, next_pause_order_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, AdmissionRelease> done_;  ///< releases for blocked waiters
  std::set<uint64_t> blocking_;                ///< tickets held by admit_blocking callers
  bool shutdown_ = false;
};

/// Calls `controller.tick(clock.now_ms())` every scheduler_interval_s on its own thread until
/// destroyed or stop()ped; waits on a condition variable between ticks (stop wakes it at once).
/// `on_tick` (optional) gets each tick's report, for requests that wait without blocking.
class AdmissionTicker {
 public:
  AdmissionTicker(AdmissionController& controller, const Clock& clock,
                  std::function<void(const TickReport&)> on_tick = nullptr);
  ~AdmissionTicker();
  void stop();

 private:
  AdmissionController& controller_;
  const Clock& clock_;
  std::function<void(const TickReport&)> on_tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dyn::route
