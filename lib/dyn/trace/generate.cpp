// Seeded generator of agent-session workloads: contexts that grow turn by turn, tool gaps, subagents.
#include "dyn/trace/generate.h"

#include <algorithm>
#include <cmath>

#include "dyn/base/error.h"
#include "dyn/base/random.h"

namespace dyn::trace {

namespace {

// A session's context as hash-id blocks: `ids` covers ceil(tokens / B) blocks, the last possibly
// partial.
struct Context {
  uint64_t tokens = 0;
  std::vector<uint64_t> ids;
};

// Appends `n` tokens. Complete blocks keep their ids (the prefix is unchanged); a partial last
// block gets a new id because new text completes it differently than any other session would.
void extend(Context& c, uint64_t n, uint32_t b, uint64_t& next_id) {
  c.ids.resize(c.tokens / b);
  c.tokens += n;
  while (c.ids.size() < (c.tokens + b - 1) / b) c.ids.push_back(next_id++);
}

uint64_t draw_tokens(Rng& rng, uint64_t mean) {
  if (mean == 0) return 0;
  double v = rng.gamma(2.0, static_cast<double>(mean) / 2.0);
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(v)));
}

std::string session_name(uint64_t i, uint64_t n) {
  // Zero-padded to the width of the largest index (at least 3), so names sort like numbers.
  size_t width = std::max<size_t>(3, std::to_string(n > 0 ? n - 1 : 0).size());
  std::string num = std::to_string(i);
  if (num.size() < width) num.insert(0, width - num.size(), '0');
  return "agent-" + num;
}

struct Session {
  double start_ms = 0;
  uint64_t order = 0;  // creation order (ties)
  std::vector<WorkloadRow> rows;
};

}  // namespace

