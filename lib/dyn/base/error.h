// Errors, exit codes and a small Expected<T> used for expected failures across the library.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace dyn {

/// Exit status shared by every dyn tool (docs/design.md "Command-line conventions").
enum ExitCode : int {
  kExitOk = 0,            ///< success
  kExitCheckFailed = 1,   ///< a check failed (dyn-bind check violation, bench threshold missed)
  kExitUsage = 2,         ///< bad command line (CLI11's own codes are remapped to this)
  kExitBadData = 3,       ///< bad input data
  kExitIo = 4,            ///< I/O or network failure
  kExitInterrupted = 130  ///< SIGINT / SIGTERM
};

/// An expected failure: a message (lower-case, no final period) and the exit code it maps to
/// when it reaches a tool boundary.
struct Error {
  std::string message;
  int exit_code = kExitBadData;
};

/// Thrown to leave a tool with a given exit status and message; only `run_tool` catches it.
/// Library code uses it for failures that must stop the whole run (unreadable input file,
/// startup configuration errors), and Expected<T> for per-row failures that the run survives.
class Fatal : public std::runtime_error {
 public:
  Fatal(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

/// Value or Error. A minimal stand-in for C++23 std::expected (g++ 12 in C++20 mode lacks it).
template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Builds an Error with exit code kExitBadData.
Error bad_data(std::string message);

}  // namespace dyn
