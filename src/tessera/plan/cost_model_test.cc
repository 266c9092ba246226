#include "tessera/plan/cost_model.h"

#include <gtest/gtest.h>

namespace tessera::plan {
namespace {

sim::ClusterSpec Cards(double mtbf_hours, double host_link) {
  sim::ClusterSpec c;
  c.name = "test";
  c.device.mtbf_hours = mtbf_hours;
  c.device.ddr_link_bw = host_link;
  return c;
}

// 1,000 cards of 80,000 h MTBF fail every 80 h = 288,000 s; a 30 s checkpoint
// gives Young's interval tau = sqrt(2 * 30 * 288000) = 4,156.9 s; a failure
// costs half a segment and R = 600 s of recovery: goodput =
// (1 - (tau + 30)/(2 * 288000)) / ((1 + 30/tau)(1 + 600/288000)) = 0.983569.
// 1e12 tokens at 1e6 tokens/s take 1e6 s without failures and 1,016,705.6 s
// with them (worked out by hand).
TEST(CostModelTest, YoungDalyByHand) {
  StepBreakdown step;
  step.tokens_per_s = 1e6;
  ReliabilityOptions o;
  o.checkpoint_write_s = 30;
  o.restart_s = 570;
  o.spare_takeover_s = 30;
  auto r = EstimateRunCost(step, 1000, 1e12, Cards(80000, 0), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->failure_free_s, 1e6, 1e-6);
  EXPECT_NEAR(r->ideal_card_hours, 1000 * 1e6 / 3600, 1e-6);
  EXPECT_NEAR(r->job_mtbf_s, 288000, 1e-6);
  EXPECT_NEAR(r->checkpoint_interval_s, 4156.92, 0.01);
  EXPECT_NEAR(r->goodput, 0.983569, 1e-6);
  EXPECT_NEAR(r->wall_s, 1016705.6, 0.5);
  EXPECT_NEAR(r->expected_failures, 3.5302, 1e-4);
  EXPECT_NEAR(r->card_hours, 282418.2, 0.1);
  // The Monte Carlo of the same job (about 3.5 failures) lands near the closed form.
  EXPECT_NEAR(r->simulated_goodput, r->goodput, 0.01);
}

// Without an explicit write time the checkpoint is the device's model states
// copied over its host link.
TEST(CostModelTest, CheckpointTimeFromHostLink) {
  StepBreakdown step;
  step.tokens_per_s = 1e5;
  step.memory.weights = 2e9;
  step.memory.gradients = 2e9;
  step.memory.optimizer = 12e9;
  auto r = EstimateRunCost(step, 64, 1e10, Cards(50000, 32e9));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->checkpoint_write_s, 16e9 / 32e9, 1e-12);
  EXPECT_GT(r->goodput, 0.99);
  EXPECT_LT(r->goodput, 1.0);
}

TEST(CostModelTest, RefusesAJobThatCannotProgress) {
  StepBreakdown step;
  step.tokens_per_s = 1e6;
  ReliabilityOptions o;
  o.checkpoint_write_s = 60;
  // 100,000 cards of 1,000 h MTBF: a failure every 36 s, a 60 s checkpoint.
  auto r = EstimateRunCost(step, 100000, 1e12, Cards(1000, 0), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("cannot make progress"), std::string::npos);
  EXPECT_FALSE(EstimateRunCost(step, 10, 0, Cards(1000, 0), o).ok());
}

}  // namespace
}  // namespace tessera::plan
