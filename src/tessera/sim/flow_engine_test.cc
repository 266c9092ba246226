#include "tessera/sim/flow_engine.h"

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

TEST(FlowEngineTest, MaxMinFairSharesOnHandBuiltCases) {
  // Links A and B of 10; f1 on A, f2 on A and B, f3 and f4 on B:
  // B is the bottleneck (10/3 each for f2, f3, f4); f1 takes A's rest.
  FlowEngine e;
  int a = e.AddLink(10), b = e.AddLink(10);
  int f1 = e.AddFlow({a}, 1e9), f2 = e.AddFlow({a, b}, 1e9), f3 = e.AddFlow({b}, 1e9), f4 = e.AddFlow({b}, 1e9);
  ASSERT_FALSE(*e.RunUntil(1e-3));
  EXPECT_NEAR(e.rate(f2), 10.0 / 3, 1e-12);
  EXPECT_NEAR(e.rate(f3), 10.0 / 3, 1e-12);
  EXPECT_NEAR(e.rate(f4), 10.0 / 3, 1e-12);
  EXPECT_NEAR(e.rate(f1), 20.0 / 3, 1e-12);

  // Parking lot: L1 (1) carries f0, f1; L2 (2) carries f0, f2.
  FlowEngine p;
  int l1 = p.AddLink(1), l2 = p.AddLink(2);
  int g0 = p.AddFlow({l1, l2}, 100), g1 = p.AddFlow({l1}, 100), g2 = p.AddFlow({l2}, 100);
  ASSERT_FALSE(*p.RunUntil(1e-3));
  EXPECT_DOUBLE_EQ(p.rate(g0), 0.5);
  EXPECT_DOUBLE_EQ(p.rate(g1), 0.5);
  EXPECT_DOUBLE_EQ(p.rate(g2), 1.5);

  // Three levels: capacities 3, 5, 12; flows {x}, {x,y}, {y}, {y,z}, {z}, {z}.
  FlowEngine m;
  int x = m.AddLink(3), y = m.AddLink(5), z = m.AddLink(12);
  int h[6] = {m.AddFlow({x}, 100), m.AddFlow({x, y}, 100), m.AddFlow({y}, 100),
              m.AddFlow({y, z}, 100), m.AddFlow({z}, 100), m.AddFlow({z}, 100)};
  ASSERT_FALSE(*m.RunUntil(1e-3));
  // x: 1.5 each; y: 5 - 1.5 = 3.5 over 2 -> 1.75; z: 12 - 1.75 = 10.25 over 2.
  const double want[6] = {1.5, 1.5, 1.75, 1.75, 5.125, 5.125};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(m.rate(h[i]), want[i], 1e-12) << i;
}

TEST(FlowEngineTest, CompletionTimesFollowTheChangingShares) {
  FlowEngine e;
  int l = e.AddLink(1);
  int small = e.AddFlow({l}, 1), big = e.AddFlow({l}, 2);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_NEAR(e.result(small).finish_s, 2.0, 1e-12);  // 0.5 B/s for 2 s
  EXPECT_NEAR(e.result(big).finish_s, 3.0, 1e-12);    // then alone at 1 B/s
  EXPECT_NEAR(e.makespan(), 3.0, 1e-12);
}

TEST(FlowEngineTest, DependenciesDelaysAndLatency) {
  FlowEngine e;
  int l = e.AddLink(1, 0.25);
  int a = e.AddFlow({l}, 1), b = e.AddFlow({l}, 1), c = e.AddFlow({l}, 0);
  e.AddDependency(b, a);
  e.SetDelay(b, 0.5);
  e.AddDependency(c, b);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_NEAR(e.result(a).start_s, 0.25, 1e-12);
  EXPECT_NEAR(e.result(a).finish_s, 1.25, 1e-12);
  EXPECT_NEAR(e.result(b).release_s, 1.75, 1e-12);
  EXPECT_NEAR(e.result(b).finish_s, 3.0, 1e-12);
  EXPECT_NEAR(e.result(c).finish_s, 3.25, 1e-12);  // zero bytes: latency only
}

TEST(FlowEngineTest, RecomputesOnlyTheAffectedComponent) {
  FlowEngine e;
  int l1 = e.AddLink(1), l2 = e.AddLink(1);
  e.AddFlow({l1}, 10);
  e.AddFlow({l2}, 10);
  e.AddFlow({l1}, 10, /*release_s=*/1.0);
  ASSERT_FALSE(*e.RunUntil(1.5));
  // t=0: both components (2 rates); t=1: only l1's component (2 rates).
  EXPECT_EQ(e.rate_updates(), 4);
  EXPECT_DOUBLE_EQ(e.rate(1), 1.0);
  EXPECT_DOUBLE_EQ(e.rate(2), 0.5);
}

TEST(FlowEngineTest, ReportsUnroutableAndStuckFlows) {
  FlowEngine e;
  int l = e.AddLink(1);
  e.FailLink(l);
  e.AddFlow({l}, 1);
  Status st = e.Run();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  FlowEngine cyc;
  int k = cyc.AddLink(1);
  int a = cyc.AddFlow({k}, 1), b = cyc.AddFlow({k}, 1);
  cyc.AddDependency(a, b);
  cyc.AddDependency(b, a);
  EXPECT_NE(cyc.Run().message().find("never finished"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
