#include "tessera/sim/pipeline_replay.h"

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

PipelineCost Uniform(int p, int m, double f, double b, PipelineSchedule s = PipelineSchedule::kOneFOneB, int v = 1) {
  PipelineCost c;
  c.micro_batches = m;
  c.vpp = v;
  c.schedule = s;
  for (int i = 0; i < p; ++i) c.stages.push_back(StageCost{f, b, f + b, 0.5, false, 0.25});
  return c;
}

// Equal stages: 1F1B takes (m + p - 1)(F + B), then the reduction and the
// optimizer; GPipe the same time; interleaving over v chunks cuts the fill
// and drain to (p - 1)(F + B) / v.
TEST(PipelineReplayTest, SchedulesMatchTheTextbookBubbles) {
  const int p = 4, m = 8;
  auto one = ReplayPipeline(Uniform(p, m, 1.0, 2.0));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_NEAR(one->step_time_s, (m + p - 1) * 3.0 + 0.5 + 0.25, 1e-9);
  EXPECT_NEAR(one->bubble_fraction, (p - 1.0) / (m + p - 1), 1e-9);
  auto gpipe = ReplayPipeline(Uniform(p, m, 1.0, 2.0, PipelineSchedule::kGPipe));
  ASSERT_TRUE(gpipe.ok());
  EXPECT_NEAR(gpipe->step_time_s, one->step_time_s, 1e-9);
  for (int v : {2, 4}) {
    auto inter = ReplayPipeline(Uniform(p, m, 1.0, 2.0, PipelineSchedule::kInterleaved, v));
    ASSERT_TRUE(inter.ok()) << inter.status().ToString();
    EXPECT_NEAR(inter->step_time_s, m * 3.0 + (p - 1) * 3.0 / v + 0.75, 1e-9) << v;
    EXPECT_EQ(inter->trace.size(), static_cast<size_t>(p * (2 * m * v + 2)));
  }
  EXPECT_FALSE(ReplayPipeline(Uniform(p, 6, 1.0, 2.0, PipelineSchedule::kInterleaved, 2)).ok());  // 6 % 4
  EXPECT_FALSE(ReplayPipeline(PipelineCost{}).ok());
}

// An overlapped gradient reduction starts with the last backward: hidden
// when shorter than it, else only the excess is exposed.
TEST(PipelineReplayTest, OverlappedReductionHidesUnderTheLastBackward) {
  PipelineCost c = Uniform(1, 4, 1.0, 2.0);
  c.stages[0].dp_overlaps_last_backward = true;
  c.stages[0].dp_s = 1.5;
  EXPECT_NEAR(ReplayPipeline(c)->step_time_s, 4 * 3.0 + 0.25, 1e-9);
  c.stages[0].dp_s = 3.5;
  EXPECT_NEAR(ReplayPipeline(c)->step_time_s, 4 * 3.0 + 1.5 + 0.25, 1e-9);
  c.stages[0].dp_overlaps_last_backward = false;
  EXPECT_NEAR(ReplayPipeline(c)->step_time_s, 4 * 3.0 + 3.5 + 0.25, 1e-9);
}

// A slower last stage: fill and drain pass each stage once, the steady
// state runs at the slowest.
TEST(PipelineReplayTest, UnequalStagesPayTheSlowestInTheSteadyState) {
  PipelineCost c = Uniform(3, 6, 1.0, 2.0);
  c.stages[2].fwd_s = 2.0;
  c.stages[2].bwd_s = 4.0;
  auto r = ReplayPipeline(c);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_time_s, (6 - 1) * 6.0 + (3.0 + 3.0 + 6.0) + 0.75, 1e-9);
}

// Ranks sharing cores: 4 stages x 2 replicas = 8 ranks on 2 cores. A
// single stage with all 8 ranks busy runs at 2/8 speed; a pipeline's fill
// and drain run fewer ranks at once, so it loses less than 4x; with as many
// cores as ranks nothing changes.
TEST(PipelineReplayTest, RanksSharingCoresSlowDownByTheRunnableCount) {
  PipelineCost one = Uniform(1, 4, 1.0, 2.0);
  one.ranks_per_stage = 8;
  one.cores = 2;
  EXPECT_NEAR(ReplayPipeline(one)->step_time_s, 4 * (4 * 3.0 + 0.5 + 0.25), 1e-9);
  PipelineCost pipe = Uniform(4, 8, 1.0, 2.0);
  const double alone = ReplayPipeline(pipe)->step_time_s;
  pipe.ranks_per_stage = 2;
  pipe.cores = 8;
  EXPECT_NEAR(ReplayPipeline(pipe)->step_time_s, alone, 1e-9);
  pipe.cores = 2;
  const double shared = ReplayPipeline(pipe)->step_time_s;
  // The compute work, 4 stages x 2 ranks x (8 x 3 + 0.25 optimizer), over 2
  // cores bounds it below (gradient reductions wait; they take no core).
  EXPECT_GE(shared, 4 * 2 * (8 * 3.0 + 0.25) / 2 - 1e-9);
  EXPECT_LT(shared, 4 * alone);
}

}  // namespace
}  // namespace tessera::sim
