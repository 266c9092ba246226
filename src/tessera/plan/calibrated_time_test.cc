// plan evaluate on a calibrated host: the time and the activation memory
// come from sim's twin, training state and FLOPs from the planner;
// unsupported models and plans are errors naming what.
#include "tessera/plan/calibrated_time.h"

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"
#include "tessera/sim/sim_test_util.h"

namespace tessera::plan {
namespace {

sim::MachineCalibration Machine() { return sim::testing::SyntheticMachine(); }

ParallelPlan Fp32Plan(int dp, int pp, int ep) {
  ParallelPlan p = Plan3D(dp, 1, pp, 32, 4);
  p.ep = ep;
  p.zero = dp > 1 ? 1 : 0;
  p.precision = Precision::kFp32;
  p.state_layout = StateLayout::kFp32Adam;
  return p;
}

TEST(CalibratedTimeTest, TheDefaultTrainingModelMapsOntoTheTwin) {
  const ModelSpec m = TestModel("tessera-default.toml");
  auto t = TwinModelFor(m);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->layers, 4);
  EXPECT_EQ(t->d_model, 128);
  EXPECT_EQ(t->d_ff, 384);
  EXPECT_EQ(t->d_ff_expert, 256);
  EXPECT_TRUE(t->rope);
  EXPECT_TRUE(t->gated_ffn);
  EXPECT_EQ(t->moe, (std::vector<bool>{false, true, false, true}));  // as models::GptConfig every = 2
}

TEST(CalibratedTimeTest, StepTimeAndActivationsAreTheTwinsStateThePlanners) {
  const ModelSpec m = TestModel("tessera-default.toml");
  const sim::MachineCalibration c = Machine();
  auto cluster = sim::ParseClusterSpec(sim::MachineClusterToml(c, 2), "this-machine.toml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto twin_model = TwinModelFor(m);
  ASSERT_TRUE(twin_model.ok());
  for (const ParallelPlan& p : {Fp32Plan(1, 1, 1), Fp32Plan(2, 1, 1), Fp32Plan(2, 1, 2), Fp32Plan(1, 2, 1)}) {
    auto r = EvaluateCalibrated(m, *cluster, p, c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto twin = sim::PredictTrainStep(
        c, *cluster, *twin_model,
        sim::TwinRun{.global_batch = 32, .micro_batch = 4, .dp = p.dp, .tp = 1, .pp = p.pp, .ep = p.ep, .zero = p.zero});
    ASSERT_TRUE(twin.ok());
    EXPECT_DOUBLE_EQ(r->step_time, twin->step_s) << p.ToString();
    EXPECT_DOUBLE_EQ(r->sync, twin->sync_s);
    auto roofline = EvaluatePlan(m, *cluster, p);
    ASSERT_TRUE(roofline.ok());
    // Training state from the planner, activations from the twin's count.
    EXPECT_DOUBLE_EQ(r->memory.weights + r->memory.gradients + r->memory.optimizer,
                     roofline->memory.weights + roofline->memory.gradients + roofline->memory.optimizer);
    EXPECT_DOUBLE_EQ(r->memory.activations, twin->activation_bytes);
    EXPECT_DOUBLE_EQ(r->model_flops, roofline->model_flops);
    EXPECT_NEAR(r->tokens_per_s, 32 * 40 / r->step_time, 1e-9 * r->tokens_per_s);
    EXPECT_GT(r->mfu, 0);
    EXPECT_LT(r->mfu, 1);
  }
}

TEST(CalibratedTimeTest, RejectsWhatTheTwinCannotPrice) {
  const sim::MachineCalibration c = Machine();
  auto cluster = sim::ParseClusterSpec(sim::MachineClusterToml(c, 2), "this-machine.toml");
  ASSERT_TRUE(cluster.ok());
  const ModelSpec m = TestModel("tessera-default.toml");
  ParallelPlan p = Fp32Plan(2, 1, 1);
  p.precision = Precision::kBf16;
  auto bf16 = EvaluateCalibrated(m, *cluster, p, c);
  ASSERT_FALSE(bf16.ok());
  EXPECT_NE(bf16.status().message().find("fp32"), std::string::npos);
  p = Fp32Plan(2, 1, 1);
  p.offload_optimizer = true;
  EXPECT_FALSE(EvaluateCalibrated(m, *cluster, p, c).ok());
  // Recompute is the twin's: slower than without, fewer activations.
  p = Fp32Plan(2, 1, 1);
  auto plain = EvaluateCalibrated(m, *cluster, p, c);
  p.recompute = Recompute::kFull;
  auto full = EvaluateCalibrated(m, *cluster, p, c);
  ASSERT_TRUE(plain.ok() && full.ok()) << full.status().ToString();
  EXPECT_GT(full->step_time, plain->step_time);
  EXPECT_LT(full->memory.activations, plain->memory.activations);
  auto mla = TwinModelFor(TestModel("deepseek-v3.toml"));
  ASSERT_FALSE(mla.ok());
  EXPECT_NE(mla.status().message().find("latent"), std::string::npos);
  ModelSpec gqa = m;
  gqa.kv_heads = 2;
  EXPECT_FALSE(TwinModelFor(gqa).ok());
  ModelSpec biased = m;
  biased.linear_bias = true;
  EXPECT_FALSE(TwinModelFor(biased).ok());
}

TEST(CalibratedTimeTest, Fp32IsAPrecision) {
  auto p = ParsePrecision("fp32");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, Precision::kFp32);
  EXPECT_EQ(PrecisionName(Precision::kFp32), "fp32");
  EXPECT_FALSE(ParsePrecision("fp16").ok());
}

}  // namespace
}  // namespace tessera::plan
