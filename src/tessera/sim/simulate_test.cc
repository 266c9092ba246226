#include "tessera/sim/simulate.h"

#include <gtest/gtest.h>

#include "tessera/sim/collective_cost.h"
#include "tessera/sim/schedule.h"
#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

using testing::ParseOrDie;
using testing::SpecText;

SimCollectiveOptions Options(CollectiveKind kind, CollectiveAlgo algo, double bytes, int ranks, Routing routing) {
  return testing::CollectiveOptions(kind, algo, bytes, ranks, routing);
}

TEST(SimulateTest, RingAllReduceOnNonBlockingSwitchIsTheClosedForm) {
  // 8 devices, 100 GB/s each way, 1 us per message end to end.
  ClusterSpec c = ParseOrDie(SpecText(8, 1, "kind = \"switch\"\nport_gbyte_s = 100\nendpoint_latency_us = 1"));
  for (int n : {2, 5, 8}) {
    const double s = 64e6;
    auto r = SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, s, n, Routing::kEcmp));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const double expect = 2.0 * (n - 1) / n * s / 100e9 + 2 * (n - 1) * 1e-6;
    EXPECT_NEAR(r->time_s, expect, 1e-9 * expect) << n;
    // The analytic model agrees exactly on a non-blocking switch.
    auto a = EstimateCollective(c, CollectiveKind::kAllReduce, s, GroupLayout::Contiguous(c, n), CollectiveAlgo::kRing);
    EXPECT_NEAR(a.time_s, r->time_s, 1e-9 * expect);
    EXPECT_NEAR(r->utilization, r->busbw / 100e9, 1e-9);
  }
}

TEST(SimulateTest, HalvingDoublingAndTreeMatchTheirClosedForms) {
  ClusterSpec c = ParseOrDie(SpecText(8, 1, "kind = \"switch\"\nport_gbyte_s = 10\nendpoint_latency_us = 2"));
  const double s = 8e6, b = 10e9, a = 2e-6;
  auto hd = SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kHalvingDoubling, s, 8,
                                          Routing::kEcmp));
  ASSERT_TRUE(hd.ok());
  EXPECT_NEAR(hd->time_s, 2 * 3 * a + 2.0 * 7 / 8 * s / b, 1e-12);
  auto tree = SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kTree, s, 8, Routing::kEcmp));
  ASSERT_TRUE(tree.ok());
  EXPECT_NEAR(tree->time_s, 2 * 3 * (a + s / b), 1e-12);
  auto ag = SimulateCollective(c, Options(CollectiveKind::kAllGather, CollectiveAlgo::kHalvingDoubling, s, 8,
                                          Routing::kEcmp));
  ASSERT_TRUE(ag.ok());
  EXPECT_NEAR(ag->time_s, 3 * a + 7.0 / 8 * s / b, 1e-12);
}

TEST(SimulateTest, AllToAllOnFullBisectionFatTreeRunsAtLineRate) {
  // k=4 fat-tree: 16 hosts, full bisection; every pairwise step is a permutation.
  ClusterSpec c = ParseOrDie(SpecText(16, 1, "kind = \"fat_tree\"\nk = 4\nport_gbyte_s = 10\nendpoint_latency_us = 1"));
  const double s = 160e6;
  auto r = SimulateCollective(c, Options(CollectiveKind::kAllToAll, CollectiveAlgo::kPairwise, s, 16,
                                         Routing::kAdaptive));
  ASSERT_TRUE(r.ok());
  const double ideal = 15.0 / 16 * s / 10e9 + 15 * 1e-6;
  EXPECT_GE(r->time_s, ideal * (1 - 1e-9));
  EXPECT_LT(r->time_s, ideal * 1.02);
  EXPECT_GT(r->utilization, 0.97);
}

