// tessera: the command-line entry point. Subcommands live in cmd_<name>.cc
// and register themselves through commands.h; main parses, runs the chosen
// subcommand and maps failures to "error: ..." and exit code 1.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "build_info.h"
#include "commands.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/hal/threading.h"

namespace tessera::cli {

void PrintError(const std::string& text) {
  std::string out = "error: ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  std::fprintf(stderr, "%s\n", out.c_str());
  std::fflush(stderr);
}

void ExitWith(const Status& status) {
  if (status.ok()) return;
  PrintError(status.ToString());
  throw CLI::RuntimeError(1);
}

}  // namespace tessera::cli

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"Tessera: plan, simulate and run the training of large models", "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
  app.require_subcommand(1);
  cli::RegisterInfoCommand(app);
  cli::RegisterTrainCommand(app);
  cli::RegisterDataCommand(app);

  if (base::LogEnabled(base::LogLevel::kInfo)) {
    TLOG(INFO, "tessera {} ({} {}); knobs:\n{}", TESSERA_VERSION, TESSERA_BUILD_COMPILER, TESSERA_BUILD_TYPE,
         base::DescribeKnobs());
  }
  hal::ConfigureThreads();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Also CLI::RuntimeError thrown by ExitWith (already reported).
    return app.exit(e);
  } catch (const OpError& e) {
    cli::PrintError(e.what());
    return 1;
  } catch (const std::exception& e) {
    cli::PrintError(std::string("internal error: ") + e.what());
    return 1;
  }
  return 0;
}
