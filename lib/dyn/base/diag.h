// Diagnostics on stderr in the one format all tools share: "dyn-x: error: <where>: <what>".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dyn::diag {

/// Sets the program name printed before each message (run_tool sets it from argv[0]).
void set_program(std::string name);
/// Colours the level word (error, warning, note) of every later line. Off by default; the CLI
/// layer turns it on for a terminal stderr without NO_COLOR (cli::run_tool).
void set_colour(bool on);
const std::string& program();

/// Called before any message is printed so stdout data appears before the diagnostic
/// (samtools habit). run_tool installs one that flushes the tool's Output.
void set_flush_hook(std::function<void()> hook);

/// Prints "<program>: warning: <where>: <what>" (or without "<where>: " when where is empty).
/// Thread-safe. Counts warnings for warning_count().
void warning(std::string_view where, std::string_view what);
/// Prints "<program>: error: <where>: <what>". Does not exit.
void error(std::string_view where, std::string_view what);
/// Prints "<program>: <what>" (informational, e.g. summaries). Suppressed by set_quiet(true).
void note(std::string_view what);
void set_quiet(bool quiet);

uint64_t warning_count();

}  // namespace dyn::diag
