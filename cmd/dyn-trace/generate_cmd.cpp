// dyn-trace generate: options -> trace::generate_agent_workload -> Mooncake JSONL rows.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "dyn/base/diag.h"
#include "dyn/trace/generate.h"
#include "dyn/records/workload.h"

void setup_generate(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::AgentWorkloadOptions g;
    dyn::cli::OutputOptions out;
    bool summary = false;
  };
  auto o = std::make_shared<Opts>();
  auto& g = o->g;
  CLI::App* sub = app.add_subcommand(
      "generate", "Generate a synthetic agent-session workload (Mooncake JSONL with session extensions)");
  sub->add_option("--seed", g.seed, "Random seed (same seed and options = same file)")->capture_default_str();
  sub->add_option("--block-size", g.block_size, "Tokens per hash id")->capture_default_str();
  sub->add_option("--sessions", g.sessions, "Root agent sessions")->capture_default_str();
  sub->add_option("--session-rate", g.session_rate_per_s,
                  "Root sessions started per second (Poisson); 0 starts all at t=0")
      ->capture_default_str();
  sub->add_option("--turns-min", g.turns_min, "Fewest turns per root session")->capture_default_str();
  sub->add_option("--turns-max", g.turns_max, "Most turns per root session")->capture_default_str();
  sub->add_option("--system-prompt-tokens", g.system_prompt_tokens,
                  "System prompt shared by every session (same hash ids)")
      ->capture_default_str();
  sub->add_option("--task-tokens", g.task_tokens, "Mean first user message (task) per session")->capture_default_str();
  sub->add_option("--tool-output-tokens", g.tool_output_tokens,
                  "Mean tool result appended to the context after each turn")
      ->capture_default_str();
  sub->add_option("--output-tokens", g.output_tokens, "Mean completion tokens per turn")->capture_default_str();
  sub->add_option("--tool-gap-ms", g.tool_gap_ms, "Mean tool time between turns (exponential), written as delay")
      ->capture_default_str();
  sub->add_option("--subagent-probability", g.subagent_probability, "Chance that a root turn spawns a subagent session")
      ->capture_default_str();
  sub->add_option("--subagent-turns-min", g.subagent_turns_min, "Fewest turns per subagent")->capture_default_str();
  sub->add_option("--subagent-turns-max", g.subagent_turns_max, "Most turns per subagent")->capture_default_str();
  sub->add_option("--max-context-tokens", g.max_context_tokens, "A session ends before its context would exceed this")
      ->capture_default_str();
  sub->add_flag("--wait-for", g.wait_for,
                "Add wait_for: a subagent starts after the parent turn that spawned it, and the parent's next "
                "turn waits for the subagent's last turn");
  sub->add_flag("--summary", o->summary, "Print sessions, rows, tokens and the aggregate working set on stderr");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, nullptr, &o->out, [o](dyn::cli::Sink& sink) {
    dyn::trace::AgentWorkloadSummary s;
    auto rows = dyn::trace::generate_agent_workload(o->g, &s);
    dyn::io::Output* out = &sink.get();
    for (auto& r : rows) out->line(dyn::records::workload_row_to_json(r).dump());
    sink.close();
    if (o->summary)
      std::fprintf(stderr,
                   "sessions %llu subagents %llu rows %llu input_tokens %llu output_tokens %llu "
                   "max_context_tokens %llu working_set_tokens %llu\n",
                   static_cast<unsigned long long>(s.sessions), static_cast<unsigned long long>(s.subagents),
                   static_cast<unsigned long long>(s.rows), static_cast<unsigned long long>(s.input_tokens),
                   static_cast<unsigned long long>(s.output_tokens),
                   static_cast<unsigned long long>(s.max_context_tokens),
                   static_cast<unsigned long long>(s.working_set_tokens));
    return 0;
  });
}
