#include "tessera/sim/flow_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

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

// Reference: every event re-fills all active flows from scratch (no
// incremental state) and advances every flow; completion times must agree.
std::vector<double> ReferenceFinishTimes(const std::vector<double>& capacity, const std::vector<std::vector<int>>& paths,
                                         const std::vector<double>& bytes, const std::vector<double>& release) {
  const size_t n = paths.size();
  std::vector<double> remaining = bytes, finish(n, -1), rate(n, 0);
  double now = 0;
  while (true) {
    std::vector<int> active;
    for (size_t f = 0; f < n; ++f) {
      if (finish[f] < 0 && release[f] <= now) active.push_back(static_cast<int>(f));
    }
    // Progressive filling over the active flows.
    std::vector<double> rem = capacity;
    std::vector<bool> frozen(n, false);
    size_t left = active.size();
    while (left > 0) {
      double best = std::numeric_limits<double>::infinity();
      int link = -1;
      for (size_t l = 0; l < capacity.size(); ++l) {
        int cnt = 0;
        for (int f : active) cnt += !frozen[f] && std::count(paths[f].begin(), paths[f].end(), l);
        if (cnt > 0 && rem[l] / cnt < best) best = rem[l] / cnt, link = static_cast<int>(l);
      }
      for (int f : active) {
        if (frozen[f] || !std::count(paths[f].begin(), paths[f].end(), link)) continue;
        frozen[f] = true;
        rate[f] = best;
        --left;
        for (int l : paths[f]) rem[l] -= best;
      }
    }
    double next = std::numeric_limits<double>::infinity();
    for (int f : active) next = std::min(next, now + remaining[f] / rate[f]);
    for (size_t f = 0; f < n; ++f) {
      if (release[f] > now) next = std::min(next, release[f]);
    }
    if (next == std::numeric_limits<double>::infinity()) return finish;
    for (int f : active) {
      remaining[f] -= rate[f] * (next - now);
      if (remaining[f] <= 1e-9 * bytes[f]) finish[f] = next;
    }
    now = next;
  }
}

TEST(FlowEngineTest, IncrementalRatesMatchAFullRefillAtEveryEvent) {
  // Random flows over a small shared network (paths of 1-4 of 12 links with
  // mixed capacities), staggered releases: every completion and arrival
  // reshuffles the bottlenecks, so the incremental update must propagate.
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<double> capacity(12);
    for (double& c : capacity) c = std::uniform_real_distribution<double>(1, 10)(rng);
    std::vector<std::vector<int>> paths(40);
    std::vector<double> bytes(40), release(40);
    FlowEngine e;
    for (double c : capacity) e.AddLink(c);
    for (size_t f = 0; f < paths.size(); ++f) {
      int hops = std::uniform_int_distribution<int>(1, 4)(rng);
      while (static_cast<int>(paths[f].size()) < hops) {
        int l = std::uniform_int_distribution<int>(0, 11)(rng);
        if (!std::count(paths[f].begin(), paths[f].end(), l)) paths[f].push_back(l);
      }
      bytes[f] = std::uniform_real_distribution<double>(1, 20)(rng);
      release[f] = std::uniform_real_distribution<double>(0, 10)(rng);
      e.AddFlow(paths[f], bytes[f], release[f]);
    }
    ASSERT_TRUE(e.Run().ok());
    std::vector<double> want = ReferenceFinishTimes(capacity, paths, bytes, release);
    for (size_t f = 0; f < paths.size(); ++f) {
      EXPECT_NEAR(e.result(static_cast<int>(f)).finish_s, want[f], 1e-7 * want[f]) << "seed " << seed << " flow " << f;
    }
  }
}

TEST(FlowEngineTest, TasksTakeTheirDurationAndChainWithFlows) {
  FlowEngine e;
  int l = e.AddLink(2);
  int compute = e.AddTask(1.5);
  int send = e.AddFlow({l}, 4);
  e.AddDependency(send, compute);
  int after = e.AddTask(0.25);
  e.AddDependency(after, send);
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DOUBLE_EQ(e.result(compute).finish_s, 1.5);
  EXPECT_DOUBLE_EQ(e.result(send).finish_s, 3.5);
  EXPECT_DOUBLE_EQ(e.result(after).finish_s, 3.75);
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
