// run_tool: the single place that turns exceptions and parse errors into messages and exit codes.
#include "dyn/cli/run_tool.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"
#include "dyn/base/version.h"
#include "dyn/cli/generate.h"
#include "dyn/cli/run_config.h"
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

namespace {

/// Levenshtein distance (insert, delete, substitute each cost 1) for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

void long_names(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* o : app.get_options())
    for (auto& n : o->get_lnames()) out.push_back("--" + n);
}

/// The subcommand named on the command line (the first argv word that names one), or null.
const CLI::App* named_subcommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == argv[i]) return sub;
  return nullptr;
}

/// For every `--name` on the command line that no option of the tool or the named subcommand
/// has: "unknown option --name (did you mean --closest?)". The closest is the option of that
/// context with the smallest edit distance, offered when it is at most a third of the name's
/// length (at least 2), when one name is a prefix of the other, or when the name is the last
/// words of a known one (--rate: --request-rate).
std::string unknown_option_hints(const CLI::App& app, int argc, char** argv) {
  const CLI::App* sub = named_subcommand(app, argc, argv);
  std::vector<std::string> known;
  long_names(app, known);
  if (sub) long_names(*sub, known);
  std::string hints;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.rfind("--", 0) != 0 || a.size() < 3) continue;
    std::string name = a.substr(0, a.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    if (name.rfind("--generate", 0) == 0 || name == "--man-template") continue;
    std::vector<std::string> ctx;
    long_names(sub ? *sub : app, ctx);
    std::string best;
    size_t best_d = std::string::npos;
    for (auto& k : ctx) {
      size_t d = edit_distance(name, k);
      bool prefix = k.rfind(name, 0) == 0 || name.rfind(k, 0) == 0;
      // The last words of a flag (--rate for --request-rate, --seed for --random-seed).
      const std::string tail = "-" + name.substr(2);
      bool suffix = k.size() > tail.size() && k.compare(k.size() - tail.size(), tail.size(), tail) == 0;
      if (prefix || suffix) d = std::min<size_t>(d, 1);
      if (d < best_d) best_d = d, best = k;
    }
    size_t limit = std::max<size_t>(2, (name.size() - 2) / 3);
    hints += (hints.empty() ? "" : "; ") + std::string("unknown option ") + name;
    if (!best.empty() && best_d <= limit) hints += " (did you mean " + best + "?)";
  }
  return hints;
}

/// When a parse error is about an option the command line did not give but an environment
/// variable did (CLI11 envname), the message names the variable and its value: a bad exported
/// DYN_* setting is otherwise indistinguishable from a bad flag.
std::string env_context(const CLI::App& app, int argc, char** argv, const std::string& msg) {
  std::vector<const CLI::App*> apps{&app};
  for (const CLI::App* sub : app.get_subcommands({})) apps.push_back(sub);
  for (const CLI::App* a : apps) {
    for (const CLI::Option* o : a->get_options()) {
      const std::string& env = o->get_envname();
      if (env.empty()) continue;
      const char* val = std::getenv(env.c_str());
      if (!val) continue;
      bool on_argv = false;
      for (int i = 1; i < argc && !on_argv; ++i) {
        std::string w = argv[i];
        w = w.substr(0, w.find('='));
        for (auto& n : o->get_lnames()) on_argv |= w == "--" + n;
        for (auto& n : o->get_snames()) on_argv |= w == "-" + n;
      }
      if (on_argv) continue;
      // The message names the option as a whole word: --request-trace is a prefix of
      // --request-trace-file-format, whose own variable is the one to blame.
      auto names_option = [&](const std::string& flag) {
        for (size_t p = msg.find(flag); p != std::string::npos; p = msg.find(flag, p + 1)) {
          const size_t e = p + flag.size();
          if (e == msg.size() || !(std::isalnum(static_cast<unsigned char>(msg[e])) || msg[e] == '-')) return true;
        }
        return false;
      };
      for (auto& n : o->get_lnames())
        if (names_option("--" + n)) return "environment variable " + env + "='" + val + "' (for --" + n + "): ";
    }
  }
  return "";
}

}  // namespace

int run_tool(int argc, char** argv, CLI::App& app, const std::function<int()>& body) {
  signal(SIGPIPE, SIG_IGN);
  set_command_line(argc, argv);
  diag::set_program(app.get_name());
  // https://no-color.org: colour only on a terminal and never when NO_COLOR is set.
  diag::set_colour(isatty(2) && std::getenv("NO_COLOR") == nullptr);
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
      // An unknown flag is the likeliest cause of any parse error (a misspelled flag also leaves
      // a required one "missing"), so it is reported first, with the closest known flag.
      std::string hints = unknown_option_hints(app, argc, argv);
      if (!hints.empty()) msg = hints;
      else msg = env_context(app, argc, argv, msg) + msg;
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
    return kExitOk;  // `| head` closed the pipe: quiet success (docs/design.md)
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

void Dispatch::add_filter(CLI::App* sub, const std::vector<std::string>* inputs, const OutputOptions* out,
                          std::function<int(Sink&)> action) {
  add(sub, [sub, inputs, out, action = std::move(action)] {
    if (inputs && stdin_is_interactive(*inputs)) {
      // As --help prints it: "Usage: dyn-trace cat ...", not the bare subcommand.
      std::fputs(sub->help(sub->get_parent() ? sub->get_parent()->get_name() : "").c_str(), stderr);
      return static_cast<int>(kExitUsage);
    }
    Sink sink(*out);
    const int rc = action(sink);
    sink.close();
    return rc;
  });
}

int Dispatch::run() const {
  for (const auto& [sub, action] : list_)
    if (sub->parsed()) return action();
  diag::error("", "a subcommand is required (try --help)");
  return kExitUsage;
}

}  // namespace dyn::cli
