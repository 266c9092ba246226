// The tessera CLI's subcommands. Each cmd_<name>.cc defines one
// Register<Name>Command that adds its CLI11 subcommand (options + callback)
// to the app; main.cc calls them all. A callback does its work through a
// function returning Status and hands the result to ExitWith(), so every
// command fails the same way: "error: <status with context>" on stderr and
// exit code 1. OpError and other exceptions escaping a callback are caught
// in main and reported the same way.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/base/error.h"
#include "tessera/base/status.h"

namespace tessera::cli {

void RegisterInfoCommand(CLI::App& app);
void RegisterTrainCommand(CLI::App& app);
void RegisterDataCommand(CLI::App& app);
void RegisterLaunchCommand(CLI::App& app);
void RegisterCclPerfCommand(CLI::App& app);
void RegisterTopoCommand(CLI::App& app);

// OK: returns. Otherwise prints "error: ..." to stderr and throws
// CLI::RuntimeError(1), which main turns into exit code 1.
void ExitWith(const Status& status);

// Prints "error: <text>" (each extra line indented) to stderr.
void PrintError(const std::string& text);

}  // namespace tessera::cli
