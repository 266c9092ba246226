#include "tessera/sim/step_replay.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

std::string PlanText(int pp, int m, const std::string& schedule, int tp = 1, int dp = 1, int vocab = 8) {
  return fmt::format(
      "[model]\nlayers = 16\nhidden = 1024\nseq = 1024\nvocab = {}\n"
      "[parallel]\ndp = {}\ntp = {}\npp = {}\nmicro_batch = 1\nglobal_batch = {}\nschedule = \"{}\"\n",
      vocab, dp, tp, pp, m * dp, schedule);
}

// 8 devices per super-node, 4 super-nodes; communication practically free.
ClusterSpec FreeNetwork() {
  return testing::ParseOrDie(testing::SpecText(8, 4, "kind = \"switch\"\nport_gbyte_s = 1e9",
                                               "kind = \"switch\"\nport_gbyte_s = 1e9"));
}

TEST(StepReplayTest, PipelineBubbleMatchesTheClosedForm) {
  ClusterSpec c = FreeNetwork();
  const int p = 4, m = 8;
  auto one = ReplayStep(c, *ParsePlanSpec(PlanText(p, m, "1f1b"), "plan.toml"));
  auto gpipe = ReplayStep(c, *ParsePlanSpec(PlanText(p, m, "gpipe"), "plan.toml"));
  auto single = ReplayStep(c, *ParsePlanSpec(PlanText(1, m, "1f1b"), "plan.toml"));
  ASSERT_TRUE(one.ok() && gpipe.ok() && single.ok()) << one.status().ToString();
  // Uniform stages: (m + p - 1) slots of one stage's F+B; bubble (p-1)/(m+p-1).
  EXPECT_NEAR(one->bubble_fraction, (p - 1.0) / (m + p - 1), 0.01);
  EXPECT_NEAR(gpipe->step_time_s, one->step_time_s, 0.01 * one->step_time_s);
  const double per_stage = single->compute_s / p;  // F+B of all micro-batches on one stage
  const double optimizer = 2 * 16 * (12.0 * 4 * 1024 * 1024 + 8 * 1024) / 2000e9;  // first stage: 4 layers + embedding
  // Within 1%: the last stage also runs the (tiny, inefficient) LM head.
  EXPECT_NEAR(one->step_time_s, per_stage / m * (m + p - 1) + optimizer, 0.01 * one->step_time_s);
  // One stage holds everything: no bubble, step = compute + optimizer.
  EXPECT_NEAR(single->bubble_fraction, 0, 1e-9);
  EXPECT_GE(single->step_time_s, single->compute_s);
}

TEST(StepReplayTest, TensorAndDataParallelCommunicationCost) {
  ClusterSpec a100 = testing::LoadPreset("a100-dgx");
  auto base = ReplayStep(a100, *ParsePlanSpec(PlanText(2, 8, "1f1b", 1, 1, 51200), "plan.toml"));
  auto tp8 = ReplayStep(a100, *ParsePlanSpec(PlanText(2, 8, "1f1b", 8, 1, 51200), "plan.toml"));
  auto dp64 = ReplayStep(a100, *ParsePlanSpec(PlanText(2, 8, "1f1b", 8, 64, 51200), "plan.toml"));
  ASSERT_TRUE(base.ok() && tp8.ok() && dp64.ok()) << dp64.status().ToString();
  EXPECT_EQ(base->tp_comm_s, 0);
  EXPECT_GT(tp8->tp_comm_s, 0);
  EXPECT_LT(tp8->step_time_s, base->step_time_s);  // 8-way TP splits the compute
  EXPECT_GT(dp64->dp_comm_s, 0);
  EXPECT_GT(dp64->step_time_s, tp8->step_time_s);  // plus the gradient all-reduce
  EXPECT_GT(dp64->mfu, 0.05);
  EXPECT_LT(dp64->mfu, 0.85);
}

TEST(StepReplayTest, ChromeTraceHasEveryTask) {
  ClusterSpec c = FreeNetwork();
  auto r = ReplayStep(c, *ParsePlanSpec(PlanText(2, 4, "1f1b"), "plan.toml"));
  ASSERT_TRUE(r.ok());
  nlohmann::json j = nlohmann::json::parse(ChromeTraceJson(*r));
  int spans = 0;
  for (const auto& e : j["traceEvents"]) spans += e["ph"] == "X";
  // Per stage: 4 F + 4 B + 4 sends + all-reduce + optimizer.
  EXPECT_EQ(spans, 2 * (4 + 4 + 4 + 2));
  EXPECT_EQ(static_cast<size_t>(spans), r->trace.size());
}

