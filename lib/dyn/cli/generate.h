// Man page and shell completions generated from a CLI11 app (one definition drives all three).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace dyn::cli {

/// roff man page: the template's text with @OPTIONS@ replaced by generated .TP entries for every
/// option of the app and its subcommands, @SUBCOMMANDS@ by the subcommand list, @VERSION@ by
/// the version. An empty template gives a minimal page (NAME, SYNOPSIS, OPTIONS).
std::string generate_man(const CLI::App& app, const std::string& template_text);
/// bash completion script (complete -F): subcommands, each subcommand's own long options, and
/// option values (the IsMember choices of the definition, file names for FILE/PATH/DIR values).
std::string generate_bash(const CLI::App& app);
/// zsh completion script (#compdef): _arguments per subcommand, with value choices.
std::string generate_zsh(const CLI::App& app);
/// fish completion script: per-subcommand options (conditions), value choices with -x -a.
std::string generate_fish(const CLI::App& app);

}  // namespace dyn::cli
