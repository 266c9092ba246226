#include "tessera/sim/collective_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/base/check.h"
#include "tessera/comm/algo/network_cost.h"

namespace tessera::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One-level costs over n ranks with link `l`: the communication library's
// own formulas (comm/algo/network_cost.h; no reduction or copy terms here).
// `full` = the bytes each rank holds at the end of an all-gather (or starts
// a reduce-scatter with).
double Net(comm::algo::Algorithm algo, comm::CollectiveKind kind, int n, double unit, const LevelLink& l) {
  if (n <= 1) return 0;
  return comm::algo::NetworkAlgorithmSeconds(algo, kind, n, unit, comm::algo::LinkConstants{l.latency, 1 / l.bw})
      .value_or(kInf);
}
using comm::algo::Algorithm;
using CK = comm::CollectiveKind;
double RingOneWay(int n, double full, const LevelLink& l) { return Net(Algorithm::kRing, CK::kAllGather, n, full / n, l); }
double HdOneWay(int n, double full, const LevelLink& l) {
  return Net(Algorithm::kHalvingDoubling, CK::kAllGather, n, full / n, l);
}
double TreeAllReduce(int n, double bytes, const LevelLink& l) {
  return Net(Algorithm::kBinomialTree, CK::kAllReduce, n, bytes, l);
}
double OneWay(CollectiveAlgo algo, int n, double full, const LevelLink& l) {
  return algo == CollectiveAlgo::kHalvingDoubling ? HdOneWay(n, full, l) : RingOneWay(n, full, l);
}
double AllReduce(CollectiveAlgo algo, int n, double bytes, const LevelLink& l) {
  return Net(algo == CollectiveAlgo::kHalvingDoubling ? Algorithm::kHalvingDoubling : Algorithm::kRing, CK::kAllReduce,
             n, bytes, l);
}
double BestOneWay(int n, double full, const LevelLink& l) {
  return std::min(RingOneWay(n, full, l), HdOneWay(n, full, l));
}
double BestAllReduce(int n, double bytes, const LevelLink& l) {
  return std::min({AllReduce(CollectiveAlgo::kRing, n, bytes, l), AllReduce(CollectiveAlgo::kHalvingDoubling, n, bytes, l),
                   TreeAllReduce(n, bytes, l)});
}

struct Layout {
  int n, m, g;  // ranks, ranks per super-node, super-nodes
  LevelLink intra, inter;
  // The link of a flat algorithm over all n ranks: the slower level it crosses.
  LevelLink Flat() const {
    if (g <= 1) return intra;
    if (m <= 1) return inter;
    return LevelLink{std::min(intra.bw, inter.bw), std::max(intra.latency, inter.latency)};
  }
};

// Cost of `algo` or +inf when it does not apply.
double Cost(CollectiveKind kind, CollectiveAlgo algo, double s, const Layout& L) {
  const LevelLink flat = L.Flat();
  const bool two_level = L.g > 1 && L.m > 1;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      switch (algo) {
        case CollectiveAlgo::kRing:
        case CollectiveAlgo::kHalvingDoubling: return AllReduce(algo, L.n, s, flat);
        case CollectiveAlgo::kTree: return TreeAllReduce(L.n, s, flat);
        case CollectiveAlgo::kHierarchical:
          if (!two_level) return kInf;
          return 2 * BestOneWay(L.m, s, L.intra) + BestAllReduce(L.g, s / L.m, L.inter);
        default: return kInf;
      }
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      switch (algo) {
        case CollectiveAlgo::kRing:
        case CollectiveAlgo::kHalvingDoubling: return OneWay(algo, L.n, s, flat);
        case CollectiveAlgo::kHierarchical:
          if (!two_level) return kInf;
          return BestOneWay(L.m, s, L.intra) + BestOneWay(L.g, s / L.m, L.inter);
        default: return kInf;
      }
    case CollectiveKind::kAllToAll: {
      if (algo != CollectiveAlgo::kPairwise || L.n <= 1) return algo == CollectiveAlgo::kPairwise ? 0 : kInf;
      // Per rank: (m-1)/n of S to super-node peers, (n-m)/n of S across; both
      // directions of both levels run at once, so the slower share dominates.
      double intra_t = (L.m - 1) * s / L.n / L.intra.bw;
      double inter_t = L.g > 1 ? (L.n - L.m) * s / L.n / L.inter.bw : 0;
      double alpha = L.g > 1 ? L.inter.latency : L.intra.latency;
      return (L.n - 1) * alpha + std::max(intra_t, inter_t);
    }
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      switch (algo) {
        case CollectiveAlgo::kTree:
          return Net(Algorithm::kBinomialTree, kind == CollectiveKind::kBroadcast ? CK::kBroadcast : CK::kReduce, L.n, s,
                     flat);
        // Pipelined chain: the message streams through n-1 hops.
        case CollectiveAlgo::kRing: return Net(Algorithm::kRing, CK::kBroadcast, L.n, s, flat);
        case CollectiveAlgo::kHierarchical:
          if (!two_level) return kInf;
          return Net(Algorithm::kBinomialTree, CK::kBroadcast, L.g, s, L.inter) +
                 Net(Algorithm::kBinomialTree, CK::kBroadcast, L.m, s, L.intra);
        default: return kInf;
      }
  }
  return kInf;
}

