#include "tessera/parallel/pipeline/schedule.h"

#include <gtest/gtest.h>

namespace tessera::parallel {
namespace {

struct Case {
  PipelineSchedule schedule;
  int p, m, v;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m = 1; m <= 16; ++m) {
      cases.push_back({PipelineSchedule::kGpipe, p, m, 1});
      cases.push_back({PipelineSchedule::k1F1B, p, m, 1});
      for (int v : {2, 3, 4}) {
        if (m % p == 0) cases.push_back({PipelineSchedule::kInterleaved1F1B, p, m, v});
      }
    }
  }
  return cases;
}

std::string Name(const Case& c) {
  return fmt::format("{} p={} m={} v={}", PipelineScheduleName(c.schedule), c.p, c.m, c.v);
}

TEST(PipelineScheduleTest, SimulatedBubbleMatchesTheFormula) {
  for (const Case& c : AllCases()) {
    auto schedule = BuildPipelineSchedule(c.schedule, c.p, c.m, c.v);
    ASSERT_EQ(schedule.size(), static_cast<size_t>(c.p));
    auto sim = SimulatePipeline(schedule, c.m, c.v, 1.0, 2.0);
    ASSERT_TRUE(sim.ok()) << Name(c) << ": " << sim.status().ToString();
    EXPECT_DOUBLE_EQ(sim->makespan, 3.0 * (c.v * c.m + c.p - 1)) << Name(c);
    EXPECT_NEAR(sim->bubble_fraction, AnalyticBubbleFraction(c.schedule, c.p, c.m, c.v), 1e-12) << Name(c);
    for (int s = 0; s < c.p; ++s) EXPECT_DOUBLE_EQ(sim->busy[s], 3.0 * c.m * c.v) << Name(c);
  }
}

TEST(PipelineScheduleTest, AnalyticBubbleFractions) {
  EXPECT_DOUBLE_EQ(AnalyticBubbleFraction(PipelineSchedule::kGpipe, 4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(AnalyticBubbleFraction(PipelineSchedule::k1F1B, 4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(AnalyticBubbleFraction(PipelineSchedule::kInterleaved1F1B, 4, 8, 2), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(AnalyticBubbleFraction(PipelineSchedule::k1F1B, 1, 5, 1), 0.0);
}

TEST(PipelineScheduleTest, InFlightActivations) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 3, 8, 16}) {
      auto gpipe = BuildPipelineSchedule(PipelineSchedule::kGpipe, p, m, 1);
      auto one = BuildPipelineSchedule(PipelineSchedule::k1F1B, p, m, 1);
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(MaxInFlight(gpipe[s]), m) << "gpipe p=" << p << " m=" << m << " stage " << s;
        EXPECT_EQ(MaxInFlight(one[s]), std::min(p - s, m)) << "1f1b p=" << p << " m=" << m << " stage " << s;
      }
    }
  }
  // Interleaved (Megatron): stage 0 keeps (v-1)*p + 2(p-1) + 1 chunk activations
  // alive when m > p, each chunk holding 1/v of a stage's layers.
  auto inter = BuildPipelineSchedule(PipelineSchedule::kInterleaved1F1B, 4, 8, 2);
  EXPECT_EQ(MaxInFlight(inter[0]), 4 + 6 + 1);
  EXPECT_EQ(MaxInFlight(inter[3]), 4 + 0 + 1);
}

TEST(PipelineScheduleTest, OneFOneBOrderOnTheFirstStage) {
  auto schedule = BuildPipelineSchedule(PipelineSchedule::k1F1B, 3, 4, 1);
  std::string s0;
  for (const PipeAction& a : schedule[0]) s0 += ToString(a) + " ";
  EXPECT_EQ(s0, "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 B2.0 B3.0 ");
  std::string s2;
  for (const PipeAction& a : schedule[2]) s2 += ToString(a) + " ";
  EXPECT_EQ(s2, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 ");
}

TEST(PipelineScheduleTest, InterleavedVisitsChunksInMegatronOrder) {
  auto schedule = BuildPipelineSchedule(PipelineSchedule::kInterleaved1F1B, 2, 4, 2);
  std::string s1;
  for (const PipeAction& a : schedule[1]) s1 += ToString(a) + " ";
  // Stage 1: warm-up (v-1)*p = 2 forwards, then 1F1B, then the drain.
  EXPECT_EQ(s1, "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
}

TEST(PipelineScheduleTest, ClearErrors) {
  auto err = ValidatePipelineSchedule(PipelineSchedule::kInterleaved1F1B, 4, 6, 2);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("multiple of the number of pipeline stages (4)"), std::string::npos) << err.message();
  EXPECT_FALSE(ValidatePipelineSchedule(PipelineSchedule::kInterleaved1F1B, 4, 8, 1).ok());
  EXPECT_FALSE(ValidatePipelineSchedule(PipelineSchedule::k1F1B, 4, 8, 2).ok());
  EXPECT_FALSE(ValidatePipelineSchedule(PipelineSchedule::kGpipe, 0, 8, 1).ok());
  EXPECT_FALSE(ValidatePipelineSchedule(PipelineSchedule::kGpipe, 2, 0, 1).ok());
  EXPECT_TRUE(ValidatePipelineSchedule(PipelineSchedule::kInterleaved1F1B, 4, 8, 2).ok());
  EXPECT_EQ(*ParsePipelineSchedule("interleaved"), PipelineSchedule::kInterleaved1F1B);
  EXPECT_FALSE(ParsePipelineSchedule("zero-bubble").ok());
}

TEST(PipelineScheduleTest, SimulatorRejectsDeadlocksAndIncompleteSchedules) {
  using K = PipeAction::Kind;
  // Stage 1 wants micro-batch 1 first, stage 0 sends micro-batch 0 first but
  // blocks on its backward before forwarding micro-batch 1.
  std::vector<std::vector<PipeAction>> bad = {
      {{K::kForward, 0, 0}, {K::kBackward, 0, 0}, {K::kForward, 1, 0}, {K::kBackward, 1, 0}},
      {{K::kForward, 1, 0}, {K::kBackward, 1, 0}, {K::kForward, 0, 0}, {K::kBackward, 0, 0}}};
  auto sim = SimulatePipeline(bad, 2, 1);
  ASSERT_FALSE(sim.ok());
  EXPECT_NE(sim.status().message().find("deadlock"), std::string::npos);
  std::vector<std::vector<PipeAction>> missing = {{{K::kForward, 0, 0}}};
  EXPECT_FALSE(SimulatePipeline(missing, 1, 1).ok());
}

}  // namespace
}  // namespace tessera::parallel
