#include "tessera/sim/simulate.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "tessera/sim/collective_cost.h"
#include "tessera/sim/schedule.h"

namespace tessera::sim {

StatusOr<SimCollectiveResult> SimulateCollective(const ClusterSpec& spec, const SimCollectiveOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  const int d = spec.supernode.devices;
  const int n = o.ranks > 0 ? o.ranks : d;
  if (n < 2 || n > spec.TotalDevices()) {
    return InvalidArgument("--ranks {} must be in [2, {}] (devices of cluster {})", n, spec.TotalDevices(), spec.name);
  }
  if (!(o.bytes > 0)) return InvalidArgument("collective size must be > 0 bytes, got {}", o.bytes);
  SimCollectiveResult r;
  r.ranks = n;
  r.algo = o.algo;
  if (r.algo == CollectiveAlgo::kAuto || (o.kind == CollectiveKind::kAllToAll) ||
      (r.algo == CollectiveAlgo::kHierarchical && (n <= d || n % d != 0))) {
    r.algo = EstimateCollective(spec, o.kind, o.bytes, GroupLayout::Contiguous(spec, n)).algo;
    if (r.algo == CollectiveAlgo::kHierarchical && n % d != 0) r.algo = CollectiveAlgo::kRing;
  }
  FlowEngine engine;
  TESSERA_ASSIGN_OR_RETURN(Topology topo, Topology::Build(spec, engine, o.routing, n));
  for (int dev : o.failed_access_uplinks) {
    if (dev < 0 || dev >= topo.num_devices() || spec.supernodes == 1) {
      return InvalidArgument("cannot fail the scale-out uplink of device {}", dev);
    }
    engine.FailLink(topo.AccessUpLink(dev, true));
  }
  for (const auto& u : o.failed_leaf_uplinks) engine.FailLink(topo.UplinkOfLeaf(u.supernode, u.leaf, u.spine));
  std::vector<int> devices(n);
  std::iota(devices.begin(), devices.end(), 0);
  const double b_intra = spec.supernode.fabric.EndpointBandwidth();
  const double b_inter = spec.has_network ? spec.network.EndpointBandwidth() : b_intra;
  auto finish = [&](auto& eng, const ScheduleBuilder& builder) {
    r.time_s = eng.makespan();
    r.algbw = o.bytes / r.time_s;
    r.busbw = r.algbw * BusBwFactor(o.kind, n);
    double busy = 0;  // rank-seconds of injection at full rate
    for (int f : builder.flows()) {
      const FlowEndpoints e = eng.endpoints(f);
      busy += e.bytes / (e.src / d == e.dst / d ? b_intra : b_inter);
    }
    r.utilization = busy / (n * r.time_s);
    r.flows = eng.num_flows();
    r.events = eng.events();
  };
  if (o.packet_level) {
    PacketEngine packets(engine, &topo, o.packet);
    ScheduleBuilder builder(packets, devices);
    TESSERA_RETURN_IF_ERROR(ExpandCollective(builder, o.kind, r.algo, o.bytes, devices, d));
    TESSERA_RETURN_IF_ERROR(packets.Run());
    finish(packets, builder);
    r.cnps = packets.cnps();
    r.max_queue_bytes = packets.max_switch_queue_bytes();
  } else {
    ScheduleBuilder builder(engine, devices);
    TESSERA_RETURN_IF_ERROR(ExpandCollective(builder, o.kind, r.algo, o.bytes, devices, d));
    engine.SetPathSelector(&topo);
    TESSERA_RETURN_IF_ERROR(engine.Run());
    finish(engine, builder);
    r.rate_updates = engine.rate_updates();
  }
  r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace tessera::sim
