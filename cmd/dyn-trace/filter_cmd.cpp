// dyn-trace filter: options -> trace::filter_traces.
#include <memory>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/trace/filter.h"

void setup_filter(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::trace::FilterOptions f;
    std::vector<std::string> where;
    std::string fields, session, parent, worker;
    dyn::cli::Format format = dyn::cli::Format::kJson;
    uint64_t since = 0, until = 0;
    bool no_header = false;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "filter", "Select trace rows by event, session, worker, time and field comparisons; project fields");
  sub->add_option("files", o->f.inputs, "Input files (gzip detected by magic bytes); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--event", o->f.events, "Keep rows whose event_type is TYPE (repeat: any of them)")
      ->allow_extra_args(false)
      ->type_name("TYPE");
  auto* session =
      sub->add_option("--session", o->session,
                      "Keep rows of session ID (agent_context.session_id; trajectory_id in the older schema)")
          ->type_name("ID");
  sub->add_flag("--with-subagents", o->f.with_subagents,
                "With --session: also rows of sessions whose parent chain leads to ID")
      ->needs(session);
  auto* parent =
      sub->add_option("--parent", o->parent, "Keep rows whose agent_context.parent_session_id is ID")->type_name("ID");
  auto* worker =
      sub->add_option("--worker", o->worker, "Keep rows whose request.worker.decode_worker_id is ID")->type_name("ID");
  auto* since = sub->add_option("--since", o->since, "Keep rows with event_time_unix_ms >= MS")->type_name("MS");
  auto* until = sub->add_option("--until", o->until, "Keep rows with event_time_unix_ms < MS")->type_name("MS");
  sub->add_option("--where", o->where,
                  "'FIELD OP VALUE' on a dotted path; OP = != < <= > >= ~ (substring); repeat to AND")
      ->allow_extra_args(false)
      ->type_name("EXPR");
  sub->add_option("--fields", o->fields, "Project these dotted paths, comma-separated; NAME=PATH renames")
      ->type_name("LIST");
  dyn::cli::add_format_option(*sub, o->format,
                              {dyn::cli::Format::kJson, dyn::cli::Format::kCsv, dyn::cli::Format::kTsv},
                              "Output format (json: the rows; tsv and csv need --fields)");
  sub->add_flag("--no-header", o->no_header, "TSV/CSV: omit the header line");
  sub->add_flag("--strict", o->f.strict, "Exit 3 when a gzip stream is truncated or a row is malformed");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->f.inputs, &o->out, [o, session, parent, worker, since, until](dyn::cli::Sink& sink) {
    auto& f = o->f;
    if (*session) f.session = o->session;
    if (*parent) f.parent = o->parent;
    if (*worker) f.worker = o->worker;
    if (*since) f.since_ms = o->since;
    if (*until) f.until_ms = o->until;
    for (const auto& w : o->where) {
      auto parsed = dyn::trace::parse_where(w);
      if (!parsed) throw dyn::Fatal(dyn::kExitUsage, parsed.error().message);
      f.where.push_back(std::move(*parsed));
    }
    if (!o->fields.empty()) {
      auto parsed = dyn::trace::parse_fields(o->fields);
      if (!parsed) throw dyn::Fatal(dyn::kExitUsage, parsed.error().message);
      f.fields = std::move(*parsed);
    }
    f.format = o->format == dyn::cli::Format::kTsv   ? dyn::trace::FilterFormat::kTsv
               : o->format == dyn::cli::Format::kCsv ? dyn::trace::FilterFormat::kCsv
                                                     : dyn::trace::FilterFormat::kJsonl;
    f.header = !o->no_header;
    dyn::io::Output* out = &sink.get();
    int rc = dyn::trace::filter_traces(f, *out);
    sink.close();
    return rc;
  });
}