TEST(StepReplayTest, FlowReplayMatchesTheClosedFormWithoutContention) {
  // Non-blocking switches, one pipeline per super-node pair: the flow replay
  // of every rank agrees with the one-pipeline closed form.
  ClusterSpec c = testing::ParseOrDie(testing::SpecText(8, 4, "kind = \"switch\"\nport_gbyte_s = 100",
                                                        "kind = \"switch\"\nport_gbyte_s = 25"));
  for (const std::string& text : {PlanText(4, 8, "1f1b", 2, 4, 51200), PlanText(2, 4, "gpipe", 8, 2, 51200)}) {
    PlanSpec plan = *ParsePlanSpec(text, "plan.toml");
    auto closed = ReplayStep(c, plan);
    auto flows = ReplayStepFlows(c, plan);
    ASSERT_TRUE(closed.ok() && flows.ok()) << flows.status().ToString();
    EXPECT_NEAR(flows->step_time_s, closed->step_time_s, 0.03 * closed->step_time_s) << text;
    EXPECT_NEAR(flows->tp_comm_s, closed->tp_comm_s, 0.05 * closed->tp_comm_s + 1e-9) << text;
    EXPECT_NEAR(flows->dp_comm_s, closed->dp_comm_s, 0.05 * closed->dp_comm_s) << text;
    EXPECT_NEAR(flows->bubble_fraction, closed->bubble_fraction, 0.02) << text;
    EXPECT_EQ(flows->trace.size(), closed->trace.size());
  }
}

TEST(StepReplayTest, FlowReplaySimulatesEveryRank) {
  // 2 stages x dp 2 x tp 4 on 8-device super-nodes, 4 micro-batches: per rank
  // and micro-batch 2 compute tasks and 2 tp ring flows, 4 x 8 pipeline sends
  // per direction, dp rings of 2 ranks (2 steps x 2 flows) per (stage, tp
  // index), per rank a gradient-ready marker and the optimizer.
  ClusterSpec c = FreeNetwork();
  PlanSpec plan = *ParsePlanSpec(PlanText(2, 4, "1f1b", 4, 2), "plan.toml");
  auto r = ReplayStepFlows(c, plan);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->flows, 16 * 4 * 4 + 2 * 4 * 8 + 2 * 4 * 4 + 16 * 2);
}

TEST(StepReplayTest, FlowReplayShowsCollisionsBetweenConcurrentGroups) {
  // One UBL128 super-node: tp 8 = one leaf, 8 dp groups of 16 ranks (one per
  // leaf position) all-reduce gradients at once across the 16 leaves. The
  // closed form costs each group alone on a non-blocking fabric; adaptive
  // routing spreads the 8 groups over a leaf's 8 core uplinks and matches
  // it, ECMP hashing puts several groups' flows on one uplink.
  ClusterSpec c = testing::LoadPreset("ascend950-ubl128");
  PlanSpec plan = *ParsePlanSpec(PlanText(1, 2, "1f1b", 8, 16, 51200), "plan.toml");
  auto closed = ReplayStep(c, plan);
  auto adaptive = ReplayStepFlows(c, plan, Routing::kAdaptive);
  auto ecmp = ReplayStepFlows(c, plan, Routing::kEcmp);
  ASSERT_TRUE(closed.ok() && adaptive.ok() && ecmp.ok()) << ecmp.status().ToString();
  EXPECT_NEAR(adaptive->dp_comm_s, closed->dp_comm_s, 0.1 * closed->dp_comm_s);
  EXPECT_GT(ecmp->dp_comm_s, 1.3 * adaptive->dp_comm_s);
}

TEST(StepReplayTest, RejectsPlansThatDoNotFit) {
  ClusterSpec c = FreeNetwork();
  EXPECT_FALSE(ReplayStep(c, *ParsePlanSpec(PlanText(1, 4, "1f1b", 16), "p.toml")).ok());   // tp > super-node
  EXPECT_FALSE(ReplayStep(c, *ParsePlanSpec(PlanText(4, 4, "1f1b", 8, 2), "p.toml")).ok());  // 64 > 32 devices
  auto bad = ParsePlanSpec(PlanText(3, 4, "1f1b"), "p.toml");  // 16 layers into 3 stages
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.toml:"), std::string::npos);
  EXPECT_NE(bad.status().message().find("parallel.pp"), std::string::npos);
  EXPECT_FALSE(ParsePlanSpec(PlanText(2, 4, "zb"), "p.toml").ok());
  EXPECT_FALSE(ReplayStepFlows(c, *ParsePlanSpec(PlanText(4, 4, "1f1b", 8, 2), "p.toml")).ok());
}

}  // namespace
}  // namespace tessera::sim
