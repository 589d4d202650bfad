// Name tables of enumerated settings: one list per enum that its parser, its printer, the CLI's
// choices, --help, man pages and completions all draw from (docs/design.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dyn {

/// A value of an enumerated setting: its enum, its name on the command line and in records, and
/// a short gloss for --help ("" = none).
template <class E>
struct Named {
  E value;
  const char* name;
  const char* gloss;
};

/// The name of `v` in `table` (the first entry's name for a value the table lacks).
template <class E, size_t N>
const char* name_in(const Named<E> (&table)[N], E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return table[0].name;
}

/// The value named `n` in `table` (exact match); nullopt for any other name.
template <class E, size_t N>
std::optional<E> parse_in(const Named<E> (&table)[N], std::string_view n) {
  for (const auto& e : table)
    if (n == e.name) return e.value;
  return std::nullopt;
}

}  // namespace dyn
