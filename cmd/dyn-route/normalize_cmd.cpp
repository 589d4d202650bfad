// dyn-route normalize: options -> offline::normalize_rows.
#include <memory>

#include "commands.h"
#include "dyn/offline/offline.h"
#include "dyn/session/families.h"
#include "session_flags.h"

void setup_normalize(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::offline::NormalizeOptions norm;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "normalize", "Turn rows of request headers into agent_context rows (SPEC 1), or error rows with the line number");
  // The families come from the normalizer's own table, so help and man page list what it reads.
  sub->footer("Header families (SPEC 1.1), in precedence order; the first with a session header present wins:\n" +
              dyn::session::describe_families());
  sub->add_option("files", o->norm.inputs, "Input JSONL files of {\"headers\": ...} rows; - or none = stdin")
      ->type_name("FILE");
  dyn::cmd::add_session_flags(*sub, o->norm.session);
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->norm.inputs, &o->out, [o](dyn::cli::Sink& sink) {
    dyn::io::Output* out = &sink.get();
    int rc = dyn::offline::normalize_rows(o->norm, *out);
    sink.close();
    return rc;
  });
}
