// CLI11 validators with errors a user can read.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

namespace dyn::cli {

/// A finite number > 0, shown as POSITIVE in --help like CLI::PositiveNumber, whose error names
/// the rule ("must be > 0, got -1"): CLI11's own prints its range up to DBL_MAX in full (300
/// digits) and lets inf through.
inline const CLI::Validator& positive() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(s, d)) return "must be a number, got '" + s + "'";
        if (!std::isfinite(d) || !(d > 0)) return "must be a finite number > 0, got " + s;
        return {};
      },
      "POSITIVE");
  return v;
}

/// A number >= 0, or inf (a wait without limit: AIPerf's --benchmark-grace-period takes "inf"),
/// shown as SECONDS in --help; nan and negatives are refused with the rule.
inline const CLI::Validator& non_negative_or_inf() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(s, d)) return "must be a number or inf, got '" + s + "'";
        if (std::isnan(d) || d < 0) return "must be a number >= 0 or inf, got " + s;
        return {};
      },
      "");
  return v;
}

/// A finite number (no nan, inf or overflow such as 1e400), to go before a CLI::Range, which
/// lets nan through (every comparison with it is false).
inline const CLI::Validator& finite() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(s, d)) return "must be a number, got '" + s + "'";
        if (!std::isfinite(d)) return "must be a finite number, got " + s;
        return {};
      },
      "");
  return v;
}

}  // namespace dyn::cli
