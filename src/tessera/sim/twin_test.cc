// The twin's layouts beyond plain data/pipeline parallelism: recompute,
// sequence parallelism, ranks outnumbering cores, and the memory it
// predicts per ZeRO stage.
#include "tessera/sim/twin.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/base/check.h"
#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

TwinModel Model() { return testing::SmallDenseModel(64); }

ClusterSpec Spec(const MachineCalibration& c, int ranks) {
  auto spec = ParseClusterSpec(MachineClusterToml(c, ranks), "x");
  TESSERA_CHECK_OK(spec.status());
  return *spec;
}

// Full recompute runs every block's forward again (about +1/3 of the
// block work) and keeps only block inputs; selective re-runs the attention
// part only, in between.
TEST(TwinLayouts, RecomputeTradesTimeForActivations) {
  const MachineCalibration c = testing::SyntheticMachine();
  const ClusterSpec spec = Spec(c, 2);
  TwinRun r{.global_batch = 16, .micro_batch = 4, .pp = 2};
  auto none = PredictTrainStep(c, spec, Model(), r);
  r.recompute = Recompute::kSelective;
  auto selective = PredictTrainStep(c, spec, Model(), r);
  r.recompute = Recompute::kFull;
  auto full = PredictTrainStep(c, spec, Model(), r);
  ASSERT_TRUE(none.ok() && selective.ok() && full.ok());
  EXPECT_LT(none->step_s, selective->step_s);
  EXPECT_LT(selective->step_s, full->step_s);
  EXPECT_GT(full->gemm_s, 1.25 * none->gemm_s);
  EXPECT_LT(full->gemm_s, 1.4 * none->gemm_s);
  EXPECT_GT(none->activation_bytes, selective->activation_bytes);
  EXPECT_GT(selective->activation_bytes, full->activation_bytes);
  EXPECT_GT(full->buffer_bytes, none->buffer_bytes);  // one block's activations while it re-runs
}

// Sequence parallelism shards the norms and residual adds over tp.
TEST(TwinLayouts, SequenceParallelShardsTheNormRegions) {
  const MachineCalibration c = testing::SyntheticMachine();
  const ClusterSpec spec = Spec(c, 2);
  TwinRun r{.global_batch = 8, .micro_batch = 4, .tp = 2};
  auto plain = PredictTrainStep(c, spec, Model(), r);
  r.sequence_parallel = true;
  auto sp = PredictTrainStep(c, spec, Model(), r);
  ASSERT_TRUE(plain.ok() && sp.ok());
  EXPECT_LT(sp->elementwise_s, plain->elementwise_s);
  EXPECT_EQ(sp->gemm_s, plain->gemm_s);
  EXPECT_LT(sp->activation_bytes, plain->activation_bytes);
}

// Ranks that outnumber the cores share them: 8 data-parallel ranks on 2
// cores take about 4x one rank's compute (times the context factor's
// growth), 2 ranks about 1x.
TEST(TwinLayouts, RanksSharingCoresSlowDown) {
  const MachineCalibration c = testing::SyntheticMachine();
  TwinRun two{.global_batch = 16, .micro_batch = 2, .dp = 2};
  TwinRun eight{.global_batch = 64, .micro_batch = 2, .dp = 8};
  auto p2 = PredictTrainStep(c, Spec(c, 2), Model(), two);
  auto p8 = PredictTrainStep(c, Spec(c, 8), Model(), eight);
  ASSERT_TRUE(p2.ok() && p8.ok());
  EXPECT_EQ(p2->micro_batches, p8->micro_batches);
  const double compute2 = p2->step_s - p2->dp_comm_s - p2->optimizer_s;
  const double compute8 = p8->step_s - p8->dp_comm_s - p8->optimizer_s;
  // ... times what sharing costs beyond the share (the context factor at 8 ranks vs 2).
  EXPECT_NEAR(compute8 / compute2, 4.0 * c.ContextFactor(8) / c.ContextFactor(2), 0.6);
  EXPECT_GT(p8->sharing_s, 0);
  EXPECT_EQ(p2->sharing_s, 0);
}

