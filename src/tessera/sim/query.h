// `tessera sim collective` as a library call: one collective on a cluster
// spec through the flow engine, the packet engine or the closed form. The CLI
// (tools/tessera/cmd_sim.cc) and the Python package (tessera.sim.collective)
// run RunCollectiveQuery on the same CollectiveQuery (the CLI's option
// strings, parsed here) and print / return CollectiveAnswerJson.
// Thread-safe (each call owns its engine).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/sim/collective.h"
#include "tessera/sim/simulate.h"

namespace tessera::sim {

struct CollectiveQuery {
  std::string cluster;  // cluster spec TOML
  std::string op = "allreduce";
  std::string size = "1G";  // bytes per rank, nccl-tests convention (K, M, G suffixes)
  std::string algo = "auto";
  std::string routing = "adaptive";
  std::string engine = "flow";  // flow | packet | analytic
  int ranks = 0;                // 0: one super-node
  std::vector<std::string> fail_uplinks;  // SUPERNODE:LEAF:SPINE
  std::string cc = "dcqcn";     // packet engine: dcqcn | none
  bool pfc = false;             // packet engine: lossless PFC
};

struct CollectiveAnswer {
  std::string cluster;  // the spec's name
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::string routing;
  std::string engine;
  size_t bytes = 0;
  SimCollectiveResult result;
};

StatusOr<CollectiveAnswer> RunCollectiveQuery(const CollectiveQuery& q);
// `tessera sim collective --json`.
nlohmann::json CollectiveAnswerJson(const CollectiveAnswer& a);

}  // namespace tessera::sim
