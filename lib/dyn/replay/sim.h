// The simulated cluster (dyn-replay --sim): N engines of SPEC 8 behind the real router on a
// virtual clock, replaying a workload with SPEC 6.1 semantics and writing request_end rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dyn/engine/config.h"
#include "dyn/io/output.h"
#include "dyn/route/admission.h"
#include "dyn/kvpolicy/kv_policy.h"
#include "dyn/replay/schedule.h"
#include "dyn/route/config.h"
#include "dyn/route/quality.h"
#include "dyn/route/queue.h"
#include "dyn/tokens/reference.h"
#include "dyn/records/workload.h"

namespace dyn::replay {

/// Why an AIPerf multi_turn workload cannot be simulated (a usage error of --sim).
inline constexpr const char* kMultiTurnSim =
    "multi_turn: each turn follows the live replies of the turns before it, which the simulator does not produce; "
    "replay it against an endpoint (dyn-mocker for a mock one)";

/// One request as the simulator saw it (SimOptions::on_request), virtual ms.
struct SimRequest {
  double start_ms = 0;   ///< sent (reached the engine)
  double first_ms = -1;  ///< first token out (-1: none)
  double end_ms = 0;     ///< last token out, or the error
  uint64_t output_tokens = 0;
  bool error = false;
};

struct SimOptions {
  uint32_t workers = 1;
  engine::EngineConfig engine;  ///< per worker; block_size must equal router.block_size
  route::RouterConfig router;
  uint64_t epoch_unix_ms = 0;  ///< virtual time 0 as unix ms in the records
  std::string model = "mock-model";
  /// Program-aware admission (SPEC 9, `--admission thunderagent`): requests of a session wait
  /// while their program is paused and are released by the scheduler tick (every
  /// scheduler_interval_s of virtual time); admitted programs go to the controller's worker.
  route::AdmissionConfig admission;
  /// The router queue (SPEC 3.4, dyn-route serve's --router-policy-config, --queue-size,
  /// --queue-timeout-secs): while router has a busy threshold, a request that no eligible worker
  /// (or not its pinned one) can take waits, in policy order, until a step's end frees one; a
  /// full queue answers 429 and the time limit 503 (rows with status "error", those codes and
  /// dyn.router_queue_ms). Priorities resolve as serve resolves them either way (the workload's
  /// `priority` as the body's nvext.agent_hints.priority, the policy file's session defaults),
  /// and the resolved one reaches the engine.
  route::QueueConfig queue;
  /// Load controls with the live replay's meaning (SPEC 6.3, `dyn-replay` flags; defaults =
  /// the timestamps as recorded):
  /// - schedule.mode kFixedSchedule: rows start at (timestamp - zero) / speedup, where zero is
  ///   start_offset_ms, else the first kept timestamp with auto_offset, else 0; rows outside the
  ///   inclusive [start, end] offsets are not replayed (a delay-driven later turn goes with its
  ///   session's first turn).
  /// - kRequestRate: rows with nothing to wait for start, in workload order, at the arrivals of
  ///   a constant, Poisson or gamma process of request_rate per second (seeded by
  ///   schedule.seed; the same arrivals as the live replay's plan); the first at 0.
  /// - kConcurrency: those rows all become ready at 0; `concurrency` (>= 1) caps them.
  /// - In every mode: speedup divides session delays, recorded gaps and tool_wait_ms; with
  ///   request_count only the first N kept rows (workload order) run; a row whose previous turn
  ///   or wait_for request was cut keeps its own timing; outside the fixed schedule a child
  ///   session's first turn waits for its parent's latest preceding turn (+ its delay).
  replay::ScheduleOptions schedule;
  /// Requests in flight at most (0 = no cap), on the virtual clock: a request whose start has
  /// come waits for a free slot (earliest-ready first, then workload order) and its TTFT and
  /// latency count from when it was sent, as the live client measures them. A request paused by
  /// admission control is in flight (the client sent it).
  uint64_t concurrency = 0;
  /// Send nothing at or after this many seconds of virtual time (0 = no limit); rows not sent
  /// get no row and are counted in SimSummary::not_sent.
  double duration_s = 0;
  /// With duration_s: requests still in flight this many seconds after it are cancelled
  /// (AIPerf's --benchmark-grace-period; INFINITY = none), their rows say cancelled and they count
  /// in SimSummary::cancelled.
  double grace_s = 30;
  /// Yardsticks (`--reference`, issue 18): after the run, its requests (each from dispatch to its
  /// last token, with the engine blocks it was routed on) go through one KV cache of every
  /// worker's blocks under each policy (tokens::reference_hit_tokens); SimSummary::references.
  std::vector<tokens::ReferencePolicy> references;
  /// Called with each request_end row as it is written (dyn-replay's summary table); none = not.
  std::function<void(const std::string&)> on_row;
  /// Concurrency cap: the time from a request's end to the next request taking its slot, as a
  /// closed-loop client's round trip (0 = the same instant: it joins the engine step that starts
  /// then). With any value below a step's time, the new request misses the step already under way
  /// when it reaches the engine, as on a real server; and of the requests sent at the start (the
  /// concurrency mode's first wave) only the first finds the engine idle and starts a step alone,
  /// the others reaching it this much later (dyn-bench calibrate / fidelity).
  double client_latency_ms = 0;
  /// Write a request_end row per request to the output (false: only the summary and on_request).
  bool write_rows = true;
  /// Called once per request as it completes (in completion order), when set.
  std::function<void(const SimRequest&)> on_request;
  /// KV retention policies (SPEC 6.4, `--kv-policy`): the hints the router sends for sessions;
  /// any of them turns the engines' KV hints on (engine.kv_hints' cap and TTL bound them). A turn
  /// ends in a tool call when the session's next row has tool_wait_ms (loaded input; a streamed
  /// one has no wait_for, so no tool waits).
  kvpolicy::KvPolicyConfig kv_policy;
};

struct SimSummary {
  uint64_t requests = 0, errors = 0;
  double simulated_ms = 0;  ///< last response end - first request start
  double wall_ms = 0;
  uint64_t input_tokens = 0, cached_tokens = 0, output_tokens = 0;
  /// Share of the input tokens (rows with hash ids) in full engine blocks an earlier row had:
  /// an infinite prefix cache at the engines' block size, in workload order (SPEC 7).
  double theoretical_hit = 0;
  uint64_t preemptions = 0;
  uint64_t outside_offsets = 0;  ///< rows dropped by the fixed-schedule offsets
  uint64_t over_count = 0;       ///< rows dropped by request_count
  uint64_t not_sent = 0;         ///< rows not started before duration_s ran out
  uint64_t cancelled = 0;        ///< in flight when the grace period after duration_s ended
  /// SimOptions::references: per policy, the pooled cache's hit rate (cached / input tokens)
  /// over the requests that completed without error; `reference_run_hit` is this run's own over
  /// the same requests, `reference_blocks` the pool's capacity (workers x KV blocks).
  struct Reference {
    tokens::ReferencePolicy policy;
    double hit = 0;
  };
  std::vector<Reference> references;
  double reference_run_hit = 0;
  uint64_t reference_blocks = 0;
  /// run_sim_files streamed the input: requests (rows read and not yet dropped) held at most.
  bool streamed = false;
  uint64_t held_peak = 0;
  /// The cluster's configured KV state in dyn's own memory (not the GPUs' KV bytes): workers x
  /// KV blocks each, and the bytes kept per block by an engine's pool and the router's index
  /// (engine::KvPool::kBytesPerBlock + route::Router::kIndexBytesPerBlock).
  uint64_t kv_state_blocks = 0, kv_state_bytes_per_block = 0;
  /// Every placement measured (issue 55), and the router's predicted cached tokens against the
  /// simulated engines' over the requests that completed.
  route::QualityTotals quality;
  route::StalenessTotals staleness;
  /// SimOptions::kv_policy: the hints sent per policy.
  kvpolicy::KvPolicyCounts kv_policy;
};

/// Runs the workload through `options.workers` engines and the router (the same Router the live
/// frontend uses, on a FakeClock), one discrete event at a time, and writes one request_end row
/// per request to `out` in completion order (docs/records.md; event_source "simulator").
///
/// Schedule (SPEC 6.1): a row without a session arrives at its timestamp; a row that depends on
/// others (a later turn of a session on the previous turn, a row with `wait_for` on every listed
/// request) arrives when the last of them has completed, plus its `delay` (or, with timestamps
/// only, the recorded gap between the session's two turns' timestamps), plus its `tool_wait_ms`,
/// as the live schedule (build_plan) times it. The load
/// controls of SimOptions (schedule, concurrency, duration_s) change this as they change the
/// live replay; their defaults leave it exactly as described.
///
/// Blocks: a row's hash ids (workload block size B) are mapped to engine blocks of size b with
/// tokens::sequence_from_ids: with b dividing B each id expands into B/b engine blocks whose hashes
/// are derived from (id, token range) and chained, so rows sharing leading ids share exactly the
/// same leading engine blocks; a trailing partial block is never hashed. `text_input` rows are
/// tokenized (SPEC 4.2) and hashed like dyn-mocker does.
///
/// Engine steps: an engine steps whenever it has work; arrivals at the same virtual instant join
/// the same step; outputs become visible at step end (start + SPEC 8 duration). TTFT = first
/// token - arrival; total = last token - arrival; avg ITL = (total - TTFT) / (OSL - 1).
/// Errors: a row whose request can never fit an engine, or the router refusing it, gets a row with
/// dyn.status "error"; an unknown wait_for id is Fatal(kExitBadData) before the run.
/// Deterministic for a given workload and options. Not thread-safe (single-threaded).
SimSummary run_sim(const records::Workload& workload, const SimOptions& options, io::Output& out);

/// run_sim over JSONL workload files ("-" or none = stdin), read with `wo` (load_workload's
/// parsing, checks and reports). On the fixed schedule a file input streams (issue 17): a first
/// pass checks every row and learns each session's last turn, then the run reads rows as the
/// virtual clock reaches their timestamps and drops each request once it and all before it are
/// complete, so memory follows the cluster and the requests in flight, not the trace (the
/// --reference yardsticks keep every request's blocks, and the theoretical hit rate every
/// distinct block). Input that cannot stream (stdin, other load modes, Dynamo trace records,
/// rows out of timestamp order, wait_for) is loaded whole. Either way the rows and the summary
/// are those of run_sim on load_workload's result. Errors: Fatal(kExitBadData) for a rejected
/// workload or one with no usable rows (no_workload_rows_message), and as run_sim.
SimSummary run_sim_files(const std::vector<std::string>& paths, const records::WorkloadOptions& wo,
                         const SimOptions& options, io::Output& out);

}  // namespace dyn::replay
