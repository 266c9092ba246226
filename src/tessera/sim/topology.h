// Topology: a ClusterSpec turned into FlowEngine links, with structured
// path enumeration and routing. Devices are endpoints 0..N-1 (super-node s
// holds devices s*D .. s*D+D-1). Traffic between devices of one super-node
// crosses that super-node's fabric; traffic between super-nodes crosses the
// scale-out network. Each fabric plane has one access link per endpoint and
// direction (its ports in that plane bonded), and structured uplinks:
//   switch:          ep -> switch -> ep                       1 path
//   leaf_spine/rail: ep -> leaf [-> spine -> leaf] -> ep      spines x uplinks paths across leaves
//   fat_tree (k):    ep -> edge [-> agg [-> core -> agg] -> edge] -> ep   k/2 or (k/2)^2 paths
// times `planes`. Routing: ECMP hashes (src, dst, key) onto the live paths;
// adaptive picks the path whose busiest link has the fewest active flows per
// unit of capacity (ties broken by the hash). Paths over failed links are
// skipped. Immutable after Build; the selector is used by one engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/flow_engine.h"

namespace tessera::sim {

enum class Routing { kEcmp, kAdaptive };
StatusOr<Routing> ParseRouting(std::string_view text);

class Topology : public PathSelector {
 public:
  // Adds the links of `spec` (all super-nodes; `devices` <= TotalDevices()
  // limits the instantiated super-nodes) to `engine`.
  static StatusOr<Topology> Build(const ClusterSpec& spec, FlowEngine& engine, Routing routing, int64_t devices = 0);

  int num_devices() const { return num_devices_; }
  int NumPaths(int src, int dst) const override;
  // Appends the links of path `index` to `links`; returns its latency.
  double Path(int src, int dst, int index, std::vector<int>* links) const override;
  bool adaptive() const override { return routing_ == Routing::kAdaptive; }
  // Links by role, for tests and failure injection: the access link of
  // device d into the fabric/network (plane p), and leaf->spine uplinks.
  int AccessUpLink(int device, bool scale_out, int plane = 0) const;
  int UplinkOfLeaf(int supernode, int leaf, int spine, int parallel = 0, int plane = 0) const;  // fabric only

  StatusOr<int> Select(int src, int dst, uint64_t flow_key, const std::function<int(int)>& active_flows_on,
                       const std::vector<bool>& failed, std::vector<int>* links, double* latency_s) override;

  Routing routing() const { return routing_; }

 private:
  struct Fabric {
    NetworkSpec spec;
    int endpoints = 0, devices_per_node = 1;
    int first_link = 0, links_per_plane = 0;
    int leaves = 0;             // leaf_spine/rail; fat_tree: pods
    int PathsPerPlane(int a, int b) const;
    int Leaf(int e) const;
    double PathLinks(int a, int b, int index, std::vector<int>* links) const;
    int Build(FlowEngine& engine);  // returns links added
  };
  const Fabric& FabricFor(int src, int dst, int* a, int* b) const;
  int FabricPlanes(int src, int dst) const;

  Routing routing_ = Routing::kEcmp;
  int devices_per_supernode_ = 1;
  int num_devices_ = 0;
  std::vector<Fabric> fabrics_;  // one per super-node
  Fabric network_;
  bool has_network_ = false;
  std::vector<double> capacity_;  // copy of the engine's link capacities
  std::vector<int> scratch_;
};

}  // namespace tessera::sim
