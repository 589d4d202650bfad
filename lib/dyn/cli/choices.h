// CLI11 choices and --help text from a library enum's name table (dyn::Named): the option's
// check, its help, the man page and the completions then list exactly what the parser accepts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

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

}  // namespace dyn::cli
