#include "tessera/plan/memory_model.h"

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"

namespace tessera::plan {
namespace {

// The ZeRO paper's model-state formulas (Ψ parameters, K = 12, N_d ranks):
// baseline 16Ψ; ZeRO-1 4Ψ + 12Ψ/N; ZeRO-2 2Ψ + 14Ψ/N; ZeRO-3 16Ψ/N.
TEST(MemoryModelTest, ZeroStagesMatchZeroPaper) {
  const ModelSpec m = TestModel("megatron-7.5b.toml");
  const double psi = static_cast<double>(CountParams(m).total);
  ParallelPlan p = Plan3D(64, 1, 1, 64);
  const double n = p.dp;
  const double expected[4] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n};
  for (int z = 0; z <= 3; ++z) {
    p.zero = z;
    ASSERT_TRUE(ValidatePlan(m, p).ok());
    const MemoryBreakdown b = EstimateMemory(m, p);
    EXPECT_NEAR(b.weights + b.gradients + b.optimizer, expected[z], 1.0) << "zero " << z;
  }
  // Offload moves the 12 bytes of optimizer state per parameter to the host.
  p.zero = 0;
  p.offload_optimizer = true;
  const MemoryBreakdown off = EstimateMemory(m, p);
  EXPECT_EQ(off.optimizer, 0.0);
  EXPECT_NEAR(off.host, 12 * psi, 1.0);
}

// Korthikanti et al. 2022, activations per layer (s seq, b micro-batch, h
// hidden, a heads, t TP), GPT with dropout and no flash attention:
//   TP only          sbh(10 + 24/t + 5as/(ht))
//   TP + SP          sbh/t (34 + 5as/h)
//   TP + SP + sel.   34 sbh/t
//   full recompute   2sbh/t (SP) — the layer input
TEST(MemoryModelTest, ActivationsMatchKorthikanti) {
  const ModelSpec m = TestModel("megatron-145.6b.toml");  // a = 96, h = 12288
  ParallelPlan p = Plan3D(1, 8, 1, 2, 2);
  p.flash_attention = false;
  const double s = 2048, b = 2, h = 12288, a = 96, t = 8;
  const double sbh = s * b * h;
  p.sequence_parallel = false;
  EXPECT_NEAR(LayerActivationBytes(m, p, false), sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1.0);
  p.sequence_parallel = true;
  EXPECT_NEAR(LayerActivationBytes(m, p, false), sbh / t * (34 + 5 * a * s / h), 1.0);
  p.recompute = Recompute::kSelective;
  EXPECT_NEAR(LayerActivationBytes(m, p, false), 34 * sbh / t + 4 * s * b * a / t, 1.0);  // + log-sum-exp
  p.recompute = Recompute::kFull;
  EXPECT_NEAR(LayerActivationBytes(m, p, false), 2 * sbh / t, 1.0);
  // fp8 halves the saved GEMM inputs: QKV input, projection input, FC1 and FC2 inputs
  // (sbh/t x (1 + 1 + 1 + 4)) fewer bytes with SP.
  p.recompute = Recompute::kSelective;
  const double bf16 = LayerActivationBytes(m, p, false);
  p.precision = Precision::kFp8;
  EXPECT_NEAR(bf16 - LayerActivationBytes(m, p, false), sbh / t * 7, 1.0);
}

// 1F1B: pipeline rank 0 keeps p micro-batches in flight; interleaving with v
// chunks multiplies that by (1 + (p-1)/(pv)) (Korthikanti et al. 2022, §4.2).
TEST(MemoryModelTest, PipelineInFlightMicroBatches) {
  const ModelSpec m = TestModel("megatron-145.6b.toml");  // 80 layers
  ParallelPlan p = Plan3D(1, 8, 8, 64);
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(InFlightChunks(p, 0), 8);
  EXPECT_EQ(InFlightChunks(p, 7), 1);
  const MemoryBreakdown one = EstimateMemory(m, p);
  EXPECT_EQ(one.rank, 0);
  const double layer = LayerActivationBytes(m, p, false);
  EXPECT_NEAR(one.activations, layer * 10 * 8, 1.0);  // 10 layers x 8 micro-batches

  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  ASSERT_TRUE(ValidatePlan(m, p).ok());
  const MemoryBreakdown two = EstimateMemory(m, p);
  EXPECT_NEAR(two.activations, layer * 10 * 8 * (1 + 7.0 / 16), 1.0);

  // Few micro-batches: a rank never holds more than exist.
  p.vpp = 1;
  p.schedule = Schedule::kOneFOneB;
  p.global_batch = 3;
  EXPECT_EQ(InFlightChunks(p, 0), 3);
}

// Full hand computation for the 1-trillion-parameter row of Narayanan et al.
// (t = 8, p = 64, b = 1, full recompute, no SP, dp = 6, no ZeRO).
TEST(MemoryModelTest, TrillionRowByHand) {
  const ModelSpec m = TestModel("megatron-1008b.toml");
  ParallelPlan p = Plan3D(6, 8, 64, 3072);
  p.recompute = Recompute::kFull;
  p.sequence_parallel = false;
  p.flash_attention = false;
  ASSERT_TRUE(ValidatePlan(m, p).ok());
  const MemoryBreakdown b = EstimateMemory(m, p);
  const double h = 25600, s = 2048, a = 160, t = 8, V = 51200;
  // Rank 0: 2 layers (weights 12h² and biases 9h split over the 8 TP ranks, the
  // two LayerNorms' 4h whole) + the embedding (tokens + positions), split.
  const double rank0 = (2 * (12 * h * h + 9 * h) + (V + s) * h) / t + 2 * 4 * h;
  // Activations: 2 layers x 64 micro-batches x the 2sbh input, plus one layer
  // recomputed at a time: sbh(10 + 24/t + 5as/(ht)).
  const double acts = 2 * 64 * 2 * s * h + s * h * (10 + 24 / t + 5 * a * s / (h * t));
  // The last rank holds the tied embedding copy (V h / t) and logits, but only 1
  // micro-batch: rank 0 is the peak.
  EXPECT_EQ(b.rank, 0);
  EXPECT_NEAR(b.params, rank0, 1.0);
  EXPECT_NEAR(b.weights + b.gradients + b.optimizer, 16 * rank0, 16.0);
  EXPECT_NEAR(b.activations, acts, 1.0);
  EXPECT_EQ(b.workspace, 0.0);
  EXPECT_LT(b.Total(), 80e9 * kUsableMemoryFraction);  // it ran on 80 GB A100s
}

// Expert weights are split over ep and their states sharded over the
// expert-data-parallel group dp*tp/ep.
TEST(MemoryModelTest, ExpertShardingByHand) {
  const ModelSpec m = TestModel("deepseek-v3.toml");
  const ParamCounts c = CountParams(m);
  ParallelPlan p = Plan3D(64, 1, 1, 64);
  p.ep = 64;
  p.zero = 1;
  ASSERT_TRUE(ValidatePlan(m, p).ok());
  const MemoryBreakdown b = EstimateMemory(m, p);
  const double experts = 58.0 * 256 * c.expert / 64;          // 4 routed experts per layer per rank
  const double dense = static_cast<double>(c.total) - 58.0 * 256 * c.expert;
  EXPECT_NEAR(b.params, dense + experts, 1.0);
  // ZeRO-1: optimizer over dp = 64 (dense) and edp = 64 * 1 / 64 = 1 (experts).
  EXPECT_NEAR(b.optimizer, 12 * (dense / 64 + experts / 1), 16.0);
  EXPECT_NEAR(b.weights, 2 * (dense + experts), 2.0);
}

}  // namespace
}  // namespace tessera::plan
