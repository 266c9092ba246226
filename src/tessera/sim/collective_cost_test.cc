#include "tessera/sim/collective_cost.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

// 8 devices per super-node on a 100 GB/s switch (latency 1 us end to end),
// 4 super-nodes joined by a 10 GB/s switch (latency 5 us).
ClusterSpec TwoLevel() {
  return testing::ParseOrDie(testing::SpecText(8, 4, "kind = \"switch\"\nport_gbyte_s = 100\nendpoint_latency_us = 1",
                                               "kind = \"switch\"\nport_gbyte_s = 10\nendpoint_latency_us = 5"));
}

TEST(CollectiveCostTest, RingAllReduceOnOneSwitchIsTheClosedForm) {
  ClusterSpec c = TwoLevel();
  const double s = 1 << 30, b = 100e9, a = 1e-6;
  for (int n : {2, 3, 8}) {
    CollectiveCost cost = EstimateCollective(c, CollectiveKind::kAllReduce, s, GroupLayout::Contiguous(c, n),
                                             CollectiveAlgo::kRing);
    double expect = 2.0 * (n - 1) / n * s / b + 2 * (n - 1) * a;
    EXPECT_NEAR(cost.time_s, expect, 1e-12 * expect) << n;
    EXPECT_EQ(cost.algo, CollectiveAlgo::kRing);
    EXPECT_NEAR(cost.algbw, s / expect, 1e-6 * cost.algbw);
    EXPECT_NEAR(cost.busbw, cost.algbw * 2.0 * (n - 1) / n, 1e-6 * cost.busbw);
    // Large messages: busbw approaches the link bandwidth.
    EXPECT_NEAR(cost.busbw, b, 0.01 * b);
    EXPECT_NEAR(cost.utilization, cost.busbw / b, 1e-9);
  }
}

TEST(CollectiveCostTest, AutoPicksTreeForTinyAndBandwidthOptimalForLarge) {
  ClusterSpec c = TwoLevel();
  GroupLayout g = GroupLayout::Contiguous(c, 8);
  CollectiveCost tiny = EstimateCollective(c, CollectiveKind::kAllReduce, 8, g);
  EXPECT_TRUE(tiny.algo == CollectiveAlgo::kTree || tiny.algo == CollectiveAlgo::kHalvingDoubling);
  const double tree = 2 * 3 * (1e-6 + 8 / 100e9), hd = 2 * 3 * 1e-6 + 2.0 * 7 / 8 * 8 / 100e9;
  EXPECT_NEAR(tiny.time_s, std::min(tree, hd), 1e-15);
  CollectiveCost big = EstimateCollective(c, CollectiveKind::kAllReduce, 1e9, g);
  EXPECT_NEAR(big.time_s, 2.0 * 7 / 8 * 1e9 / 100e9 + 2 * 3 * 1e-6, 1e-9);  // halving-doubling
  EXPECT_EQ(big.algo, CollectiveAlgo::kHalvingDoubling);
  // An algorithm that does not apply falls back to auto.
  CollectiveCost a2a = EstimateCollective(c, CollectiveKind::kAllToAll, 1e6, g, CollectiveAlgo::kTree);
  EXPECT_EQ(a2a.algo, CollectiveAlgo::kPairwise);
}

