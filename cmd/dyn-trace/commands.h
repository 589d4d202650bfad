// Subcommands of dyn-trace; each registers its options and action on the Dispatch.
#pragma once

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"

void setup_cat(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_filter(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_stats(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_convert(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_sessionize(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_generate(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_capture(CLI::App& app, dyn::cli::Dispatch& dispatch);