std::vector<WorkloadRow> generate_agent_workload(const AgentWorkloadOptions& o, AgentWorkloadSummary* summary) {
  if (o.block_size == 0) throw Fatal(kExitUsage, "--block-size must be > 0");
  if (o.turns_min == 0 || o.turns_min > o.turns_max) throw Fatal(kExitUsage, "need 1 <= --turns-min <= --turns-max");
  if (o.subagent_turns_min == 0 || o.subagent_turns_min > o.subagent_turns_max)
    throw Fatal(kExitUsage, "need 1 <= --subagent-turns-min <= --subagent-turns-max");
  if (!(o.subagent_probability >= 0 && o.subagent_probability <= 1))
    throw Fatal(kExitUsage, "--subagent-probability must be in [0, 1]");
  if (!(o.session_rate_per_s >= 0) || !(o.tool_gap_ms >= 0)) throw Fatal(kExitUsage, "rates and gaps must be >= 0");
  if (o.max_context_tokens <= o.system_prompt_tokens)
    throw Fatal(kExitUsage, "--max-context-tokens must exceed --system-prompt-tokens");

  const uint32_t b = o.block_size;
  Rng rng(o.seed);
  uint64_t next_id = 0;
  // The shared system prompt: its complete blocks are identical in every session.
  std::vector<uint64_t> system_ids;
  for (uint64_t i = 0; i < o.system_prompt_tokens / b; ++i) system_ids.push_back(next_id++);
  const uint64_t system_full = (o.system_prompt_tokens / b) * b;

  AgentWorkloadSummary sum;
  std::vector<Session> sessions;
  uint64_t order = 0;

  // One session's turns. `turn_est_ms` receives the estimated start offset of each turn (from
  // the session start) so subagents can be placed near the turn that spawned them.
  auto run_session = [&](const std::string& id, const std::string& parent, double start_ms, uint64_t turns,
                         std::vector<double>* turn_est_ms) {
    Session s;
    s.start_ms = start_ms;
    s.order = order++;
    Context ctx;
    ctx.ids = system_ids;
    ctx.tokens = system_full;
    extend(ctx, (o.system_prompt_tokens - system_full) + draw_tokens(rng, o.task_tokens), b, next_id);
    double est = 0;
    for (uint64_t t = 0; t < turns; ++t) {
      WorkloadRow r;
      r.session_id = id;
      r.parent_session_id = parent;
      r.request_id = id + ":" + std::to_string(t);
      r.input_length = ctx.tokens;
      r.hash_ids = ctx.ids;
      r.output_length = draw_tokens(rng, o.output_tokens);
      double gap = o.tool_gap_ms > 0 ? rng.exponential(o.tool_gap_ms) : 0.0;
      if (t == 0) r.timestamp_ms = std::round(start_ms);
      else r.delay_ms = std::round(gap);
      if (turn_est_ms) turn_est_ms->push_back(est);
      est += (t == 0 ? 0 : gap) + *r.output_length * o.est_ms_per_output_token +
             static_cast<double>(r.input_length) / 1000.0 * o.est_ms_per_kilotoken_input;
      sum.input_tokens += r.input_length;
      sum.output_tokens += *r.output_length;
      uint64_t grown = ctx.tokens + *r.output_length;
      s.rows.push_back(std::move(r));
      uint64_t tool = draw_tokens(rng, o.tool_output_tokens);
      if (t + 1 == turns || grown + tool > o.max_context_tokens) break;
      extend(ctx, *s.rows.back().output_length + tool, b, next_id);
    }
    uint64_t peak = s.rows.back().input_length + *s.rows.back().output_length;
    sum.max_context_tokens = std::max(sum.max_context_tokens, peak);
    sum.working_set_tokens += peak;
    sum.rows += s.rows.size();
    sessions.push_back(std::move(s));
    return sessions.size() - 1;
  };

  double t_ms = 0;
  for (uint64_t i = 0; i < o.sessions; ++i) {
    if (i > 0 && o.session_rate_per_s > 0) t_ms += rng.exponential(1000.0 / o.session_rate_per_s);
    std::string root = session_name(i, o.sessions);
    uint64_t turns = o.turns_min + rng.below(o.turns_max - o.turns_min + 1);
    std::vector<double> est;
    size_t root_index = run_session(root, "", t_ms, turns, &est);
    ++sum.sessions;
    // Subagents: decided per root turn except the last (a parent waits for its subagent's
    // answer before its next turn). One generator for everything: the file is a function of
    // (seed, options).
    uint64_t root_turns = sessions[root_index].rows.size();
    uint64_t sub_count = 0;
    for (uint64_t k = 0; k + 1 < root_turns; ++k) {
      if (o.subagent_probability <= 0 || rng.uniform() >= o.subagent_probability) continue;
      std::string sub = root + ".sub" + std::to_string(++sub_count);
      uint64_t sturns = o.subagent_turns_min + rng.below(o.subagent_turns_max - o.subagent_turns_min + 1);
      const WorkloadRow& spawn = sessions[root_index].rows[k];
      double spawn_ms = t_ms + est[k] + *spawn.output_length * o.est_ms_per_output_token;
      std::string spawn_id = spawn.request_id;
      size_t si = run_session(sub, root, spawn_ms, sturns, nullptr);
      ++sum.subagents;
      if (o.wait_for) {
        sessions[si].rows.front().wait_for.push_back(spawn_id);
        sessions[root_index].rows[k + 1].wait_for.push_back(sessions[si].rows.back().request_id);
      }
    }
  }
  std::stable_sort(sessions.begin(), sessions.end(), [](const Session& a, const Session& c) {
    return a.start_ms != c.start_ms ? a.start_ms < c.start_ms : a.order < c.order;
  });
  std::vector<WorkloadRow> rows;
  rows.reserve(sum.rows);
  for (auto& s : sessions)
    for (auto& r : s.rows) {
      r.index = rows.size();
      r.hash_ids_consistent = true;
      rows.push_back(std::move(r));
    }
  if (summary) *summary = sum;
  return rows;
}

}  // namespace dyn::trace
