// dyn-route normalize: options -> offline::normalize_rows.
#include <memory>

#include "commands.h"
#include "dyn/offline/offline.h"

void setup_normalize(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::offline::NormalizeOptions norm;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "normalize", "Turn rows of request headers into agent_context rows (SPEC 1), or error rows with the line number");
  sub->add_option("files", o->norm.inputs, "Input JSONL files of {\"headers\": ...} rows; - or none = stdin")
      ->type_name("FILE");
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add(sub, [o, sub] {
    if (dyn::cli::stdin_is_interactive(o->norm.inputs)) {
      std::fputs(sub->help().c_str(), stderr);
      return static_cast<int>(dyn::kExitUsage);
    }
    dyn::io::Output* out = nullptr;
    auto file = dyn::cli::open_output(o->out, &out);
    int rc = dyn::offline::normalize_rows(o->norm, *out);
    out->close();
    return rc;
  });
}
