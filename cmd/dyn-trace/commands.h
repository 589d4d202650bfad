// Subcommands of dyn-trace; each registers its options and action on the Dispatch.
#pragma once

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"

void setup_cat(CLI::App& app, dyn::cli::Dispatch& dispatch);
