// dyn-trace sessionize: load a Mooncake workload, infer sessions, write it back.
#include <memory>

#include "commands.h"
#include "dyn/base/diag.h"
#include "dyn/trace/sessionize.h"
#include "engine_flags.h"

void setup_sessionize(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    std::vector<std::string> inputs;
    dyn::trace::SessionizeOptions s;
    std::string perf_profile;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub =
      app.add_subcommand("sessionize", "Infer session_id and delay in Mooncake rows from hash-id prefix chains");
  sub->add_option("files", o->inputs, "Mooncake JSONL files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--block-size", o->s.block_size, "Tokens per hash id")
      ->check(CLI::Range(1u, 1u << 20))
      ->default_val(512)
      ->type_name("B");
  sub->add_option("--shared-fanout", o->s.shared_fanout,
                  "A prefix continued in at least N distinct ways is shared by unrelated rows (a system prompt)")
      ->check(CLI::Range(2u, 1u << 30))
      ->default_val(4)
      ->type_name("N");
  sub->add_option("--session-prefix", o->s.id_prefix, "Session ids are PREFIX followed by a counter")
      ->default_val("s")
      ->type_name("PREFIX");
  sub->add_option("--perf-profile", o->perf_profile,
                  std::string("Timing of the service-time estimate: ") + dyn::cmd::kPerfProfileHelp)
      ->type_name("PATH");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->inputs, &o->out, [o](dyn::cli::Sink& sink) {
    std::shared_ptr<const dyn::engine::PerfProfile> profile;
    if (!o->perf_profile.empty()) {
      auto p = dyn::engine::PerfProfile::load(o->perf_profile);
      if (!p) throw dyn::Fatal(p.error().exit_code, "--perf-profile " + p.error().message);
      profile = *p;
      o->s.profile = profile.get();
    }
    dyn::records::WorkloadOptions wo;
    wo.block_size = o->s.block_size;
    wo.require_timestamps = true;
    auto w = dyn::records::load_workload(o->inputs, wo);
    if (w.from_dynamo)
      throw dyn::Fatal(dyn::kExitBadData, "input holds Dynamo trace records, which carry their own sessions");
    // Bad rows were reported with file:line and are left out; the good rows still flow (dyn(7)),
    // and the exit status says some were bad.
    if (!w.ok())
      dyn::diag::warning("", std::to_string(w.errors.size()) + " bad row" + (w.errors.size() == 1 ? "" : "s") +
                                 " left out; the other " + std::to_string(w.rows.size()) + " sessionized");
    auto st = dyn::trace::sessionize(w.rows, o->s);
    dyn::io::Output* out = &sink.get();
    for (const auto& r : w.rows) out->line(dyn::records::workload_row_to_json(r).dump());
    sink.close();
    dyn::diag::note("sessionize: " + std::to_string(st.rows) + " rows -> " + std::to_string(st.sessions) +
                    " sessions (" + std::to_string(st.multi_turn_sessions) + " with 2+ turns holding " +
                    std::to_string(st.multi_turn_rows) + " rows; " + std::to_string(st.continued) +
                    " later turns; longest " + std::to_string(st.longest) + " turns; " + std::to_string(st.forks) +
                    " forks with parent_session_id" +
                    (st.kept ? "; " + std::to_string(st.kept) + " rows kept their session_id" : std::string()) + ")");
    return w.ok() ? 0 : static_cast<int>(dyn::kExitBadData);
  });
}
