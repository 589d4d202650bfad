// Session inference for session-less Mooncake workloads: prefix chains of hash ids become
// session_id, parent_session_id (forks) and delay (SPEC 6.1 session extensions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/engine/profile.h"
#include "dyn/records/workload.h"

namespace dyn::trace {

/// Estimated service time of one request in ms, used to turn recorded arrival gaps into
/// think-time delays: engine::prefill_time_ms of the uncached tokens in one step (SPEC 8) plus
/// `output_tokens` decode steps of an idle engine (engine::decode_time_ms(0), 5.74 ms); with a
/// timing profile (--perf-profile), its request_ms for the request alone (one prefill step, no
/// other sequences). Inputs in tokens; `cached_tokens` is clamped to `input_tokens`. Pure,
/// thread-safe.
double estimate_service_ms(uint64_t input_tokens, uint64_t cached_tokens, uint64_t output_tokens,
                           const engine::PerfProfile* profile = nullptr);

struct SessionizeOptions {
  uint32_t block_size = records::kMooncakeBlockSize;  ///< tokens per hash id
  /// A prefix node with at least this many distinct full-block continuations is "shared by many
  /// unrelated rows" (a system prompt); a match must reach beyond the deepest such node.
  uint32_t shared_fanout = 4;
  std::string id_prefix = "s";                   ///< session ids are id_prefix + a 0-based counter
  const engine::PerfProfile* profile = nullptr;  ///< the service-time estimate's timing (null: SPEC 8's polynomial)
};

struct SessionizeStats {
  uint64_t rows = 0;
  uint64_t sessions = 0;             ///< distinct session ids assigned (forks included)
  uint64_t multi_turn_sessions = 0;  ///< sessions with 2 or more turns
  uint64_t multi_turn_rows = 0;      ///< rows in those sessions
  uint64_t continued = 0;            ///< rows that continue an earlier turn (= later turns)
  uint64_t forks = 0;                ///< sessions started as a fork of another (parent_session_id set)
  uint64_t longest = 0;              ///< turns of the longest session
  uint64_t kept = 0;                 ///< rows that already had a session_id (left unchanged)
};

/// Infers sessions in place over `rows` (in arrival order; timestamps required on every row).
///
/// The rule (documented in dyn-trace(1)): a row's full blocks are its hash ids, minus the last
/// one when input_length < n·B (a partial block's id changes as the conversation grows).
/// Row R *continues* row P when P is the most recent earlier row whose full blocks are a
/// non-empty prefix of R's hash ids and that prefix is longer than R's shared prefix — the
/// deepest prefix of R whose node has at least `shared_fanout` distinct full-block
/// continuations across the whole file (a system prompt that many unrelated rows share).
/// If P is the latest turn of its session, R joins that session as its next turn; otherwise the
/// session has already moved on (a regenerated or parallel branch) and R starts a new session
/// whose parent_session_id is P's session. Rows that continue nothing start new sessions.
/// Later turns get delay = max(0, R.timestamp − (P'.timestamp + estimate_service_ms(P'))), rounded to whole ms, where
/// P' is the session's previous turn and its cached tokens are the blocks of its full prefix seen
/// in any earlier row (infinite cache); timestamps are kept.
/// Rows that already have a session_id are left unchanged and take no part. Rows without hash
/// ids (text_input) start their own sessions. Deterministic; not thread-safe on `rows`.
SessionizeStats sessionize(std::vector<records::WorkloadRow>& rows, const SessionizeOptions& options);

}  // namespace dyn::trace
