// The one --format vocabulary of every subcommand that takes it (dyn-bind show and live, dyn-bench
// report and compare, dyn-trace stats and filter): a name means the same output everywhere, and
// each subcommand accepts the names of the outputs it writes.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/base/named.h"
#include "dyn/io/output.h"

namespace dyn::cli {

/// An output format (--format).
enum class Format { kAuto, kTable, kJson, kCsv, kTsv };

/// Every format, in help order. json is the subcommand's machine-readable output: JSON Lines
/// where it writes rows (dyn-bind, dyn-trace), one JSON document where it writes a report
/// (dyn-bench).
inline constexpr Named<Format> kFormats[] = {
    {Format::kAuto, "auto", "table on a terminal, else json"},
    {Format::kTable, "table", ""},
    {Format::kJson, "json", ""},
    {Format::kCsv, "csv", ""},
    {Format::kTsv, "tsv", ""},
};

/// Spellings kept from before the vocabulary was one (issue 46): dyn-bind show and live and
/// dyn-trace stats and filter called their JSON Lines output jsonl. Accepted wherever json is.
inline constexpr Named<Format> kFormatAliases[] = {
    {Format::kJson, "jsonl", ""},
};

/// Adds --format to `app` setting `value` (whose current value is the default shown): the
/// formats in `writes` are its choices (in kFormats order in --help, the man page and
/// completions), and an alias of one of them is taken as that format. The help is `help`, then
/// the choices with their glosses and aliases.
inline CLI::Option* add_format_option(CLI::App& app, Format& value, std::initializer_list<Format> writes,
                                      const std::string& help) {
  std::vector<std::string> names;
  std::string text = help + ":";
  for (const auto& f : kFormats) {
    if (std::find(writes.begin(), writes.end(), f.value) == writes.end()) continue;
    names.emplace_back(f.name);
    std::string notes = f.gloss;
    for (const auto& a : kFormatAliases)
      if (a.value == f.value) notes += std::string(notes.empty() ? "" : "; ") + "also " + a.name;
    text += std::string(names.size() == 1 ? " " : ", ") + f.name + (notes.empty() ? "" : " (" + notes + ")");
  }
  // An alias becomes its format's name before the check (transform runs first), so the check,
  // and the choices it shows, list the names only.
  const CLI::Validator alias(
      [](std::string& s) {
        for (const auto& a : kFormatAliases)
          if (s == a.name) s = name_in(kFormats, a.value);
        return std::string();
      },
      "");
  return app
      .add_option_function<std::string>(
          "--format", [&value](const std::string& s) { value = *parse_in(kFormats, s); }, text)
      ->transform(alias)
      ->check(CLI::IsMember(names))
      ->default_str(name_in(kFormats, value));
}

/// Whether `f` writes a table to `out`: table, or auto on a terminal.
inline bool as_table(Format f, const io::Output& out) {
  return f == Format::kTable || (f == Format::kAuto && out.is_terminal());
}

}  // namespace dyn::cli