TEST(CollectiveCostTest, HierarchicalAllReduceAcrossSuperNodes) {
  ClusterSpec c = TwoLevel();
  const double s = 1e9;
  GroupLayout g{32, 8};
  CollectiveCost h = EstimateCollective(c, CollectiveKind::kAllReduce, s, g, CollectiveAlgo::kHierarchical);
  // Intra RS + AG (halving-doubling, 8 ranks) + inter all-reduce of S/8 over 4 super-nodes.
  double intra = 2 * (3 * 1e-6 + 7.0 / 8 * s / 100e9);
  double inter = 2 * (2 * 5e-6 + 3.0 / 4 * (s / 8) / 10e9);
  EXPECT_NEAR(h.time_s, intra + inter, 1e-9);
  // A flat ring runs at the slow link: far slower.
  CollectiveCost ring = EstimateCollective(c, CollectiveKind::kAllReduce, s, g, CollectiveAlgo::kRing);
  EXPECT_NEAR(ring.time_s, 2 * 31 * 5e-6 + 2.0 * 31 / 32 * s / 10e9, 1e-9);
  EXPECT_GT(ring.time_s, 3 * h.time_s);
  EXPECT_NEAR(h.utilization, (7.0 / 4 * s / 100e9 + 3.0 / 2 * (s / 8) / 10e9) / h.time_s, 1e-9);
  EXPECT_LT(h.utilization, 1.0);
  EXPECT_EQ(EstimateCollective(c, CollectiveKind::kAllReduce, s, g).algo, CollectiveAlgo::kHierarchical);
  // Strided (one rank per super-node): only the slow level.
  CollectiveCost strided = EstimateCollective(c, CollectiveKind::kAllGather, s, GroupLayout::Strided(4));
  EXPECT_NEAR(strided.time_s, 2 * 5e-6 + 3.0 / 4 * s / 10e9, 1e-9);
  EXPECT_NEAR(strided.busbw, 10e9, 0.01 * 10e9);
}

TEST(CollectiveCostTest, AllToAllSplitsTrafficByLevel) {
  ClusterSpec c = TwoLevel();
  const double s = 32e6;
  CollectiveCost one = EstimateCollective(c, CollectiveKind::kAllToAll, s, GroupLayout::Contiguous(c, 8));
  EXPECT_NEAR(one.time_s, 7 * 1e-6 + 7.0 / 8 * s / 100e9, 1e-12);
  CollectiveCost all = EstimateCollective(c, CollectiveKind::kAllToAll, s, GroupLayout{32, 8});
  // 24/32 of S leaves the super-node at 10 GB/s; 7/32 stays at 100 GB/s.
  EXPECT_NEAR(all.time_s, 31 * 5e-6 + 24.0 / 32 * s / 10e9, 1e-12);
  EXPECT_NEAR(all.busbw, s / all.time_s * 31 / 32, 1);
}

TEST(CollectiveCostTest, OversubscribedNetworkSlowsCrossLeafTraffic) {
  ClusterSpec c = testing::ParseOrDie(testing::SpecText(
      8, 4, "kind = \"switch\"\nport_gbyte_s = 100",
      "kind = \"leaf_spine\"\nport_gbyte_s = 10\nendpoints_per_leaf = 8\nspines = 2\nuplink_gbyte_s = 10"));
  EXPECT_DOUBLE_EQ(InterLink(c).bw, 10e9 / 4);
  CollectiveCost strided = EstimateCollective(c, CollectiveKind::kReduceScatter, 1e9, GroupLayout::Strided(4));
  EXPECT_NEAR(strided.busbw, 2.5e9, 0.01 * 2.5e9);
}

TEST(CollectiveCostTest, PresetsGiveSaneNumbers) {
  ClusterSpec a100 = testing::LoadPreset("a100-dgx");
  // 8-GPU NVSwitch all-reduce of 1 GiB: busbw near 300 GB/s.
  CollectiveCost tp = EstimateCollective(a100, CollectiveKind::kAllReduce, 1 << 30, GroupLayout::Contiguous(a100, 8));
  EXPECT_GT(tp.busbw, 290e9);
  EXPECT_LE(tp.busbw, 300e9);
  // 64-way data parallel strided over nodes: busbw near the 25 GB/s HCA.
  CollectiveCost dp = EstimateCollective(a100, CollectiveKind::kAllReduce, 1 << 30, GroupLayout::Strided(64));
  EXPECT_GT(dp.busbw, 23e9);
  EXPECT_LE(dp.busbw, 25e9);
  EXPECT_NEAR(EstimateP2P(a100, 1e6, false), a100.network.MaxPathLatency() + 1e6 / 25e9, 1e-12);
  ClusterSpec ubl = testing::LoadPreset("ascend950-ubl128");
  CollectiveCost a2a = EstimateCollective(ubl, CollectiveKind::kAllToAll, 1 << 30, GroupLayout::Contiguous(ubl, 128));
  // 127 start-ups of ~4 us against 21 ms of data: within 5% of 50 GB/s.
  EXPECT_GT(a2a.busbw, 0.95 * 50e9);
  EXPECT_LE(a2a.busbw, 50e9);
}

}  // namespace
}  // namespace tessera::sim
