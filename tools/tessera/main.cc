// tessera: the command-line entry point. Subcommands live in cmd_<name>.cc
// and register themselves through commands.h; main parses, runs the chosen
// subcommand and maps failures to "error: ..." and exit code 1.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

namespace {

// OpenMP threads that spin between parallel regions (libgomp's default)
// steal the cores from everything else when the machine is shared — other
// ranks, other jobs, a parallel test run — and training slows by 10x or
// more. Unless the user chose a policy, Tessera runs with
// OMP_WAIT_POLICY=passive. libgomp reads it once when it loads, so the
// process re-executes itself with the variable set (once: the variable is
// then present). Set OMP_WAIT_POLICY=active on a dedicated machine.
void EnsurePassiveOmpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): continue with the default policy.
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  EnsurePassiveOmpWait(argv);
  CLI::App app{"Tessera: plan, simulate and run the training of large models", "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
  app.require_subcommand(1);
  cli::RegisterInfoCommand(app);
  cli::RegisterTrainCommand(app);
  cli::RegisterDataCommand(app);
  cli::RegisterLaunchCommand(app);

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
