#include "tessera/plan/time_model.h"

#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"

namespace tessera::plan {
namespace {

// The bubble of a pipeline whose ranks all do the same work is (p-1) slots of
// (m + p - 1) for 1F1B and shrinks by vpp when interleaved.
TEST(TimeModelTest, PipelineBubbles) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  const ModelSpec m = TestModel("megatron-145.6b.toml");
  ParallelPlan p = Plan3D(4, 8, 8, 128);  // m = 32
  p.recompute = Recompute::kSelective;
  auto one = EvaluatePlan(m, a100, p);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  // Ranks differ slightly (the last one also runs the logits): fill and drain
  // cost one slot of each rank, a little less than 7 slots of the slowest.
  const double pipe = one->step_time - one->dp_comm - one->optimizer;
  EXPECT_LT(one->bubble / pipe, 7.0 / 39.0);
  EXPECT_GT(one->bubble / pipe, 0.95 * 7.0 / 39.0);
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  auto two = EvaluatePlan(m, a100, p);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_NEAR(two->bubble / one->bubble, 0.5, 0.02);
  EXPECT_GT(two->memory.activations, one->memory.activations);
  p.vpp = 1;
  p.schedule = Schedule::kZeroBubble;
  auto zb = EvaluatePlan(m, a100, p);
  ASSERT_TRUE(zb.ok());
  EXPECT_LT(zb->bubble, 0.5 * one->bubble);
  EXPECT_LT(zb->step_time, one->step_time);
}

// Recompute trades time for memory; FLOP accounting follows the recompute.
TEST(TimeModelTest, RecomputeTradesTimeForMemory) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  const ModelSpec m = TestModel("megatron-18.4b.toml");
  ParallelPlan p = Plan3D(4, 8, 1, 32);
  p.flash_attention = false;  // with flash attention, selective recompute saves no memory
  StepBreakdown r[3];
  const Recompute kinds[3] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  for (int i = 0; i < 3; ++i) {
    p.recompute = kinds[i];
    auto e = EvaluatePlan(m, a100, p);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    r[i] = *e;
    EXPECT_NEAR(r[i].model_flops, r[0].model_flops, 1e-6 * r[0].model_flops);
  }
  EXPECT_LT(r[0].step_time, r[1].step_time);
  EXPECT_LT(r[1].step_time, r[2].step_time);
  EXPECT_GT(r[0].memory.activations, r[1].memory.activations);
  EXPECT_GT(r[1].memory.activations, r[2].memory.activations);
  // Full recompute performs 4 of the 3 forward passes' worth of layer FLOPs.
  EXPECT_NEAR(r[2].hardware_flops / r[2].model_flops, 1.3, 0.03);
  EXPECT_NEAR(r[0].mfu, r[0].hfu, 1e-12);
}

TEST(TimeModelTest, RejectsPlansTheClusterCannotHold) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");  // 3,072 GPUs
  const ModelSpec m = TestModel("megatron-1.7b.toml");
  ParallelPlan p = Plan3D(4096, 1, 1, 4096);
  auto r = EvaluatePlan(m, a100, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs 4096 devices"), std::string::npos) << r.status().ToString();
  p.dp = 3;
  p.global_batch = 4;
  EXPECT_NE(EvaluatePlan(m, a100, p).status().message().find("not a multiple of dp*micro_batch"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::plan
