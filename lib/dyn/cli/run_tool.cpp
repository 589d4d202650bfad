// run_tool: the single place that turns exceptions and parse errors into messages and exit codes.
#include "dyn/cli/run_tool.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/base/version.h"
#include "dyn/cli/generate.h"
#include "dyn/io/output.h"

namespace dyn::cli {

void add_output_options(CLI::App& app, OutputOptions& opts) {
  app.add_option("-o,--output", opts.output, "Write to FILE (via a temporary file renamed on success)")
      ->type_name("FILE");
  app.add_flag("--line-buffered", opts.line_buffered, "Flush output after every line");
}

std::unique_ptr<io::Output> open_output(const OutputOptions& opts, io::Output** sink) {
  if (opts.line_buffered) io::set_stdout_line_buffered(true);
  if (opts.output.empty() || opts.output == "-") {
    *sink = &io::stdout_output();
    return nullptr;
  }
  auto out = std::make_unique<io::Output>(opts.output, opts.line_buffered);
  *sink = out.get();
  return out;
}

bool stdin_is_interactive(const std::vector<std::string>& inputs) {
  bool uses_stdin = inputs.empty();
  for (auto& p : inputs)
    if (p == "-") uses_stdin = true;
  return uses_stdin && isatty(0);
}

int run_tool(int argc, char** argv, CLI::App& app, const std::function<int()>& body) {
  signal(SIGPIPE, SIG_IGN);
  diag::set_program(app.get_name());
  diag::set_flush_hook([] {
    try {
      io::stdout_output().flush();
    } catch (...) {
    }
  });
  app.set_version_flag("--version", std::string(app.get_name()) + " (dyn) " + kVersion);
  std::string generate, man_template;
  app.add_option("--generate", generate, "Print man|bash|zsh|fish and exit")
      ->check(CLI::IsMember({"man", "bash", "zsh", "fish"}))
      ->group("");
  app.add_option("--man-template", man_template, "Man page template for --generate=man")->group("");
  // With --generate, required options and subcommands must not block parsing.
  bool gen_requested = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--generate", 0) == 0) gen_requested = true;
  if (gen_requested) {
    app.require_subcommand(0, 0);
    for (CLI::Option* o : app.get_options()) o->required(false);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    app.exit(e);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (gen_requested && !generate.empty()) {
      // fall through: generation does not need a valid command line
    } else {
      std::string msg = e.what();
      if (!msg.empty() && msg[0] >= 'A' && msg[0] <= 'Z' && !(msg.size() > 1 && msg[1] >= 'A' && msg[1] <= 'Z'))
        msg[0] = static_cast<char>(msg[0] - 'A' + 'a');
      diag::error("", msg + " (try --help)");
      return kExitUsage;
    }
  }
  if (!generate.empty()) {
    std::string text;
    if (generate == "man") {
      std::string tmpl;
      if (!man_template.empty()) {
        std::ifstream in(man_template);
        std::stringstream ss;
        ss << in.rdbuf();
        tmpl = ss.str();
      }
      text = generate_man(app, tmpl);
    } else if (generate == "bash") {
      text = generate_bash(app);
    } else if (generate == "zsh") {
      text = generate_zsh(app);
    } else {
      text = generate_fish(app);
    }
    fwrite(text.data(), 1, text.size(), stdout);
    return fclose(stdout) == 0 ? kExitOk : kExitIo;
  }
  int rc = kExitOk;
  try {
    rc = body();
    io::stdout_output().close();
  } catch (const io::BrokenPipe&) {
    return kExitOk;  // `| head` closed the pipe: quiet success (DESIGN.md)
  } catch (const Fatal& e) {
    try {
      io::stdout_output().flush();
    } catch (...) {
    }
    diag::error("", e.what());
    return e.exit_code();
  } catch (const nlohmann::json::exception& e) {
    diag::error("", std::string("bad data: ") + e.what());
    return kExitBadData;
  } catch (const std::exception& e) {
    diag::error("", std::string("internal error: ") + e.what());
    return kExitIo;
  }
  if (fflush(stdout) != 0 || fclose(stdout) != 0) {
    diag::error("<stdout>", "write error");
    return kExitIo;
  }
  return rc;
}

}  // namespace dyn::cli

namespace dyn::cli {

int Dispatch::run() const {
  for (const auto& [sub, action] : list_)
    if (sub->parsed()) return action();
  diag::error("", "a subcommand is required (try --help)");
  return kExitUsage;
}

}  // namespace dyn::cli
