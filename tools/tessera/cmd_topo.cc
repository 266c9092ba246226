// `tessera topo [--threads N] [--transport T]`: what the communication
// library detects — hosts (hostname + boot id), NUMA node and CPUs of every
// rank, the transport per peer, the shm/tcp parameters, the measured cost
// model, and the algorithm each collective would use at a few sizes. Ranks
// come from the environment (`tessera launch --nproc N -- tessera topo`) or
// are N threads of this process.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/hal/topology.h"

namespace tessera::cli {
namespace {

struct TopoArgs {
  int threads = 0;
  std::string transport = "auto";
  std::string algo;
};

Status Report(comm::Communicator& c) {
  if (c.rank() == 0) {
    std::printf("machine: %s\n", hal::MachineTopology().ToString().c_str());
    std::printf("%s", c.Describe().c_str());
    std::fflush(stdout);
  }
  return c.Barrier();
}

Status Run(const TopoArgs& a) {
  comm::CommOptions co;
  co.algo = a.algo;
  TESSERA_ASSIGN_OR_RETURN(co.transport, comm::transport::ParseTransportKind(a.transport));
  if (a.threads <= 0) {
    TESSERA_ASSIGN_OR_RETURN(auto c, comm::Communicator::FromEnvironment(co));
    return Report(*c);
  }
  auto store = comm::MakeInMemoryStore();
  std::vector<Status> results(a.threads);
  std::vector<std::thread> ranks;
  for (int r = 0; r < a.threads; ++r) {
    ranks.emplace_back([&, r] {
      auto c = comm::Communicator::Create(store, r, a.threads, co);
      results[r] = c.ok() ? Report(**c) : c.status();
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& st : results) TESSERA_RETURN_IF_ERROR(st);
  return Status::Ok();
}

}  // namespace

void RegisterTopoCommand(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* sub = app.add_subcommand("topo", "show the detected communication topology, transports and algorithms");
  sub->add_option("--threads", args->threads, "N ranks as threads of this process (no launcher)");
  sub->add_option("--transport", args->transport, "auto, shm, tcp");
  sub->add_option("--algo", args->algo, "force algorithms (like TESSERA_ALGO)");
  sub->callback([args] { ExitWith(Run(*args)); });
}
TESSERA_CLI_COMMAND(60, RegisterTopoCommand);

}  // namespace tessera::cli
