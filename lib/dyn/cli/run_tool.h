// The one entry wrapper every dyn binary uses: signals, parse errors, exceptions -> exit codes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "dyn/base/error.h"
#include "dyn/io/output.h"

namespace dyn::cli {

/// Runs a tool. Steps: ignore SIGPIPE process-wide (Debian's compiled cpp-httplib can raise it);
/// set the diagnostic program name; add --version and the hidden --generate=man|bash|zsh|fish
/// (with --man-template FILE); parse argv with CLI11 (help/version -> 0, parse errors -> 2 with
/// the message on stderr); then call `body` and return its exit code.
/// Exceptions from body: io::BrokenPipe -> quiet 0; Fatal -> its message and code;
/// nlohmann::json errors -> 3 (bad data); anything else -> "internal error" and 4.
/// Finally flushes and closes io::stdout_output() and checks fclose(stdout) (write errors -> 4).
int run_tool(int argc, char** argv, CLI::App& app, const std::function<int()>& body);

/// Options most tools share: `-o FILE` and `--line-buffered`. Attach to an app or subcommand.
struct OutputOptions {
  std::string output = "-";
  bool line_buffered = false;
};
void add_output_options(CLI::App& app, OutputOptions& opts);

/// The sink named by OutputOptions: io::stdout_output() for "-", else a new file Output
/// (temporary file renamed on close). The returned pointer owns a file Output only.
std::unique_ptr<io::Output> open_output(const OutputOptions& opts, io::Output** sink);

/// True when the named input list means "read stdin" and stdin is a terminal: the tool should
/// print usage instead of waiting (docs/design.md).
bool stdin_is_interactive(const std::vector<std::string>& inputs);

}  // namespace dyn::cli

namespace dyn::cli {

/// The output of a subcommand registered with Dispatch::add_filter: the sink named by its
/// OutputOptions, opened on first use (so an action that stops before writing leaves no file), and
/// closed by the dispatcher after the action (a file is renamed into place) unless the action
/// closed it already or discarded it.
class Sink {
 public:
  explicit Sink(const OutputOptions& opts) : opts_(opts) {}
  io::Output& get() {
    if (!out_) file_ = open_output(opts_, &out_);
    return *out_;
  }
  io::Output& operator*() { return get(); }
  io::Output* operator->() { return &get(); }
  /// Closes now (idempotent): for an action that reports after its output is complete.
  void close() {
    if (out_ && !done_) out_->close();
    done_ = true;
  }
  /// Never closes: a file output's temporary is removed, the target keeps what it had.
  void discard() { done_ = true; }

 private:
  const OutputOptions& opts_;
  io::Output* out_ = nullptr;
  std::unique_ptr<io::Output> file_;
  bool done_ = false;
};

/// Subcommand dispatch for binaries with several jobs: each subcommand registers its action;
/// run() calls the one that was parsed, or prints help and returns 2 when none was.
class Dispatch {
 public:
  explicit Dispatch(CLI::App& app) : app_(app) {}
  /// Registers `action` for subcommand `sub` (created by the caller with app.add_subcommand).
  void add(CLI::App* sub, std::function<int()> action) { list_.emplace_back(sub, std::move(action)); }
  /// Registers a subcommand that reads `inputs` and writes the output of `out` (both owned by the
  /// caller's option struct, alive for the run), with the steps such tools share (docs/design.md):
  /// when `inputs` means stdin and stdin is a terminal, print sub's help on stderr and return 2
  /// instead of waiting (`inputs` nullptr: the tool reads no stdin); else run action(sink) and
  /// close the sink (Sink) after it, whatever status it returns. Its status is the tool's.
  void add_filter(CLI::App* sub, const std::vector<std::string>* inputs, const OutputOptions* out,
                  std::function<int(Sink&)> action);
  int run() const;

 private:
  CLI::App& app_;
  std::vector<std::pair<CLI::App*, std::function<int()>>> list_;
};

}  // namespace dyn::cli
