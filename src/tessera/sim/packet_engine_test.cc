#include "tessera/sim/packet_engine.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "tessera/sim/sim_test_util.h"
#include "tessera/sim/simulate.h"

namespace tessera::sim {
namespace {

using testing::ParseOrDie;
using testing::SpecText;

SimCollectiveOptions Options(CollectiveKind kind, CollectiveAlgo algo, double bytes, int ranks, bool packet) {
  return testing::CollectiveOptions(kind, algo, bytes, ranks, Routing::kAdaptive, packet);
}

TEST(PacketEngineTest, FlowAndPacketEnginesAgreeOnLargeTransfers) {
  ClusterSpec sw = ParseOrDie(SpecText(8, 1, "kind = \"switch\"\nport_gbit = 100\nendpoint_latency_us = 2\n"
                                             "link_latency_us = 0.5\nswitch_latency_us = 0.5"));
  ClusterSpec ft = ParseOrDie(SpecText(16, 1, "kind = \"fat_tree\"\nk = 4\nport_gbit = 100\nendpoint_latency_us = 2\n"
                                              "link_latency_us = 0.5\nswitch_latency_us = 0.5"));
  struct Case {
    const ClusterSpec* spec;
    CollectiveKind kind;
    CollectiveAlgo algo;
    double bytes;
    int ranks;
  } cases[] = {
      {&sw, CollectiveKind::kAllReduce, CollectiveAlgo::kRing, 64e6, 8},
      {&sw, CollectiveKind::kAllToAll, CollectiveAlgo::kPairwise, 64e6, 8},
  };
  for (const Case& c : cases) {
    auto flow = SimulateCollective(*c.spec, Options(c.kind, c.algo, c.bytes, c.ranks, false));
    auto packet = SimulateCollective(*c.spec, Options(c.kind, c.algo, c.bytes, c.ranks, true));
    ASSERT_TRUE(flow.ok() && packet.ok()) << packet.status().ToString();
    EXPECT_NEAR(packet->time_s, flow->time_s, 0.05 * flow->time_s) << CollectiveKindName(c.kind) << " " << c.ranks;
  }
  // A permutation across a k=4 fat-tree (shift 5: every flow leaves its pod).
  // Adaptive: collision-free in both engines, DCQCN on. ECMP: hash collisions
  // share links in both; without congestion control the shared queue drains
  // at line rate, as max-min sharing assumes (with DCQCN the rate cuts make the
  // packet engine slower: see docs/sim.md).
  for (Routing routing : {Routing::kEcmp, Routing::kAdaptive}) {
    FlowEngine flows, links;
    auto t1 = Topology::Build(ft, flows, routing);
    auto t2 = Topology::Build(ft, links, routing);
    ASSERT_TRUE(t1.ok() && t2.ok());
    PacketParams params;
    params.dcqcn = params.ecn = routing == Routing::kAdaptive;
    PacketEngine packets(links, &*t2, params);
    for (int i = 0; i < 16; ++i) {
      flows.AddRoutedFlow(i, (i + 5) % 16, 16e6);
      packets.AddRoutedFlow(i, (i + 5) % 16, 16e6);
    }
    flows.SetPathSelector(&*t1);
    ASSERT_TRUE(flows.Run().ok());
    ASSERT_TRUE(packets.Run().ok());
    EXPECT_NEAR(packets.makespan(), flows.makespan(), 0.05 * flows.makespan());
  }
}

struct Incast {
  double makespan = 0, steady_mean_queue = 0, max_queue = 0, jain = 0, spread = 0;
  int64_t drops = 0, cnps = 0;
};

// n senders to one receiver through one switch at 100 Gb/s.
Incast RunIncast(int n, const PacketParams& params) {
  ClusterSpec c = ParseOrDie(SpecText(n + 1, 1, "kind = \"switch\"\nport_gbit = 100\nendpoint_latency_us = 1\n"
                                                "link_latency_us = 0.5\nswitch_latency_us = 0.5"));
  FlowEngine links;
  auto topo = Topology::Build(c, links, Routing::kEcmp);
  EXPECT_TRUE(topo.ok());
  PacketEngine e(links, &*topo, params);
  const int bottleneck = topo->AccessUpLink(n, false) + (n + 1);  // the switch's egress to the receiver
  e.TraceQueue(bottleneck);
  for (int s = 0; s < n; ++s) e.AddRoutedFlow(s, n, 32e6);
  EXPECT_TRUE(e.Run().ok());
  Incast r;
  r.makespan = e.makespan();
  r.max_queue = e.queue(bottleneck).max_bytes;
  r.drops = e.queue(bottleneck).dropped;
  r.cnps = e.cnps();
  // Time-average of the queue over the second half of the run.
  double area = 0, t0 = r.makespan / 2, last_t = t0, last_q = 0;
  for (auto [t, q] : e.trace()) {
    if (t <= t0) {
      last_q = q;
      continue;
    }
    area += last_q * (t - last_t);
    last_t = t, last_q = q;
  }
  r.steady_mean_queue = area / (r.makespan - t0);
  std::vector<double> tput;
  for (int f = 0; f < n; ++f) tput.push_back(32e6 / (e.result(f).finish_s - e.result(f).start_s));
  double sum = std::accumulate(tput.begin(), tput.end(), 0.0), sq = 0;
  for (double x : tput) sq += x * x;
  r.jain = sum * sum / (n * sq);
  return r;
}

TEST(PacketEngineTest, DcqcnKeepsQueuesBoundedWithFairShares) {
  PacketParams p;
  p.buffer_bytes = 16e6;  // deep enough that nothing drops: the queue shows what CC does
  Incast with = RunIncast(4, p);
  p.dcqcn = false;
  p.ecn = false;
  Incast without = RunIncast(4, p);
  // Without congestion control the 4:1 incast piles 3/4 of the data into the queue.
  EXPECT_GT(without.max_queue, 10 * p.kmax_bytes);
  // DCQCN: steady-state queue at the Kmax scale, far below; fair shares; link stays busy.
  EXPECT_GT(with.cnps, 0);
  EXPECT_LT(with.steady_mean_queue, 2 * p.kmax_bytes);
  EXPECT_LT(with.max_queue, without.max_queue / 4);
  EXPECT_GT(with.jain, 0.95);
  EXPECT_EQ(with.drops, 0);
  // The price: after the first cuts, additive increase (0.1% of line rate per
  // 55 us) climbs back slowly; the bottleneck is still busy > 60% of the time.
  const double ideal = 4 * 32e6 / (100e9 / 8);
  EXPECT_LT(with.makespan, ideal / 0.6);
}

TEST(PacketEngineTest, FiniteBuffersDropWithoutPfcAndPauseWithIt) {
  PacketParams p;
  p.dcqcn = false;
  p.ecn = false;
  p.buffer_bytes = 256e3;
  Incast lossy = RunIncast(4, p);
  EXPECT_GT(lossy.drops, 0);
  EXPECT_LE(lossy.max_queue, p.buffer_bytes);
  p.pfc = true;
  p.pfc_xoff_bytes = 200e3;
  p.pfc_xon_bytes = 100e3;
  Incast lossless = RunIncast(4, p);
  EXPECT_EQ(lossless.drops, 0);
  // Above Xoff only the headroom: per upstream port, what is on the wire
  // (1.75 us hop at 12.5 GB/s) plus the packet being sent and one queued.
  EXPECT_LE(lossless.max_queue, p.pfc_xoff_bytes + 4 * (12.5e9 * 1.75e-6 + 2 * p.mtu_bytes));
  // Either way the bottleneck drains at line rate overall.
  const double ideal = 4 * 32e6 / (100e9 / 8);
  EXPECT_LT(lossless.makespan, 1.05 * ideal);
}

}  // namespace
}  // namespace tessera::sim