// ZeRO stages shard what the runtime shards: moments at 1, gradients at 2,
// parameters at 3 (which adds gathered blocks).
TEST(TwinLayouts, MemoryByZeroStage) {
  const MachineCalibration c = testing::SyntheticMachine();
  const ClusterSpec spec = Spec(c, 4);
  std::vector<TwinPrediction> p;
  for (int z = 0; z <= 3; ++z) {
    auto r = PredictTrainStep(c, spec, Model(), TwinRun{.global_batch = 16, .micro_batch = 2, .dp = 4, .zero = z});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    p.push_back(*r);
  }
  EXPECT_NEAR(p[1].optimizer_state_bytes, p[0].optimizer_state_bytes / 4, 1e-6 * p[0].optimizer_state_bytes);
  EXPECT_EQ(p[1].gradient_bytes, p[0].gradient_bytes);
  EXPECT_NEAR(p[2].gradient_bytes, p[0].gradient_bytes / 4, 1e-6 * p[0].gradient_bytes);
  EXPECT_NEAR(p[3].parameter_bytes, p[0].parameter_bytes / 4, 1e-6 * p[0].parameter_bytes);
  EXPECT_GT(p[3].buffer_bytes, p[2].buffer_bytes);
  for (int z = 1; z <= 3; ++z) EXPECT_LT(p[z].peak_memory_bytes, p[z - 1].peak_memory_bytes) << z;
  for (const TwinPrediction& x : p) {
    EXPECT_NEAR(x.peak_memory_bytes,
                x.activation_bytes + x.parameter_bytes + x.gradient_bytes + x.optimizer_state_bytes + x.buffer_bytes,
                1e-6 * x.peak_memory_bytes);
  }
  // The JSON is nlohmann's (parsable), with the memory fields.
  const nlohmann::json j = nlohmann::json::parse(TwinPredictionJson(p[3]));
  EXPECT_EQ(j.at("peak_memory_bytes").get<double>(), p[3].peak_memory_bytes);
  EXPECT_EQ(j.at("ranks").get<int>(), 4);
}

}  // namespace

// Expert parallelism with measured routing: the busiest rank's experts
// receive `load` x the balanced rows. Memory grows by exactly the tensors
// that scale with the received rows (the dispatched rows, each expert's
// gate and up projections, activation and down projection, the
// concatenation: 3 d + 3 f floats a row), time by the expert work.
TEST(TwinLayouts, ExpertLoadScalesTheReceivedRows) {
  const MachineCalibration c = testing::SyntheticMachine();
  const ClusterSpec spec = Spec(c, 2);
  TwinModel m = Model();
  m.experts = 4;
  m.top_k = 2;
  m.d_ff_expert = 256;
  m.moe = {false, true, false, true};
  TwinRun r{.global_batch = 16, .micro_batch = 4, .dp = 2, .ep = 2, .zero = 1};
  auto balanced = PredictTrainStep(c, spec, m, r);
  m.expert_load = {1, 1.5, 1, 1.5};
  m.expert_peak_load = {1, 2, 1, 2};
  auto loaded = PredictTrainStep(c, spec, m, r);
  ASSERT_TRUE(balanced.ok() && loaded.ok());
  const double assigned = 4 * 64 * 2, d = 128, f = 256;
  // Memory follows the peak load (+1x the balanced rows in each MoE layer;
  // the allocator's size classes add up to 25 % to each tensor).
  const double grown = loaded->activation_bytes - balanced->activation_bytes;
  EXPECT_GE(grown, 2 * 4 * assigned * (3 * d + 3 * f));
  EXPECT_LE(grown, 1.25 * 2 * 4 * assigned * (3 * d + 3 * f));
  EXPECT_DOUBLE_EQ(loaded->expert_load, 1.5);
  EXPECT_DOUBLE_EQ(loaded->expert_peak_load, 2);
  // Time follows the mean load: more GEMM work, a longer step.
  EXPECT_GT(loaded->gemm_s, 1.1 * balanced->gemm_s);
  EXPECT_GT(loaded->step_s, balanced->step_s);
  EXPECT_GT(loaded->ep_comm_s, balanced->ep_comm_s);
  // Eight ranks on two cores: the ranks left working (one in ep) fill the
  // cores while the others wait, so the uneven routing costs no time; the
  // memory still follows it.
  const ClusterSpec spec8 = Spec(c, 8);
  TwinRun r8{.global_batch = 32, .micro_batch = 4, .dp = 8, .ep = 2, .zero = 1};
  auto loaded8 = PredictTrainStep(c, spec8, m, r8);
  m.expert_load.clear();
  m.expert_peak_load.clear();
  auto balanced8 = PredictTrainStep(c, spec8, m, r8);
  ASSERT_TRUE(loaded8.ok() && balanced8.ok());
  EXPECT_DOUBLE_EQ(loaded8->step_s, balanced8->step_s);
  EXPECT_GT(loaded8->activation_bytes, balanced8->activation_bytes);
}


// One micro-batch a step: its backward frees activations while the
// gradient tensors appear, so they do not add to the peak; with two the
// first backward's gradients are alive during the second forward.
TEST(TwinLayouts, OneMicroBatchPeaksBeforeItsGradients) {
  const MachineCalibration c = testing::SyntheticMachine();
  const ClusterSpec spec = Spec(c, 1);
  TwinRun r{.global_batch = 4, .micro_batch = 4};
  auto one = PredictTrainStep(c, spec, Model(), r);
  r.global_batch = 8;
  auto two = PredictTrainStep(c, spec, Model(), r);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->gradient_bytes, 0);
  EXPECT_GT(two->gradient_bytes, 0);
  EXPECT_EQ(one->activation_bytes, two->activation_bytes);
  EXPECT_DOUBLE_EQ(two->peak_memory_bytes - one->peak_memory_bytes, two->gradient_bytes);
}

}  // namespace tessera::sim
