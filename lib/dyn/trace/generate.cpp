// Seeded generator of agent-session workloads: contexts that grow turn by turn, tool gaps, subagents.
#include "dyn/trace/generate.h"

#include <algorithm>
#include <cmath>
#include <queue>

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
  double start_ms = 0;  // a root's first timestamp (a subagent's comes from its spawning turn)
  std::vector<records::WorkloadRow> rows;
};

// "Row `to` starts after row `from` ends" (rows by (session, turn)): a subagent's first turn after
// the turn that spawned it, and with --wait-for the parent's next turn after the subagent's last.
struct Link {
  size_t from_s, from_t, to_s, to_t;
};

// The rows in the order they would start, every row after all it waits for: its previous turn
// (ends + its delay), a subagent's spawning turn, and with --wait-for the subagent a parent's
// turn waits for. Replays need that order: a wait_for naming a later row is refused, and outside
// the fixed schedule a subagent's first turn follows its parent's latest preceding turn (SPEC
// 6.1), which must be the spawning turn. Start estimates (a turn lasts est_ms_per_output_token x
// its output + est_ms_per_kilotoken_input x its input / 1000) break the ties of that partial order
// and give each subagent's first turn its timestamp: its spawning turn's estimated end.
std::vector<records::WorkloadRow> order_rows(std::vector<Session>& sessions, const std::vector<Link>& links,
                                             const AgentWorkloadOptions& o) {
  std::vector<size_t> first(sessions.size() + 1, 0);  // node of (s, t) = first[s] + t
  for (size_t s = 0; s < sessions.size(); ++s) first[s + 1] = first[s] + sessions[s].rows.size();
  const size_t n = first.back();
  std::vector<std::vector<size_t>> next(n);
  std::vector<uint32_t> pending(n, 0);
  std::vector<double> ready(n, 0);
  auto row = [&](size_t v) -> records::WorkloadRow& {
    size_t s = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), v) - first.begin()) - 1;
    return sessions[s].rows[v - first[s]];
  };
  for (size_t s = 0; s < sessions.size(); ++s)
    for (size_t t = 1; t < sessions[s].rows.size(); ++t) {
      next[first[s] + t - 1].push_back(first[s] + t);
      ++pending[first[s] + t];
    }
  for (const Link& l : links) {
    next[first[l.from_s] + l.from_t].push_back(first[l.to_s] + l.to_t);
    ++pending[first[l.to_s] + l.to_t];
  }
  using Ready = std::pair<double, size_t>;  // estimated start, generation order
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> q;
  for (size_t s = 0; s < sessions.size(); ++s)
    if (!pending[first[s]]) q.emplace(sessions[s].start_ms, first[s]);
  std::vector<records::WorkloadRow> rows;
  rows.reserve(n);
  while (!q.empty()) {
    auto [start, v] = q.top();
    q.pop();
    records::WorkloadRow& r = row(v);
    const double end = start + static_cast<double>(r.output_length.value_or(0)) * o.est_ms_per_output_token +
                       static_cast<double>(r.input_length) / 1000.0 * o.est_ms_per_kilotoken_input;
    for (size_t w : next[v]) {
      const records::WorkloadRow& x = row(w);
      const bool same_session = x.session_id == r.session_id;
      ready[w] = std::max(ready[w], end + (same_session ? x.delay_ms.value_or(0) : 0.0));
      if (--pending[w] == 0) q.emplace(ready[w], w);
    }
    if (!r.timestamp_ms && !r.delay_ms) r.timestamp_ms = std::round(start);  // a subagent's first turn
    r.index = rows.size();
    r.hash_ids_consistent = true;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

std::vector<records::WorkloadRow> generate_agent_workload(const AgentWorkloadOptions& o,
                                                          AgentWorkloadSummary* summary) {
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
  std::vector<Link> links;

  // One session's turns (a subagent's first timestamp is set when the rows are ordered).
  auto run_session = [&](const std::string& id, const std::string& parent, double start_ms, uint64_t turns) {
    Session s;
    s.start_ms = start_ms;
    Context ctx;
    ctx.ids = system_ids;
    ctx.tokens = system_full;
    extend(ctx, (o.system_prompt_tokens - system_full) + draw_tokens(rng, o.task_tokens), b, next_id);
    for (uint64_t t = 0; t < turns; ++t) {
      records::WorkloadRow r;
      r.session_id = id;
      r.parent_session_id = parent;
      r.request_id = id + ":" + std::to_string(t);
      r.input_length = ctx.tokens;
      r.hash_ids = ctx.ids;
      r.output_length = draw_tokens(rng, o.output_tokens);
      double gap = o.tool_gap_ms > 0 ? rng.exponential(o.tool_gap_ms) : 0.0;
      if (t > 0) r.delay_ms = std::round(gap);
      else if (parent.empty()) r.timestamp_ms = std::round(start_ms);
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
    size_t root_index = run_session(root, "", t_ms, turns);
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
      std::string spawn_id = sessions[root_index].rows[k].request_id;
      size_t si = run_session(sub, root, 0, sturns);
      ++sum.subagents;
      links.push_back({root_index, k, si, 0});
      if (o.wait_for) {
        sessions[si].rows.front().wait_for.push_back(spawn_id);
        sessions[root_index].rows[k + 1].wait_for.push_back(sessions[si].rows.back().request_id);
        links.push_back({si, sessions[si].rows.size() - 1, root_index, k + 1});
      }
    }
  }
  std::vector<records::WorkloadRow> rows = order_rows(sessions, links, o);
  if (summary) *summary = sum;
  return rows;
}

}  // namespace dyn::trace
