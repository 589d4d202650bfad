// What a run was: tool, version, command line, every option's effective value and where it came
// from (flag, environment variable, default), and each input file's size and SHA-256 — recorded
// in summaries and exports the way AIPerf records its input config, so a result can be traced to
// the exact settings and data that produced it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/base/json.h"
#include "dyn/io/output.h"

namespace dyn::cli {

/// The command line run_tool() parsed (argv[0] first); empty before run_tool runs.
const std::vector<std::string>& command_line();
/// Records argv for command_line() (run_tool calls it before parsing).
void set_command_line(int argc, char** argv);

/// True when `o` was spelled on the command line (set_command_line), not only set from its
/// environment variable: a flag that makes no sense in a mode is refused only when typed, so a
/// variable exported for another tool (DYN_ROUTER_MODE for dyn-route) does not break this one.
bool on_command_line(const CLI::Option* o);

/// The options typed on the command line (on_command_line), each by its first long name
/// ("--url"; its first short name "-u" when it has no long one), in definition order, the app's
/// own and then each parsed subcommand's.
std::vector<std::string> typed_flags(const CLI::App& app);

/// {"tool", "version", "command_line": [...], "subcommand"?: name, "options": {"--name": value},
///  "sources": {"--name": "command line" | "env VAR"}, "environment": {"VAR": value},
///  "inputs": [{"path", "bytes", "sha256"}]}.
/// options: every visible option of `app` and of its parsed subcommand with a value — given
/// (strings; arrays for repeated options; true/false for flags) or its default (when the
/// definition shows one). sources: only options that were given, naming the environment variable
/// when that is where the value came from (CLI11 envname and not on the command line).
/// inputs: "-" is recorded as {"path": "-"} (stdin, no checksum); a file that cannot be read
/// gets "error" instead of its checksum. Call after parsing.
Json run_config(const CLI::App& app, const std::vector<std::string>& inputs);

/// Opens the file a run record goes to (`--summary FILE`) before the run starts, so an unwritable
/// path (missing folder, no permission) is an error at once, not after a run of minutes: a
/// temporary file beside the target (io::Output), renamed into place by write_run_record and
/// removed if the run fails first. Errors: Fatal(kExitIo) naming the file.
std::unique_ptr<io::Output> open_run_record(const std::string& path);

/// Writes a run record {"config": config, "summary": summary} as indented JSON to `out` (from
/// open_run_record) and closes it: the shape of `dyn-replay --summary`, `dyn-route decide
/// --summary` and `summary.json` in an --artifact-dir. Errors: Fatal(kExitIo) naming the file.
void write_run_record(io::Output& out, const Json& config, const Json& summary);

/// SHA-256 of a file's bytes as 64 lowercase hex digits (the value `sha256sum` prints).
/// Throws Fatal(kExitIo) naming the file when it cannot be read.
std::string file_sha256(const std::string& path);

}  // namespace dyn::cli
