// The simulated cluster (dyn-replay --sim): N engines of SPEC 8 behind the real router on a
// virtual clock, replaying a workload with SPEC 6.1 semantics and writing request_end rows.
#pragma once

#include <cstdint>
#include <string>

#include "dyn/engine/config.h"
#include "dyn/io/output.h"
#include "dyn/route/admission.h"
#include "dyn/route/config.h"
#include "dyn/trace/workload.h"

namespace dyn::replay {

struct SimOptions {
  uint32_t workers = 1;
  engine::EngineConfig engine;  ///< per worker; block_size must equal router.block_size
  route::RouterConfig router;
  uint64_t epoch_unix_ms = 0;   ///< virtual time 0 as unix ms in the records
  std::string model = "mock-model";
  /// Program-aware admission (SPEC 9, `--admission thunderagent`): requests of a session wait
  /// while their program is paused and are released by the scheduler tick (every
  /// scheduler_interval_s of virtual time); admitted programs go to the controller's worker.
  route::AdmissionConfig admission;
};

struct SimSummary {
  uint64_t requests = 0, errors = 0;
  double simulated_ms = 0;   ///< last response end - first request start
  double wall_ms = 0;
  uint64_t input_tokens = 0, cached_tokens = 0, output_tokens = 0;
  double theoretical_hit = 0;  ///< share of hash-id blocks seen earlier in the workload (SPEC 7)
  uint64_t preemptions = 0;
};

/// Runs the workload through `options.workers` engines and the router (the same Router the live
/// frontend uses, on a FakeClock), one discrete event at a time, and writes one request_end row
/// per request to `out` in completion order (docs/records.md; event_source "simulator").
///
/// Schedule (SPEC 6.1): a row without a session arrives at its timestamp; a later turn of a
/// session arrives when the previous turn has completed, plus its `delay` (or, with timestamps
/// only, plus the recorded gap between the two turns' timestamps); a row with `wait_for` arrives
/// no earlier than the completion of every listed request plus its `tool_wait_ms`.
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
SimSummary run_sim(const trace::Workload& workload, const SimOptions& options, io::Output& out);

}  // namespace dyn::replay
