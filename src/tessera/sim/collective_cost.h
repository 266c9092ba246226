// Closed-form (alpha-beta) collective costs on a ClusterSpec: what the
// planner calls millions of times (no allocation, ~100 ns per call).
//
// A group of `size` ranks is laid out with `ranks_per_supernode` of them in
// each super-node it touches (size: all inside one super-node; 1: strided,
// one rank per super-node). Intra-super-node steps run at the fabric's
// endpoint bandwidth B1 and path latency a1; steps between super-nodes at
// the scale-out endpoint bandwidth B2 (divided by the network's leaf
// oversubscription) and latency a2. Per algorithm (n ranks, S bytes) the
// communication library's own formulas (comm/algo/network_cost.h — one
// α-β model for the selector and the simulator):
//   ring all-reduce        2(n-1) a + 2(n-1)/n S/B
//   halving-doubling       2 log2(p) a + 2(p-1)/p S/B, p = the power of two <= n
//                          (+2(a + S/B) folding the n - p extra ranks in and out)
//   tree (binomial)        2 ceil(log2 n) (a + S/B)
//   hierarchical           intra reduce-scatter + inter all-reduce of S/m + intra all-gather
//   pairwise all-to-all    (n-1) a + max(intra share / B1, inter share / B2)
// all-gather / reduce-scatter take the one-way halves. kAuto picks the
// cheapest applicable algorithm; an algorithm that does not apply to the
// kind (tree all-to-all) is replaced by kAuto's choice, reported in `algo`.
// S follows nccl-tests (see collective.h). Thread-safe (pure functions).
#pragma once

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/collective.h"

namespace tessera::sim {

struct GroupLayout {
  int size = 1;
  int ranks_per_supernode = 1;

  // Ranks packed into super-nodes: min(size, devices per super-node) each.
  static GroupLayout Contiguous(const ClusterSpec& spec, int size);
  // One rank per super-node.
  static GroupLayout Strided(int size) { return GroupLayout{size, 1}; }
};

struct CollectiveCost {
  double time_s = 0;
  double algbw = 0;  // bytes/s
  double busbw = 0;  // bytes/s
  // Bandwidth term / time: the fraction of the ranks' injection bandwidth in use.
  double utilization = 0;
  CollectiveAlgo algo = CollectiveAlgo::kAuto;
};

// Bandwidth and start-up latency of one level of the cluster.
struct LevelLink {
  double bw = 0;       // bytes/s per rank per direction
  double latency = 0;  // seconds per message
};
LevelLink IntraLink(const ClusterSpec& spec);
LevelLink InterLink(const ClusterSpec& spec);

// TESSERA_CHECKs 1 <= ranks_per_supernode <= min(size, devices per super-node)
// and that the group fits in the cluster (a programmer error otherwise).
CollectiveCost EstimateCollective(const ClusterSpec& spec, CollectiveKind kind, double bytes, const GroupLayout& group,
                                  CollectiveAlgo algo = CollectiveAlgo::kAuto);

// One point-to-point message of `bytes` (pipeline activations).
double EstimateP2P(const ClusterSpec& spec, double bytes, bool same_supernode);

}  // namespace tessera::sim
