// One cost model: the planner's closed form (EvaluatePlan: m slots of the
// slowest rank + the bubble formula + exposed reduction + optimizer) and the
// simulator's replay of the same priced ranks as a scheduled DAG
// (sim::ReplayPipeline, what `tessera sim step` runs) give the same step
// time within 1 % on the published plans. The replay does not know the
// bubble formula: it schedules the tasks, so a wrong formula (or a schedule
// the formula does not describe) shows up here.
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"
#include "tessera/plan/time_model.h"
#include "tessera/plan/sim_step.h"
#include "tessera/sim/pipeline_replay.h"

namespace tessera::plan {
namespace {

double Replayed(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p) {
  auto priced = PricePipeline(m, c, p);
  EXPECT_TRUE(priced.ok()) << priced.status().ToString();
  if (!priced.ok()) return 0;
  auto r = sim::ReplayPipeline(*priced);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->step_time_s : 0;
}

void ExpectAgree(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p, double* worst) {
  auto closed = EvaluatePlan(m, c, p);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  const double replay = Replayed(m, c, p);
  const double diff = replay / closed->step_time - 1;
  *worst = std::max(*worst, std::abs(diff));
  std::printf("%-22s %-72s plan evaluate %8.3f s  sim replay %8.3f s  (%+.3f%%)\n", m.name.c_str(),
              p.ToString().c_str(), closed->step_time, replay, 100 * diff);
  EXPECT_LT(std::abs(diff), 0.01) << p.ToString();
}

TEST(SimAgreementTest, ReplayOfPricedRanksMatchesTheClosedFormOnPublishedPlans) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  double worst = 0;
  for (const NarayananRow& row : NarayananTable()) ExpectAgree(TestModel(row.model_file), a100, NarayananPlan(row), &worst);
  for (const KorthikantiRow& row : KorthikantiTable()) {
    for (bool present : {false, true}) ExpectAgree(TestModel(row.model_file), a100, KorthikantiPlan(row, present), &worst);
  }
  std::printf("largest difference %.3f%%\n", 100 * worst);
}

// Off the published plans: few micro-batches (the bubble dominates), GPipe-
// free 1F1B with an overlapped reduction, ZeRO, an MoE model with expert
// parallelism. Where ranks differ (embedding, head) the closed form charges
// every slot at the slowest rank, the replay only where it waits for it.
TEST(SimAgreementTest, AgreesOffThePublishedPlans) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  double worst = 0;
  const ModelSpec m145 = TestModel("megatron-145.6b.toml");
  ParallelPlan p = Plan3D(4, 8, 8, 64, 2);  // m = 8
  p.recompute = Recompute::kSelective;
  ExpectAgree(m145, a100, p, &worst);
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  ExpectAgree(m145, a100, p, &worst);
  const ModelSpec m18 = TestModel("megatron-18.4b.toml");
  ParallelPlan z = Plan3D(32, 8, 1, 256, 2);
  z.zero = 1;
  ExpectAgree(m18, a100, z, &worst);
  std::printf("largest difference %.3f%%\n", 100 * worst);
}

TEST(SimAgreementTest, ReplayRefusesZeroBubble) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  ParallelPlan p = Plan3D(4, 8, 8, 128);
  p.schedule = Schedule::kZeroBubble;
  EXPECT_FALSE(PricePipeline(TestModel("megatron-145.6b.toml"), a100, p).ok());
}

// `tessera sim step`'s path: a simulator plan file describing a Table 1
// row, read as a planner model + plan, gives the step `tessera plan
// evaluate` gives for the row's model TOML.
TEST(SimAgreementTest, SimPlanFileAgreesWithThePlannerOnTheModelToml) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  for (size_t i : {4u, 6u}) {  // 39.1 B (1F1B, mb 4), 145.6 B (interleaved, vpp 2)
    const NarayananRow& row = NarayananTable()[i];
    const ModelSpec m = TestModel(row.model_file);
    const ParallelPlan p = NarayananPlan(row);
    const std::string text = fmt::format(
        "[model]\nlayers = {}\nhidden = {}\nheads = {}\nseq = 2048\nvocab = 51200\n[parallel]\ndp = {}\ntp = {}\n"
        "pp = {}\nvpp = {}\nmicro_batch = {}\nglobal_batch = {}\nrecompute = \"full\"\noverlap_grad_reduce = {}\n",
        m.layers, m.hidden, m.heads, p.dp, p.tp, p.pp, p.vpp, p.micro_batch, p.global_batch,
        p.overlap_grad_reduce ? "true" : "false");
    auto spec = sim::ParsePlanSpec(text, "row.toml");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto step = ReplayPlannedStep(a100, *spec);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    auto closed = EvaluatePlan(m, a100, p);
    ASSERT_TRUE(closed.ok());
    std::printf("%s: sim step %.4f s, plan evaluate %.4f s\n", row.model_file, step->replay.step_time_s,
                closed->step_time);
    EXPECT_NEAR(step->replay.step_time_s, closed->step_time, 0.01 * closed->step_time);
    EXPECT_NEAR(step->closed.step_time, closed->step_time, 1e-9 * closed->step_time);  // same model read from either file
  }
  // The planner does not take the flow replay's roofline curve.
  auto custom = sim::ParsePlanSpec(
      "[model]\nlayers = 4\nhidden = 1024\nseq = 256\nvocab = 1000\n[parallel]\nglobal_batch = 8\n[efficiency]\nmax = 0.5\n",
      "e.toml");
  ASSERT_TRUE(custom.ok());
  EXPECT_FALSE(ReplayPlannedStep(a100, *custom).ok());
}

// DVFS reaches the planner: a Table 1 plan on A100s whose thermal limit is
// lowered to 60 C throttles, its step grows with the compute share, and the
// energy per step is the mean power times the throttled step.
TEST(SimAgreementTest, PlannerStepUnderAThermalLimit) {
  sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  const NarayananRow& row = NarayananTable()[6];
  const ModelSpec m = TestModel(row.model_file);
  const ParallelPlan p = NarayananPlan(row);
  auto r = EvaluatePlan(m, a100, p);
  ASSERT_TRUE(r.ok());
  auto cool = StepEnergy(a100, p, *r);
  ASSERT_TRUE(cool.ok()) << cool.status().ToString();
  EXPECT_DOUBLE_EQ(cool->step_s, r->step_time);
  a100.device.thermal_limit_c = 60;
  auto hot = StepEnergy(a100, p, *r);
  ASSERT_TRUE(hot.ok());
  std::printf("%s: %.2f s nominal; limit 85 C: clock %.3f, %.0f W, %.0f J/device; limit 60 C: clock %.3f, step %.2f s, "
              "%.0f W, %.0f J/device, %.2f MJ total\n",
              row.model_file, r->step_time, cool->mean_clock, cool->power_w, cool->energy_per_device_j,
              hot->mean_clock, hot->step_s, hot->power_w, hot->energy_per_device_j, hot->energy_total_j / 1e6);
  EXPECT_LT(hot->mean_clock, 0.95);
  EXPECT_NEAR(hot->step_s, r->step_time - r->compute + r->compute / hot->mean_clock, 1e-9 * r->step_time);
  EXPECT_GT(hot->step_s, 1.04 * r->step_time);
  EXPECT_NEAR(hot->energy_per_device_j, hot->power_w * hot->step_s, 1e-6 * hot->energy_per_device_j);
  EXPECT_NEAR(hot->energy_total_j, hot->energy_per_device_j * static_cast<double>(p.Devices()), 1e-6 * hot->energy_total_j);
}

}  // namespace
}  // namespace tessera::plan
