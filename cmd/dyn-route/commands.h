// Subcommands of dyn-route; each registers its options and action on the Dispatch.
#pragma once

#include <CLI/CLI.hpp>

#include "dyn/cli/run_tool.h"

void setup_normalize(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_decide(CLI::App& app, dyn::cli::Dispatch& dispatch);
void setup_serve(CLI::App& app, dyn::cli::Dispatch& dispatch);
