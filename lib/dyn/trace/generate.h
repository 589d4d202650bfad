// Synthetic agent-session workloads (SPEC 6.1 rows with session extensions): growing contexts,
// tool gaps, subagents; seeded, for admission and affinity experiments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dyn/records/workload.h"

namespace dyn::trace {

/// Shape of a generated agent workload. Token counts are means of gamma(shape 2) draws (so every
/// draw is positive and the spread is realistic, CV ~0.7); times in ms.
struct AgentWorkloadOptions {
  uint64_t seed = 0;
  /// B of hash_ids.
  uint32_t block_size = records::kMooncakeBlockSize;
  uint64_t sessions = 100;                 ///< root agent sessions
  double session_rate_per_s = 1.0;         ///< Poisson arrivals of root sessions; 0 = all at t = 0
  uint64_t turns_min = 4, turns_max = 16;  ///< turns per root session, uniform
  uint64_t system_prompt_tokens = 2048;    ///< shared by every session (identical hash ids)
  uint64_t task_tokens = 1024;             ///< mean first user message (the task), per session
  uint64_t tool_output_tokens = 1500;      ///< mean tool result appended to the context per turn
  uint64_t output_tokens = 300;            ///< mean completion per turn (also appended to the context)
  double tool_gap_ms = 5000;               ///< mean tool time between turns (exponential): the row's delay
  double subagent_probability = 0.1;       ///< chance that a root turn spawns a subagent
  uint64_t subagent_turns_min = 2, subagent_turns_max = 6;
  uint64_t max_context_tokens = 131072;  ///< a session ends before its context would exceed this
  /// Add `wait_for` (SPEC 6.1 agentic form): a subagent's first turn waits for the parent turn
  /// that spawned it, and the parent's next turn waits for the subagent's last turn.
  bool wait_for = false;
  /// Time estimate per turn, used only to order the rows and to place a subagent's first
  /// `timestamp` at its spawning turn's estimated end: ms per output token + ms per 1,000 input
  /// tokens.
  double est_ms_per_output_token = 20, est_ms_per_kilotoken_input = 30;
};

/// What was generated, for a summary line.
struct AgentWorkloadSummary {
  uint64_t sessions = 0, subagents = 0, rows = 0;
  uint64_t input_tokens = 0, output_tokens = 0;
  uint64_t max_context_tokens = 0;
  /// Sum over sessions of their largest context: the KV working set if every session were live
  /// at once (tokens).
  uint64_t working_set_tokens = 0;
};

/// Generates the rows (deterministic for a seed). Each session's turn k+1 prompt extends turn k's
/// prompt by its output and a tool result, so its hash ids extend turn k's complete blocks (the
/// partial last block changes, as it would with real text). Every session starts with the same
/// system-prompt blocks. First turns carry `timestamp`, later turns `delay` (the tool gap);
/// subagents have their own session_id plus `parent_session_id`. `request_id` is
/// "<session>:<turn>". Rows are ordered by estimated start, every row after all it waits for (its
/// previous turn, a subagent's spawning turn, with wait_for the subagent a parent's turn waits
/// for), so first-turn timestamps never decrease down the file and live and simulated replays
/// can follow every dependency. Throws Fatal(2) for impossible options (block size 0, turns_min >
/// turns_max, probability outside [0, 1], ...).
std::vector<records::WorkloadRow> generate_agent_workload(const AgentWorkloadOptions& options,
                                                          AgentWorkloadSummary* summary = nullptr);

}  // namespace dyn::trace
