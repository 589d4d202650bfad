// stderr diagnostics with optional colour (set by the CLI layer: a terminal, never with NO_COLOR).
#include "dyn/base/diag.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace dyn::diag {
namespace {
std::string g_program = "dyn";
std::function<void()> g_flush;
std::mutex g_mu;
std::atomic<uint64_t> g_warnings{0};
bool g_quiet = false;
std::atomic<bool> g_colour{false};

bool use_colour() { return g_colour.load(std::memory_order_relaxed); }

void emit(const char* level, const char* colour, std::string_view where, std::string_view what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_flush) g_flush();
  std::string line = g_program + ": ";
  if (level) {
    if (use_colour()) line += colour;
    line += level;
    if (use_colour()) line += "\x1b[0m";
    line += ": ";
  }
  if (!where.empty()) {
    line.append(where);
    line += ": ";
  }
  line.append(what);
  line += '\n';
  fwrite(line.data(), 1, line.size(), stderr);
  fflush(stderr);
}
}  // namespace

void set_colour(bool on) { g_colour = on; }

void set_program(std::string name) { g_program = std::move(name); }
const std::string& program() { return g_program; }
void set_flush_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_flush = std::move(hook);
}
void warning(std::string_view where, std::string_view what) {
  ++g_warnings;
  emit("warning", "\x1b[33m", where, what);
}
void error(std::string_view where, std::string_view what) { emit("error", "\x1b[31m", where, what); }
void note(std::string_view what) {
  if (!g_quiet) emit(nullptr, "", "", what);
}
void set_quiet(bool quiet) { g_quiet = quiet; }
uint64_t warning_count() { return g_warnings.load(); }

}  // namespace dyn::diag
