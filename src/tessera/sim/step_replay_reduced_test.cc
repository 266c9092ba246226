// The reduced flow replay (representative dp replicas, merged ring steps)
// against the full one (every rank, every collective step).
#include <gtest/gtest.h>

#include "tessera/sim/sim_test_util.h"
#include "tessera/sim/step_replay.h"

namespace tessera::sim {
namespace {

PlanSpec Plan(int dp, int tp, int pp, int m, const std::string& schedule = "1f1b") {
  auto p = ParsePlanSpec(fmt::format("[model]\nlayers = 16\nhidden = 1024\nseq = 1024\nvocab = 32000\n"
                                     "[parallel]\ndp = {}\ntp = {}\npp = {}\nmicro_batch = 1\nglobal_batch = {}\n"
                                     "schedule = \"{}\"\n",
                                     dp, tp, pp, dp * m, schedule),
                         "plan.toml");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

// 8 super-nodes of 8 devices (non-blocking switch inside); between them a
// leaf-spine with one leaf per super-node and `spines` uplinks of the port's
// bandwidth: spines = 2 is 4:1 oversubscribed, so the dp all-reduces of all
// (stage, tp index) groups that cross super-nodes contend on the uplinks.
ClusterSpec Cluster(int spines) {
  return testing::ParseOrDie(testing::SpecText(
      8, 8, "kind = \"switch\"\nport_gbyte_s = 100",
      fmt::format("kind = \"leaf_spine\"\nport_gbyte_s = 2\nendpoints_per_leaf = 8\nspines = {}\nuplink_gbyte_s = 2",
                  spines)));
}

struct Pair {
  StepResult full, reduced;
};

Pair Both(const ClusterSpec& c, const PlanSpec& p, Routing routing = Routing::kAdaptive) {
  FlowReplayOptions o;
  o.routing = routing;
  auto reduced = ReplayStepFlows(c, p, o);
  o.full = true;
  auto full = ReplayStepFlows(c, p, o);
  EXPECT_TRUE(full.ok() && reduced.ok()) << full.status().ToString() << reduced.status().ToString();
  return {full.ok() ? *full : StepResult{}, reduced.ok() ? *reduced : StepResult{}};
}

TEST(ReducedFlowReplayTest, MatchesTheFullReplayWithin2PercentOnSeveralPlans) {
  // dp groups that cross 2, 4 and 8 super-nodes; tp inside super-nodes; 1F1B
  // and GPipe; hierarchical and flat (tp 8: one rank per super-node) all-reduces.
  const ClusterSpec c = Cluster(2);
  struct Case {
    int dp, tp, pp, m;
    const char* schedule;
  };
  for (const Case& k : {Case{8, 2, 2, 4, "1f1b"}, Case{4, 4, 4, 8, "1f1b"}, Case{32, 1, 2, 2, "gpipe"},
                        Case{4, 8, 2, 4, "1f1b"}, Case{16, 2, 2, 2, "1f1b"}}) {
    const PlanSpec p = Plan(k.dp, k.tp, k.pp, k.m, k.schedule);
    const Pair r = Both(c, p);
    SCOPED_TRACE(fmt::format("dp {} tp {} pp {} m {} {}", k.dp, k.tp, k.pp, k.m, k.schedule));
    EXPECT_NEAR(r.reduced.step_time_s, r.full.step_time_s, 0.02 * r.full.step_time_s);
    EXPECT_NEAR(r.reduced.dp_comm_s, r.full.dp_comm_s, 0.05 * r.full.dp_comm_s);
    EXPECT_NEAR(r.reduced.bubble_fraction, r.full.bubble_fraction, 0.01);
    // It is a reduction: fewer ranks' pipelines and fewer flows.
    EXPECT_EQ(r.full.simulated_ranks, p.Devices());
    EXPECT_LT(r.reduced.simulated_ranks, r.full.simulated_ranks);
    EXPECT_LT(r.reduced.flows, r.full.flows);
  }
}

TEST(ReducedFlowReplayTest, KeepsTheContentionBetweenDataParallelGroups) {
  // The case where contention matters: 4 (stage, tp index) groups of dp 16
  // all-reduce gradients at once across 4 super-nodes each (8 flows leave
  // every super-node in each ring step) over 4:1 oversubscribed
  // uplinks. Without the other groups' flows (a reduction that simulated only
  // the representative replicas' or one group's collective) the uplinks
  // would carry 1/4 of the load: the all-reduce would cost what it costs on
  // the non-blocking network (8 spines), which is checked here to be far
  // (> 30 % on dp, > 5 % on the step) from the contended full replay — such
  // a reduction fails the 2 % bound.
  const PlanSpec p = Plan(16, 2, 2, 2);
  const Pair blocking = Both(Cluster(2), p);
  const Pair free = Both(Cluster(8), p);
  EXPECT_GT(blocking.full.dp_comm_s, 1.3 * free.full.dp_comm_s);
  EXPECT_GT(blocking.full.step_time_s, 1.05 * free.full.step_time_s);
  EXPECT_NEAR(blocking.reduced.step_time_s, blocking.full.step_time_s, 0.02 * blocking.full.step_time_s);
  EXPECT_NEAR(free.reduced.step_time_s, free.full.step_time_s, 0.02 * free.full.step_time_s);
  EXPECT_EQ(blocking.reduced.simulated_ranks * 4, blocking.full.simulated_ranks);  // 4 of 16 replicas
}

TEST(ReducedFlowReplayTest, EcmpCollisionsInsideASuperNodeAreKept) {
  // One UBL128 super-node, tp 8 = one leaf, 8 dp groups of 16 ranks hashed
  // onto the core uplinks with ECMP (step_replay_test.cc): the collisions
  // happen inside the simulated super-node and the reduced replay sees them.
  const ClusterSpec c = testing::LoadPreset("ascend950-ubl128");
  const PlanSpec p = Plan(16, 8, 1, 2);
  const Pair ecmp = Both(c, p, Routing::kEcmp);
  const Pair adaptive = Both(c, p, Routing::kAdaptive);
  EXPECT_GT(ecmp.full.dp_comm_s, 1.3 * adaptive.full.dp_comm_s);
  EXPECT_NEAR(ecmp.reduced.step_time_s, ecmp.full.step_time_s, 0.02 * ecmp.full.step_time_s);
  EXPECT_GT(ecmp.reduced.dp_comm_s, 1.3 * adaptive.reduced.dp_comm_s);
}

TEST(ReducedFlowReplayTest, ReplicasOptionAndErrors) {
  const ClusterSpec c = Cluster(2);
  const PlanSpec p = Plan(16, 2, 2, 2);  // 4 replicas per super-node
  FlowReplayOptions o;
  o.replicas = 5;  // rounded up to whole super-nodes: 8
  auto r = ReplayStepFlows(c, p, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->simulated_ranks, 2 * 8 * 2);
  o.replicas = 1000;  // capped at dp: every pipeline
  auto all = ReplayStepFlows(c, p, o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->simulated_ranks, p.Devices());
  o.replicas = -1;
  EXPECT_FALSE(ReplayStepFlows(c, p, o).ok());
}

}  // namespace
}  // namespace tessera::sim
