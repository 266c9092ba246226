// `tessera launch --nproc N [--nnodes M|MIN:MAX --node-rank R --master ADDR:PORT]
//  [--elastic-wait S] [--token T] [--timeout S] [--grace S] [--max-restarts N] [--spares K]
//  [--heartbeat-timeout S] [--heartbeat-interval S] [--events PATH]
//  -- CMD ARGS...`: starts N local ranks of CMD with the torchrun-style job
// environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT as torchrun means them: a free port for PyTorch's own
// TCPStore), hosts Tessera's job store on node 0 (TESSERA_STORE_ADDR,
// TESSERA_STORE_PORT, TESSERA_JOB_TOKEN),
// prefixes output lines with the rank, forwards signals, and stops the job
// when a rank fails. As an agent (comm/launcher_agent.h) it watches the
// ranks' heartbeats (a rank silent for --heartbeat-timeout, default 30 s,
// counts as failed; 0 turns this off), restarts the whole group after a
// failure up to --max-restarts times (default 0: a failure ends the job),
// keeps --spares warm spare processes (Tessera workers only) that take a
// failed rank's place, and writes every event to --events (JSON lines).
// --nnodes MIN:MAX makes membership elastic: a lost node is dropped while
// MIN remain, a returning one is added (docs/comm-control-plane.md).
// The exit code is the job's (see comm/launcher.h). The launch is a library
// call (comm/launch_query.h) shared with the Python package (tessera.launch);
// the options are declared once in options/query_options.h.
#include <memory>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "query_options.h"
#include "tessera/comm/launch_query.h"

namespace tessera::cli {
namespace {

void Run(const comm::LaunchQuery& query) {
  auto result = comm::RunLaunchQuery(query);
  ExitWith(result.status());
  if (result->exit_code != 0) throw CLI::RuntimeError(result->exit_code);
}

}  // namespace

void RegisterLaunchCommand(CLI::App& app) {
  auto query = std::make_shared<comm::LaunchQuery>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start the local ranks of a job: `tessera launch --nproc N -- CMD ARGS...` (each rank gets RANK, "
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT as under torchrun, and "
      "TESSERA_STORE_ADDR, TESSERA_STORE_PORT, TESSERA_JOB_TOKEN for Tessera's own store)");
  AddLaunchOptions(cmd, query.get());
  cmd->callback([query] { Run(*query); });
}
TESSERA_CLI_COMMAND(40, RegisterLaunchCommand);

}  // namespace tessera::cli
