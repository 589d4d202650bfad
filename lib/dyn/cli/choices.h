// CLI11 choices and --help text from a library enum's name table (dyn::Named): the option's
// check, its help, the man page and the completions then list exactly what the parser accepts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/base/named.h"

namespace dyn::cli {

/// The names of an enum's table (route::kModes, ...) as CLI11 choices.
template <class E, size_t N>
std::vector<std::string> choice_names(const Named<E> (&table)[N]) {
  std::vector<std::string> v;
  for (const auto& e : table) v.emplace_back(e.name);
  return v;
}

/// Help text listing an enum's values from its table: "a, b (gloss)" with sep ", ", or
/// "a: gloss; b: gloss" with sep "; " and gloss_sep ": ".
template <class E, size_t N>
std::string choices_help(const Named<E> (&table)[N], const char* sep, const char* gloss_sep = nullptr) {
  std::string s;
  for (const auto& e : table) {
    if (!s.empty()) s += sep;
    s += e.name;
    if (*e.gloss) s += gloss_sep ? std::string(gloss_sep) + e.gloss : std::string(" (") + e.gloss + ")";
  }
  return s;
}

/// Adds option `names` that sets `value` to the entry of `table` named on the command line (or in
/// its environment variable): the check, the choices in --help, man page and completions come
/// from the table, and the default shown is the name of `value` as it stands, the library's
/// default, never a copy of it. Returns the option for further settings (group, envname).
template <class E, size_t N>
CLI::Option* add_choice(CLI::App& app, const std::string& names, E& value, const Named<E> (&table)[N],
                        const std::string& help) {
  return app
      .add_option_function<std::string>(
          names, [&value, &table](const std::string& s) { value = *parse_in(table, s); }, help)
      ->check(CLI::IsMember(choice_names(table)))
      ->default_str(name_in(table, value));
}

}  // namespace dyn::cli
