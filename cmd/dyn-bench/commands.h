// Subcommands of dyn-bench; each registers its options and action on the Dispatch.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"
#include "dyn/metrics/report.h"

void setup_report(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_compare(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_plot(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_calibrate(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_fidelity(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_audit(CLI::App& app, dyn::cli::Dispatch& dispatch);

/// Loads request rows and fails with exit 3 when none are usable (shared by the subcommands).
dyn::metrics::RequestSet load_or_fail(const std::vector<std::string>& inputs);
/// Parses --goodput text or throws Fatal(kExitUsage).
std::vector<dyn::metrics::Slo> goodput_or_fail(const std::string& text);