TEST(SimulateTest, EcmpCollidesOnUbl128WhereAdaptiveRoutingDoesNot) {
  ClusterSpec c = testing::LoadPreset("ascend950-ubl128");
  const double s = 1 << 30;
  auto ecmp = SimulateCollective(c, Options(CollectiveKind::kAllToAll, CollectiveAlgo::kPairwise, s, 128,
                                            Routing::kEcmp));
  auto adaptive = SimulateCollective(c, Options(CollectiveKind::kAllToAll, CollectiveAlgo::kPairwise, s, 128,
                                                Routing::kAdaptive));
  ASSERT_TRUE(ecmp.ok() && adaptive.ok());
  // Adaptive: near line rate. ECMP: hash collisions on leaf-spine links cost > 25%.
  EXPECT_GT(adaptive->utilization, 0.90);
  EXPECT_LT(ecmp->utilization, 0.75);
  EXPECT_GT(ecmp->time_s, 1.25 * adaptive->time_s);
}

TEST(SimulateTest, FailedLinksAreRoutedAround) {
  ClusterSpec c = testing::LoadPreset("ascend950-ubl128");
  SimCollectiveOptions o = Options(CollectiveKind::kAllToAll, CollectiveAlgo::kPairwise, 16e6, 128, Routing::kEcmp);
  auto healthy = SimulateCollective(c, o);
  // Leaf 0 loses 4 of its 8 core uplinks: everything still arrives, slower.
  for (int spine = 0; spine < 4; ++spine) o.failed_leaf_uplinks.push_back({0, 0, spine});
  auto degraded = SimulateCollective(c, o);
  ASSERT_TRUE(healthy.ok() && degraded.ok()) << degraded.status().ToString();
  EXPECT_GT(degraded->time_s, healthy->time_s);
  // Every uplink gone: leaf 0 is cut off.
  for (int spine = 4; spine < 8; ++spine) o.failed_leaf_uplinks.push_back({0, 0, spine});
  auto cut = SimulateCollective(c, o);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(cut.status().message().find("failed links"), std::string::npos);
}

TEST(SimulateTest, FailedRouteNeverUsesTheFailedLink) {
  ClusterSpec c = testing::LoadPreset("ascend950-ubl128");
  FlowEngine engine;
  auto topo = Topology::Build(c, engine, Routing::kEcmp, 128);
  ASSERT_TRUE(topo.ok());
  const int dead = topo->UplinkOfLeaf(0, 0, 3);
  engine.FailLink(dead);
  std::vector<int> flows;
  for (int dst = 8; dst < 128; ++dst) flows.push_back(engine.AddRoutedFlow(0, dst, 1e6));
  engine.SetPathSelector(&*topo);
  ASSERT_TRUE(engine.Run().ok());
  for (int f : flows) {
    for (int l : engine.route(f)) EXPECT_NE(l, dead);
  }
}

TEST(SimulateTest, HierarchicalBeatsFlatRingAcrossSuperNodes) {
  ClusterSpec c = testing::LoadPreset("a100-dgx");
  const double s = 256e6;
  auto ring = SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, s, 32, Routing::kAdaptive));
  auto hier = SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kHierarchical, s, 32,
                                            Routing::kAdaptive));
  ASSERT_TRUE(ring.ok() && hier.ok());
  EXPECT_LT(hier->time_s, ring->time_s);
  // Within 10% of the analytic model for the same algorithm.
  auto a = EstimateCollective(c, CollectiveKind::kAllReduce, s, GroupLayout{32, 8}, CollectiveAlgo::kHierarchical);
  EXPECT_NEAR(hier->time_s, a.time_s, 0.1 * a.time_s);
}

TEST(SimulateTest, RejectsBadRequests) {
  ClusterSpec c = ParseOrDie(SpecText(8, 1, "kind = \"switch\"\nport_gbyte_s = 100"));
  EXPECT_FALSE(SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, 1e6, 9,
                                             Routing::kEcmp)).ok());
  EXPECT_FALSE(SimulateCollective(c, Options(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, 0, 8,
                                             Routing::kEcmp)).ok());
}

}  // namespace
}  // namespace tessera::sim
