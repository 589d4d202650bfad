// CLI11 validators with errors a user can read.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace dyn::cli {

/// A number > 0, shown as POSITIVE in --help like CLI::PositiveNumber, whose error names the
/// rule ("must be > 0, got -1"): CLI11's own prints its range up to DBL_MAX in full, 300 digits.
inline const CLI::Validator& positive() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(s, d)) return "must be a number, got '" + s + "'";
        if (!(d > 0)) return "must be > 0, got " + s;
        return {};
      },
      "POSITIVE");
  return v;
}

}  // namespace dyn::cli
