// Two-level (hierarchical) collectives for communicators whose ranks span
// several hosts: inside each host the ranks use a shm sub-communicator
// (zero-copy windows); across hosts, the ranks with the same local index
// form a tcp sub-communicator. all-reduce = local reduce-scatter (shm) ->
// cross-host all-reduce of each rank's shard (tcp, every local rank drives
// its own shard, so all of a host's ranks use the network at once) ->
// local all-gather (shm); all-gather and reduce-scatter compose the same
// way. Needs the same number of ranks on every host (otherwise the
// communicator uses flat tcp algorithms). Used by the executor thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/algo/algorithm.h"

namespace tessera::comm {
class Communicator;
}

namespace tessera::comm::algo {

class HierarchyContext {
 public:
  // local: this host's ranks (shm); cross: same local index on every host
  // (tcp). Ranks are numbered host-major: rank = host * local_size + local.
  // hosts[h][l]: the global rank of local index l on host h.
  HierarchyContext(std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> cross,
                   std::vector<std::vector<int>> hosts);
  ~HierarchyContext();

  Communicator& local() { return *local_; }
  Communicator& cross() { return *cross_; }
  // all_reduce, all_gather, reduce_scatter.
  Status Run(const CollectiveArgs& a, AlgoEnv& env);
  void Abort(const std::string& reason);

 private:
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> cross_;
  std::vector<std::vector<int>> hosts_;
};

}  // namespace tessera::comm::algo
