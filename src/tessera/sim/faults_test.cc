#include "tessera/sim/faults.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

FaultParams Llama3Like() {
  FaultParams p;
  p.cards = 16384;         // Llama 3 405B: 16,384 H100
  p.card_mtbf_h = 80000;   // => one interruption every ~4.9 h
  p.spares = 1 << 20;      // enough spares: 30 s takeover
  p.checkpoint_s = 60;
  p.restart_s = 120;
  p.work_s = 54 * 86400.0;
  return p;
}

TEST(FaultsTest, YoungDalyIntervalAndClosedForm) {
  FaultParams p = Llama3Like();
  EXPECT_NEAR(JobMtbfSeconds(p), 80000.0 * 3600 / 16384, 1e-6);
  EXPECT_NEAR(YoungDalyInterval(p), std::sqrt(2 * 60 * JobMtbfSeconds(p)), 1e-9);
  // No failures to speak of: goodput = tau / (tau + delta).
  FaultParams reliable = p;
  reliable.card_mtbf_h = 1e12;
  reliable.interval_s = 3600;
  FaultResult r = SimulateFaults(reliable);
  EXPECT_EQ(r.card_failures, 0);
  EXPECT_NEAR(r.goodput, 3600.0 / 3660, 1e-4);
}

TEST(FaultsTest, MonteCarloMatchesTheFirstOrderModel) {
  FaultParams p = Llama3Like();
  FaultResult r = SimulateFaults(p);
  // ~54 days / 4.9 h: a few hundred interruptions (Llama 3 reports 419 unexpected).
  EXPECT_GT(r.card_failures, 200);
  EXPECT_LT(r.card_failures, 400);
  EXPECT_NEAR(r.goodput, ExpectedGoodput(p), 0.01);
  EXPECT_GT(r.goodput, 0.9);  // Llama 3: > 90% effective training time
  EXPECT_NEAR(r.wall_s, p.work_s + r.lost_work_s + r.checkpoint_overhead_s + r.recovery_s, 1e-3);
  EXPECT_EQ(r.spares_used, r.card_failures);
}

TEST(FaultsTest, YoungDalyIsNearOptimalAndSparesMatter) {
  FaultParams p = Llama3Like();
  const double tau = YoungDalyInterval(p);
  double best = 0;
  for (double scale : {0.25, 0.5, 1.0, 2.0, 4.0}) {
    FaultParams q = p;
    q.interval_s = tau * scale;
    double g = ExpectedGoodput(q);
    if (scale == 1.0) {
      EXPECT_GE(g, best - 1e-12);
    }
    best = std::max(best, g);
  }
  EXPECT_NEAR(ExpectedGoodput(p), best, 1e-12);
  // Without spares every failure waits for a repair: goodput collapses.
  FaultParams none = p;
  none.spares = 0;
  FaultResult r = SimulateFaults(none);
  EXPECT_EQ(r.spares_used, 0);
  EXPECT_LT(r.goodput, 0.6);
  EXPECT_NEAR(r.goodput, ExpectedGoodput(none), 0.03);
  // Link failures are counted, not fatal.
  FaultParams links = p;
  links.links = 100000;
  links.link_mtbf_h = 1e6;
  FaultResult lr = SimulateFaults(links);
  EXPECT_GT(lr.link_failures, 0);
  EXPECT_NEAR(lr.goodput, ExpectedGoodput(links), 0.01);
}

}  // namespace
}  // namespace tessera::sim
