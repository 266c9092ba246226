// Calibration fits on synthetic measurements, the written specs, and the
// twin's step-time predictor (work counting, scaling, communication).
#include "tessera/sim/calibrate.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/sim/collective_cost.h"
#include "tessera/sim/sim_test_util.h"
#include "tessera/sim/twin.h"

namespace tessera::sim {
namespace {

TEST(CalibrateFit, LineRecoversExactData) {
  auto f = FitLineRelative({1, 2, 4, 8}, {3.5, 5.5, 9.5, 17.5});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NEAR(f->intercept, 1.5, 1e-12);
  EXPECT_NEAR(f->slope, 2.0, 1e-12);
  EXPECT_NEAR(f->rms_rel_error, 0.0, 1e-12);
  EXPECT_FALSE(FitLineRelative({1}, {2}).ok());
  EXPECT_FALSE(FitLineRelative({1, 1}, {2, 3}).ok());
  EXPECT_FALSE(FitLineRelative({1, 2}, {2, 0}).ok());
}

TEST(CalibrateFit, EfficiencyCurveFromGemmTimes) {
  const double peak = 400e9, eff = 0.72, half = 3e6;
  std::vector<GemmSample> s;
  const int64_t sizes[][3] = {{32, 32, 32}, {64, 64, 64}, {128, 128, 128}, {160, 384, 128}, {512, 512, 512}};
  for (const auto& d : sizes) {
    GemmSample g{d[0], d[1], d[2], 0};
    g.seconds = (g.Flops() + half) / (peak * eff);
    s.push_back(g);
  }
  auto c = FitEfficiencyCurve(s, peak);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->curve.max_efficiency, eff, 1e-9);
  EXPECT_NEAR(c->curve.half_work_flops, half, 1e-3);
  // +-3 % alternating noise moves the constants by a few percent only.
  for (size_t i = 0; i < s.size(); ++i) s[i].seconds *= i % 2 == 0 ? 1.03 : 0.97;
  c = FitEfficiencyCurve(s, peak);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(c->curve.max_efficiency, eff, 0.05 * eff);
  EXPECT_NEAR(c->curve.half_work_flops, half, 0.15 * half);
  EXPECT_GT(c->rms_rel_error, 0.01);
  EXPECT_FALSE(FitEfficiencyCurve(s, 0).ok());
  // Time that shrinks with work cannot be a curve.
  std::vector<GemmSample> bad = {{64, 64, 64, 2e-3}, {512, 512, 512, 1e-3}};
  EXPECT_FALSE(FitEfficiencyCurve(bad, peak).ok());
}

TEST(CalibrateFit, AllReduceLinkAlphaBeta) {
  for (int n : {2, 4}) {
    const double alpha = 2e-6, beta = 6e9;
    std::vector<TransferSample> s;
    for (double bytes = 1024; bytes <= 16 * 1024 * 1024; bytes *= 4) {
      s.push_back({bytes, 2 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / beta});
    }
    auto l = FitAllReduceLink(s, n);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_NEAR(l->alpha_s, alpha, 1e-12) << n;
    EXPECT_NEAR(l->beta_bytes_per_s, beta, 1e-6 * beta) << n;
    EXPECT_NEAR(l->rms_rel_error, 0, 1e-9);
  }
  std::vector<TransferSample> small = {{1024, 1e-6}, {4096, 2e-6}};
  EXPECT_FALSE(FitAllReduceLink(small, 2).ok());  // nothing >= 1 MiB for beta
  EXPECT_TRUE(FitAllReduceLink(small, 2, 1024).ok());
  EXPECT_FALSE(FitAllReduceLink(small, 1, 1024).ok());
}

TEST(CalibrateFit, ParsesCclPerfOutput) {
  const std::string text =
      "[rank 0] # Tessera all_reduce over 2 rank(s)\n"
      "[rank 0] #       size         count      type   redop    root     time   algbw   busbw #wrong     time\n"
      "[rank 0]           64            16     float     sum      -1     0.15    0.41    0.41      0     0.14"
      "    0.45    0.45      0\n"
      "      1048576        262144     float     sum      -1    88.11   11.90   11.90      0    85.45   12.27"
      "   12.27      0\n"
      "[rank 0] # Avg bus bandwidth    : 6.81448\n";
  auto rows = ParseNcclTestsOutput(text);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_DOUBLE_EQ((*rows)[0].bytes, 64);
  EXPECT_NEAR((*rows)[0].seconds, 0.15e-6, 1e-15);
  EXPECT_DOUBLE_EQ((*rows)[1].bytes, 1048576);
  EXPECT_NEAR((*rows)[1].seconds, 88.11e-6, 1e-12);
  EXPECT_FALSE(ParseNcclTestsOutput("# nothing here\n").ok());
}

TEST(CalibrateFit, OpPointsInterpolateAndRoundTrip) {
  OpLine l{1e-6, 1e-9, {{100, 2e-6}, {400, 2.6e-6}, {1600, 8e-6}}};
  EXPECT_NEAR(l.At(100), 2e-6, 1e-15);
  EXPECT_NEAR(l.At(250), 2.3e-6, 1e-15);   // halfway along the first segment
  EXPECT_NEAR(l.At(1000), 5.3e-6, 1e-15);  // halfway along the second
  EXPECT_NEAR(l.At(3200), 15.2e-6, 1e-15);  // the last segment extended
  EXPECT_NEAR(l.At(10), 1.82e-6, 1e-15);    // the first segment extended down
  EXPECT_NEAR(l.At(0), 1.8e-6, 1e-15);
  l.points = {{100, 2e-6}, {400, 20e-6}};
  EXPECT_NEAR(l.At(1), 1e-6, 1e-15);  // never below half the first point
  auto back = OpLine::ParsePoints(OpLine{0, 0, {{100, 2e-6}, {400, 2.5e-6}}}.PointsText());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_NEAR((*back)[1].second, 2.5e-6, 1e-15);
  EXPECT_FALSE(OpLine::ParsePoints("100:2 50:3").ok());  // x must increase
  EXPECT_FALSE(OpLine::ParsePoints("100-2").ok());
  EXPECT_TRUE(OpLine::ParsePoints("")->empty());
  const OpLine no_points{1e-6, 1e-9, {}};
  EXPECT_NEAR(no_points.At(1000), 2e-6, 1e-15);
}

MachineCalibration Machine() { return sim::testing::SyntheticMachine(); }

TEST(CalibrateSpec, ClusterTomlLoadsAndCarriesTheLink) {
  const MachineCalibration c = Machine();
  for (int ranks : {1, 2, 4}) {
    auto spec = ParseClusterSpec(MachineClusterToml(c, ranks), "this-machine.toml");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->TotalDevices(), ranks);
    const double per_rank = ranks == 1 ? 400e9 : 220e9 / std::max(1.0, ranks / 2.0);
    EXPECT_NEAR(spec->device.peak_flops_fp32, per_rank, 1e-6 * per_rank) << ranks;
    if (ranks >= 2) {
      // A 2-rank ring all-reduce on the spec is the fitted 2 alpha + S / beta.
      const double bytes = 8e6;
      const CollectiveCost cost =
          EstimateCollective(*spec, CollectiveKind::kAllReduce, bytes, GroupLayout::Contiguous(*spec, 2),
                             CollectiveAlgo::kRing);
      EXPECT_NEAR(cost.time_s, 2 * c.link.alpha_s + bytes / c.link.beta_bytes_per_s, 1e-3 * cost.time_s);
    }
  }
}