constexpr CollectiveAlgo kAlgos[] = {CollectiveAlgo::kRing, CollectiveAlgo::kTree, CollectiveAlgo::kHalvingDoubling,
                                     CollectiveAlgo::kHierarchical, CollectiveAlgo::kPairwise};

}  // namespace

GroupLayout GroupLayout::Contiguous(const ClusterSpec& spec, int size) {
  return GroupLayout{size, std::max(1, std::min(size, spec.supernode.devices))};
}

LevelLink IntraLink(const ClusterSpec& spec) {
  const NetworkSpec& f = spec.supernode.fabric;
  return LevelLink{f.EndpointBandwidth() / f.Oversubscription(), f.MaxPathLatency()};
}

LevelLink InterLink(const ClusterSpec& spec) {
  if (!spec.has_network) return IntraLink(spec);
  const NetworkSpec& n = spec.network;
  return LevelLink{n.EndpointBandwidth() / n.Oversubscription(), n.MaxPathLatency()};
}

CollectiveCost EstimateCollective(const ClusterSpec& spec, CollectiveKind kind, double bytes, const GroupLayout& group,
                                  CollectiveAlgo algo) {
  TESSERA_CHECK(group.size >= 1 && group.ranks_per_supernode >= 1 && group.ranks_per_supernode <= group.size &&
                    group.ranks_per_supernode <= spec.supernode.devices,
                "bad group layout: size {} with {} ranks per super-node (super-nodes hold {} devices)", group.size,
                group.ranks_per_supernode, spec.supernode.devices);
  Layout L{group.size, group.ranks_per_supernode, (group.size + group.ranks_per_supernode - 1) / group.ranks_per_supernode,
           IntraLink(spec), InterLink(spec)};
  TESSERA_CHECK(L.g <= spec.supernodes, "group of {} ranks at {} per super-node needs {} super-nodes; the cluster has {}",
                group.size, group.ranks_per_supernode, L.g, spec.supernodes);
  CollectiveCost c;
  c.algo = algo;
  c.time_s = algo == CollectiveAlgo::kAuto ? kInf : Cost(kind, algo, bytes, L);
  if (!std::isfinite(c.time_s)) {
    for (CollectiveAlgo a : kAlgos) {
      double t = Cost(kind, a, bytes, L);
      if (t < c.time_s) c.time_s = t, c.algo = a;
    }
  }
  if (c.time_s > 0) {
    c.algbw = bytes / c.time_s;
    c.busbw = c.algbw * BusBwFactor(kind, group.size);
    Layout no_latency = L;
    no_latency.intra.latency = no_latency.inter.latency = 0;
    c.utilization = Cost(kind, c.algo, bytes, no_latency) / c.time_s;
  }
  return c;
}

double EstimateP2P(const ClusterSpec& spec, double bytes, bool same_supernode) {
  LevelLink l = same_supernode ? IntraLink(spec) : InterLink(spec);
  return l.latency + bytes / l.bw;
}

}  // namespace tessera::sim
