// SimulateCollective: one collective on a cluster through the flow engine —
// the topology of the spec, the schedule of the algorithm, routing — and the
// nccl-tests figures plus cluster bandwidth utilization:
//   utilization = sum over flows of (bytes / injection bandwidth of the
//                 sender's fabric) / (ranks x time)
// i.e. the mean fraction of the ranks' injection bandwidth kept busy; for a
// uniform collective on one fabric it equals busbw / endpoint bandwidth.
// Ranks are devices 0..ranks-1 (contiguous: super-node by super-node).
// Thread-safe (each call owns its engine).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/collective.h"
#include "tessera/sim/packet_engine.h"
#include "tessera/sim/topology.h"

namespace tessera::sim {

struct SimCollectiveOptions {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CollectiveAlgo algo = CollectiveAlgo::kAuto;  // auto: the analytic model's choice
  double bytes = 0;
  int ranks = 0;  // 0: one super-node's devices
  Routing routing = Routing::kAdaptive;
  bool packet_level = false;  // the packet engine (small cases) instead of the flow engine
  PacketParams packet;
  // Scale-out links to fail, as (device, plane) access uplinks; fabric
  // uplinks as (supernode, leaf, spine). Tests and what-if studies.
  std::vector<int> failed_access_uplinks;
  struct LeafUplink {
    int supernode = 0, leaf = 0, spine = 0;
  };
  std::vector<LeafUplink> failed_leaf_uplinks;
};

struct SimCollectiveResult {
  CollectiveAlgo algo = CollectiveAlgo::kAuto;
  int ranks = 0;
  double time_s = 0;
  double algbw = 0;  // bytes/s
  double busbw = 0;
  double utilization = 0;
  double sim_wall_s = 0;
  int64_t flows = 0;
  int64_t events = 0;
  int64_t rate_updates = 0;
  int64_t cnps = 0;                // packet engine: congestion notifications
  double max_queue_bytes = 0;      // packet engine: deepest switch queue
};

StatusOr<SimCollectiveResult> SimulateCollective(const ClusterSpec& spec, const SimCollectiveOptions& options);

}  // namespace tessera::sim
