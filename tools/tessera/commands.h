// The tessera CLI's subcommands. Each cmd_<name>.cc defines one
// Register<Name>Command that adds its CLI11 subcommand (options + callback)
// to the app, and lists it with TESSERA_CLI_COMMAND(order, function); main
// adds every listed command in `order` (the order of `tessera --help`), so a
// new command is one new file. A callback does its work through a
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

using CommandAdder = void (*)(CLI::App&);

// Lists a command (from a static initializer; see TESSERA_CLI_COMMAND).
bool ListCommand(int order, CommandAdder add);
// Adds every listed command to `app`, in order.
void AddListedCommands(CLI::App& app);

#define TESSERA_CLI_COMMAND(order, function) \
  [[maybe_unused]] static const bool tessera_cli_listed_##function = ::tessera::cli::ListCommand(order, function)

// OK: returns. Otherwise prints "error: ..." to stderr and throws
// CLI::RuntimeError(1), which main turns into exit code 1.
void ExitWith(const Status& status);

// Prints "error: <text>" (each extra line indented) to stderr.
void PrintError(const std::string& text);

}  // namespace tessera::cli
