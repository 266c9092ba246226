// tessera: the command-line entry point. Subcommands live in cmd_<name>.cc
// and register themselves through commands.h; main parses, runs the chosen
// subcommand and maps failures to "error: ..." and exit code 1.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

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

namespace {
std::vector<std::pair<int, CommandAdder>>& CommandList() {
  static std::vector<std::pair<int, CommandAdder>> list;  // built before main, read in main
  return list;
}
}  // namespace

bool ListCommand(int order, CommandAdder add) {
  CommandList().emplace_back(order, add);
  return true;
}

void AddListedCommands(CLI::App& app) {
  auto list = CommandList();
  std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, add] : list) add(app);
}

void ExitWith(const Status& status) {
  if (status.ok()) return;
  PrintError(status.ToString());
  throw CLI::RuntimeError(1);
}

}  // namespace tessera::cli

namespace {

// OpenMP threads spin for a while between parallel regions (libgomp's
// default). That is the fastest setting while the process has the cores to
// itself, but when several ranks share a host's cores the spinning threads
// steal them from each other and training slows down by 10x or more. So a
// process started as one rank of a multi-process job (WORLD_SIZE,
// OMPI_COMM_WORLD_SIZE or SLURM_NTASKS > 1) runs with OMP_WAIT_POLICY=passive
// unless the user chose a policy. libgomp reads the variable once when it
// loads, so the process re-executes itself with it set (once: the variable
// is then present).
bool IsOneOfSeveralRanks() {
  for (const char* name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 1) return true;
  }
  return false;
}

void ChooseOmpWaitPolicy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (!IsOneOfSeveralRanks()) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): continue with the default policy.
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  ChooseOmpWaitPolicy(argv);
  CLI::App app{"Tessera: plan, simulate and run the training of large models", "tessera"};
  app.set_version_flag("--version", "tessera " TESSERA_VERSION);
  app.require_subcommand(1);
  cli::AddListedCommands(app);

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
