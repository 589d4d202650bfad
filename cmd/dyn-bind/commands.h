// Subcommands of dyn-bind; each registers its options and action on the Dispatch.
#pragma once

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"

void setup_show(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_check(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_live(CLI::App& app, dyn::cli::Dispatch& dispatch);
