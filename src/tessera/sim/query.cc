#include "tessera/sim/query.h"

#include <chrono>
#include <cstdio>

#include "tessera/comm/api/ccl_perf.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/collective_cost.h"

namespace tessera::sim {
namespace {

StatusOr<SimCollectiveOptions::LeafUplink> ParseUplink(const std::string& text) {
  SimCollectiveOptions::LeafUplink u;
  if (std::sscanf(text.c_str(), "%d:%d:%d", &u.supernode, &u.leaf, &u.spine) != 3 || u.supernode < 0 || u.leaf < 0 ||
      u.spine < 0) {
    return InvalidArgument("--fail-uplink '{}' must be SUPERNODE:LEAF:SPINE (e.g. 0:0:3)", text);
  }
  return u;
}

}  // namespace

StatusOr<CollectiveAnswer> RunCollectiveQuery(const CollectiveQuery& q) {
  TESSERA_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpec(q.cluster));
  SimCollectiveOptions o;
  TESSERA_ASSIGN_OR_RETURN(o.kind, ParseCollectiveKind(q.op));
  TESSERA_ASSIGN_OR_RETURN(o.algo, ParseCollectiveAlgo(q.algo));
  TESSERA_ASSIGN_OR_RETURN(o.routing, ParseRouting(q.routing));
  CollectiveAnswer a;
  TESSERA_ASSIGN_OR_RETURN(a.bytes, comm::ParseByteSize(q.size));
  o.bytes = static_cast<double>(a.bytes);
  o.ranks = q.ranks > 0 ? q.ranks : spec.supernode.devices;
  for (const std::string& u : q.fail_uplinks) {
    TESSERA_ASSIGN_OR_RETURN(auto uplink, ParseUplink(u));
    o.failed_leaf_uplinks.push_back(uplink);
  }
  SimCollectiveResult& r = a.result;
  if (q.cc != "dcqcn" && q.cc != "none") return InvalidArgument("--cc '{}': choose dcqcn or none", q.cc);
  if (q.engine == "flow") {
    TESSERA_ASSIGN_OR_RETURN(r, SimulateCollective(spec, o));
  } else if (q.engine == "packet") {
    // Every rank sends at most ~2x its buffer; keep the packet count tractable.
    const double packets = 2.0 * o.bytes * o.ranks / o.packet.mtu_bytes;
    if (packets > 5e7) {
      return InvalidArgument("~{:.0e} packets is too large for the packet engine (small cases only); use --engine "
                             "flow or a smaller --size / --ranks",
                             packets);
    }
    o.packet_level = true;
    o.packet.dcqcn = o.packet.ecn = q.cc == "dcqcn";
    o.packet.pfc = q.pfc;
    TESSERA_ASSIGN_OR_RETURN(r, SimulateCollective(spec, o));
  } else if (q.engine == "analytic") {
    if (o.ranks < 2 || o.ranks > spec.TotalDevices()) {
      return InvalidArgument("--ranks {} must be in [2, {}]", o.ranks, spec.TotalDevices());
    }
    if (!o.failed_leaf_uplinks.empty()) return InvalidArgument("--fail-uplink needs --engine flow");
    const auto t0 = std::chrono::steady_clock::now();
    CollectiveCost c = EstimateCollective(spec, o.kind, o.bytes, GroupLayout::Contiguous(spec, o.ranks), o.algo);
    r.algo = c.algo;
    r.ranks = o.ranks;
    r.time_s = c.time_s;
    r.algbw = c.algbw;
    r.busbw = c.busbw;
    r.utilization = c.utilization;
    r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    return InvalidArgument("--engine '{}': choose flow, packet or analytic", q.engine);
  }
  a.cluster = spec.name;
  a.kind = o.kind;
  a.routing = q.routing;
  a.engine = q.engine;
  return a;
}

nlohmann::json CollectiveAnswerJson(const CollectiveAnswer& a) {
  const SimCollectiveResult& r = a.result;
  nlohmann::json j = {{"cluster", a.cluster},
                      {"op", std::string(CollectiveKindName(a.kind))},
                      {"algo", std::string(CollectiveAlgoName(r.algo))},
                      {"routing", a.routing},
                      {"engine", a.engine},
                      {"ranks", r.ranks},
                      {"size_bytes", a.bytes},
                      {"time_s", r.time_s},
                      {"algbw_GBps", r.algbw / 1e9},
                      {"busbw_GBps", r.busbw / 1e9},
                      {"utilization", r.utilization},
                      {"sim_wall_s", r.sim_wall_s},
                      {"flows", r.flows},
                      {"events", r.events}};
  if (a.engine == "packet") {
    j["cnps"] = r.cnps;
    j["max_queue_bytes"] = r.max_queue_bytes;
  }
  return j;
}

}  // namespace tessera::sim