TEST(CalibrateSpec, TwinTomlRoundTrips) {
  const MachineCalibration c = Machine();
  auto back = ParseTwinToml(TwinToml(c), "x.twin.toml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cores, 2);
  EXPECT_NEAR(back->all.peak_flops, c.all.peak_flops, 1e6);
  EXPECT_NEAR(back->one.linear.half_work_flops, c.one.linear.half_work_flops, 1e2);
  EXPECT_NEAR(back->one.op(OpKind::kRows).fixed_s, c.one.op(OpKind::kRows).fixed_s, 1e-10);
  ASSERT_EQ(back->one.op(OpKind::kRows).points.size(), 2u);
  EXPECT_NEAR(back->one.op(OpKind::kRows).At(5e3), c.one.op(OpKind::kRows).At(5e3), 1e-11);
  EXPECT_NEAR(back->link.beta_bytes_per_s, c.link.beta_bytes_per_s, 1e3);
  EXPECT_NEAR(back->all.context_factor, 1.3, 1e-9);
  EXPECT_NEAR(back->one.meeting_s, 40e-6, 1e-12);
  EXPECT_EQ(back->all.meeting_s, 0);
  EXPECT_FALSE(ParseTwinToml("cores = 2\n", "x").ok());
  EXPECT_EQ(TwinPathFor("configs/clusters/this-machine.toml"), "configs/clusters/this-machine.twin.toml");
  // Per-rank shares: 4 ranks on 2 cores run at half a core each.
  EXPECT_EQ(c.PerRank(1).threads, 2);
  EXPECT_NEAR(c.PerRank(4).peak_flops, 110e9, 1);
  EXPECT_NEAR(c.PerRank(4).op(OpKind::kNorm).fixed_s, 2 * c.one.op(OpKind::kNorm).fixed_s, 1e-15);
  EXPECT_NEAR(c.PerRank(4).meeting_s, 80e-6, 1e-15);
  // Bad factors are errors naming the key.
  std::string text = TwinToml(c);
  text.replace(text.find("context_factor = 1.3"), 20, "context_factor = -1");
  auto bad = ParseTwinToml(text, "x.twin.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("context_factor"), std::string::npos);
}

TwinModel DenseModel() {
  TwinModel m;
  m.vocab = 64;
  m.seq = 32;
  m.layers = 4;
  m.d_model = 128;
  m.heads = 4;
  m.d_ff = 384;
  return m;
}

TEST(Twin, CountsTheModelWork) {
  // Ideal machine: linear layers at peak, attention at peak, no other cost.
  MachineCalibration c = Machine();
  c.all.linear = {1.0, 0.0};
  for (OpLine& o : c.all.ops) o = {0, 0, {}};
  c.all.ops[static_cast<int>(OpKind::kAttention)] = {0, 1.0 / c.all.peak_flops, {}};
  auto spec = ParseClusterSpec(MachineClusterToml(c, 1), "x");
  ASSERT_TRUE(spec.ok());
  const TwinModel m = DenseModel();
  TwinRun r;
  r.global_batch = 8;
  r.micro_batch = 2;
  auto p = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const double d = 128, tokens = 8 * 32;
  const double linear_params = m.layers * (4 * d * d + 3 * d * 384) + 64 * d;  // + tied lm head
  const double attention = 12.0 * m.layers * 8 * 32 * 32 * d;
  // The context factor scales every op of the step.
  EXPECT_NEAR(p->gemm_s * c.all.peak_flops / c.all.context_factor, 6 * linear_params * tokens + attention,
              1e-6 * p->gemm_s * 4e11);
  EXPECT_EQ(p->micro_batches, 4);
  EXPECT_EQ(p->dp_comm_s, 0);
  EXPECT_EQ(p->sync_s, 0);
  // Activations: every op output of one micro-batch (2 x 32 tokens) is kept:
  // per layer 16 d-wide outputs, 3 FFN-wide ones and the attention's H
  // log-sum-exp rows per token; embedding + final norm (2 d), logits and
  // cross-entropy (2 V), and two scalar loss terms.
  const double per_token = m.layers * (16 * d + 3 * 384 + m.heads) + 2 * d + 2 * 64;
  EXPECT_NEAR(p->activation_bytes, 4 * (per_token * 2 * 32 + 2), 1e-6);
  EXPECT_EQ(p->activation_stage, 0);
  // One micro-batch's op-sum is the step's compute without the factor.
  EXPECT_NEAR(OpSumSecondsPerMicroBatch(c.all, m, 2) * 4 * c.all.context_factor, p->gemm_s + p->elementwise_s,
              1e-9 * p->gemm_s);
}

TEST(Twin, ScalesWithMicroBatchesAndAddsCommunication) {
  const MachineCalibration c = Machine();
  auto spec = ParseClusterSpec(MachineClusterToml(c, 2), "x");
  ASSERT_TRUE(spec.ok());
  TwinModel m = DenseModel();
  m.experts = 4;
  m.top_k = 2;
  m.d_ff_expert = 256;
  m.moe = {false, true, false, true};
  TwinRun r;
  r.global_batch = 16;
  r.micro_batch = 4;
  auto one = PredictTrainStep(c, *spec, m, r);
  r.global_batch = 32;
  auto two = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_NEAR(two->gemm_s, 2 * one->gemm_s, 1e-9);
  EXPECT_GT(one->ops_per_micro_batch, 60);
  // Data parallel over 2 ranks: half the micro-batches each, plus the
  // gradient all-reduce; expert parallel adds all-to-alls.
  r.dp = 2;
  auto dp = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->micro_batches, 4);
  EXPECT_GT(dp->dp_comm_s, 0);
  EXPECT_EQ(dp->ep_comm_s, 0);
  // ZeRO stages move what the runtime moves: 1 = all-reduce + all-gather of
  // the updated shards, 2 = reduce-scatter + all-gather (the all-reduce's
  // bytes), 3 = parameters gathered for every micro-batch's forward and
  // backward.
  std::vector<double> zero_comm;
  for (int z = 0; z <= 3; ++z) {
    TwinRun rz = r;
    rz.zero = z;
    auto pz = PredictTrainStep(c, *spec, m, rz);
    ASSERT_TRUE(pz.ok());
    zero_comm.push_back(pz->dp_comm_s);
  }
  EXPECT_GT(zero_comm[1], zero_comm[0]);
  EXPECT_NEAR(zero_comm[2], zero_comm[0], 0.2 * zero_comm[0]);
  EXPECT_GT(zero_comm[3], 4 * zero_comm[2]);
  r.ep = 2;
  auto ep = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(ep.ok());
  EXPECT_GT(ep->ep_comm_s, 0);
  // Meetings: 5 exchanges per MoE layer per micro-batch (2 MoE layers, 4
  // micro-batches); pure dp ranks meet only between steps.
  EXPECT_EQ(dp->sync_s, 0);
  EXPECT_NEAR(ep->sync_s, 5 * 2 * 4 * c.one.meeting_s, 1e-12);
  EXPECT_NEAR(ep->step_s - dp->step_s, ep->ep_comm_s + ep->sync_s + ep->optimizer_s - dp->optimizer_s +
                                           (ep->gemm_s + ep->elementwise_s) - (dp->gemm_s + dp->elementwise_s) +
                                           ep->dp_comm_s - dp->dp_comm_s,
              1e-9);
  // Pipeline over 2 stages: 1F1B bubble and activation sends.
  r = TwinRun{.global_batch = 32, .micro_batch = 4, .dp = 1, .tp = 1, .pp = 2, .ep = 1, .zero = 0};
  auto pp = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(pp.ok());
  EXPECT_GT(pp->bubble_s, 0);
  EXPECT_GT(pp->pp_comm_s, 0);
  EXPECT_NEAR(pp->sync_s, 2 * 8 * c.one.meeting_s, 1e-12);  // a hand-off each way per micro-batch
  // 1F1B: the first stage holds 2 micro-batches of its half of the layers,
  // about as much as one micro-batch of the whole model.
  EXPECT_EQ(pp->activation_stage, 0);
  EXPECT_NEAR(pp->activation_bytes / two->activation_bytes, 1.0, 0.1);
  EXPECT_LT(pp->ops_per_micro_batch, two->ops_per_micro_batch);
  // Bad runs.
  r.pp = 8;
  EXPECT_FALSE(PredictTrainStep(c, *spec, m, r).ok());  // more stages than layers
  r = TwinRun{.global_batch = 32, .micro_batch = 4, .dp = 4, .tp = 1, .pp = 1, .ep = 1, .zero = 0};
  EXPECT_FALSE(PredictTrainStep(c, *spec, m, r).ok());  // 4 ranks on a 2-device spec
  r.dp = 3;
  EXPECT_FALSE(PredictTrainStep(c, *spec, m, r).ok());  // 32 not a multiple of 4 x 3
}

}  // namespace
}  // namespace tessera::sim
