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

TEST(CalibrateFit, FastestPerSizeDropsAStalledSweep) {
  // Sweep 2 stalled at 1 and 4 MiB (slower than its own 16 MiB: no
  // slope); the merge keeps each size's fastest time and the fit recovers.
  const std::vector<TransferSample> sweep1 = {{1 << 20, 7e-4}, {4 << 20, 2.8e-3}, {16 << 20, 1.1e-2}};
  const std::vector<TransferSample> sweep2 = {{16 << 20, 1.2e-2}, {1 << 20, 2e-2}, {4 << 20, 1.5e-2}};
  EXPECT_FALSE(FitAllReduceLink(sweep2, 2).ok());
  std::vector<TransferSample> both = sweep1;
  both.insert(both.end(), sweep2.begin(), sweep2.end());
  const std::vector<TransferSample> m = FastestPerSize(both);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].bytes, 1 << 20);
  EXPECT_EQ(m[0].seconds, 7e-4);
  EXPECT_EQ(m[1].seconds, 2.8e-3);
  EXPECT_EQ(m[2].seconds, 1.1e-2);
  EXPECT_TRUE(FitAllReduceLink(m, 2).ok());
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
  EXPECT_NEAR(l.At(250), 2.3e-6, 1e-15);    // halfway along the first segment
  EXPECT_NEAR(l.At(1000), 5.3e-6, 1e-15);   // halfway along the second
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

// The shape-aware linear cost: exact synthetic times from known constants
// are recovered (the half dimensions are on the search grid), noisy ones
// approximately, and a curve that cannot be (time falling with work) is an
// error.
TEST(CalibrateFit, LinearCostRecoversShapeAwareEfficiency) {
  const double peak = 100e9;
  const LinearCost truth{5e-6, 0.7, 32, 8, 64, 0, {}};
  std::vector<LinearSample> s;
  for (double m : {16, 64, 256, 1024, 4096}) {
    for (double n : {32, 128, 512, 2048}) {
      for (double k : {32, 128, 512, 2048}) {
        if (6 * m * n * k <= 1.5e9) s.push_back({m, n, k, truth.Seconds(m, n, k, peak)});
      }
    }
  }
  auto f = FitLinearCost(s, peak);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NEAR(f->max_efficiency, 0.7, 1e-6);
  EXPECT_EQ(f->half_m, 32);
  EXPECT_EQ(f->half_n, 8);
  EXPECT_EQ(f->half_k, 64);
  EXPECT_NEAR(f->fixed_s, 5e-6, 1e-9);
  EXPECT_LT(f->rms_rel_error, 1e-9);
  for (size_t i = 0; i < s.size(); ++i) s[i].seconds *= i % 2 == 0 ? 1.04 : 0.96;
  f = FitLinearCost(s, peak);
  ASSERT_TRUE(f.ok());
  for (double m : {40.0, 700.0}) {
    EXPECT_NEAR(f->Seconds(m, 300, 200, peak) / truth.Seconds(m, 300, 200, peak), 1.0, 0.08) << m;
  }
  EXPECT_GT(f->rms_rel_error, 0.02);
  // The residual correction returns the measurements at the measured
  // shapes (the curve alone is off by the noise), round-trips as text and
  // rejects garbage.
  for (const LinearSample& x : {s[0], s[7], s[20]}) {
    EXPECT_NEAR(f->Seconds(x.m, x.n, x.k, peak) / x.seconds, 1.0, 1e-3);
  }
  auto back = Residuals::Parse(f->residuals.Text());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_NEAR(back->At(700, 300, 200), f->residuals.At(700, 300, 200), 1e-4);
  EXPECT_EQ(Residuals().At(1, 2, 3), 1.0);
  EXPECT_FALSE(Residuals::Parse("1,2:3").ok());
  EXPECT_FALSE(Residuals::Parse("1,2,3:-1").ok());
  EXPECT_FALSE(FitLinearCost({s[0], s[1], s[2]}, peak).ok());  // too few
  EXPECT_FALSE(FitLinearCost(s, 0).ok());
  std::vector<LinearSample> falling = {
      {16, 32, 32, 4e-3}, {64, 64, 64, 3e-3}, {256, 256, 256, 2e-3}, {1024, 512, 512, 1e-3}};
  EXPECT_FALSE(FitLinearCost(falling, peak).ok());
}

TEST(CalibrateFit, AttentionCostAndNonNegativeLeastSquares) {
  const AttentionCost truth{4e-6, 2e-9, 3e-11, 5e-10, 0, {}};
  std::vector<AttentionSample> s;
  for (double t : {16, 32, 64, 128, 256, 512}) {
    for (double dh : {16, 32, 64, 128}) {
      for (double bh : {2, 16}) s.push_back({bh, t, dh, truth.Seconds(bh, t, dh)});
    }
  }
  auto f = FitAttentionCost(s);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NEAR(f->fixed_s, 4e-6, 1e-10);
  EXPECT_NEAR(f->per_score_dim_s, 3e-11, 1e-15);
  EXPECT_NEAR(f->per_score_s, 5e-10, 1e-14);
  EXPECT_LT(f->rms_rel_error, 1e-9);
  // A feature that would need a negative coefficient is dropped: y = 2 + x
  // with a third feature anti-correlated gets a zero coefficient.
  auto nn = FitNonNegativeRelative({{1, 1, 3}, {1, 2, 2}, {1, 3, 1}, {1, 4, 0.5}}, {3, 4, 5, 6});
  ASSERT_TRUE(nn.ok()) << nn.status().ToString();
  EXPECT_GE(nn->coef[2], 0);
  EXPECT_FALSE(FitNonNegativeRelative({{1}}, {-1}).ok());
  EXPECT_FALSE(FitNonNegativeRelative({{1, 2}}, {1, 2}).ok());  // rows != samples
}

// A corrupted, truncated or partial twin file is an error naming the file
// and the key, never a silent default.
TEST(CalibrateSpec, BrokenTwinFilesAreClearErrors) {
  const std::string good = TwinToml(Machine());
  ASSERT_TRUE(ParseTwinToml(good, "x.twin.toml").ok());
  // Truncated in the middle of the [one] table.
  auto cut = ParseTwinToml(good.substr(0, good.find("[one]") + 40), "x.twin.toml");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("x.twin.toml"), std::string::npos) << cut.status().ToString();
  // A key removed.
  std::string missing = good;
  missing.erase(missing.find("linear_half_k"),
                missing.find('\n', missing.find("linear_half_k")) - missing.find("linear_half_k") + 1);
  auto no_key = ParseTwinToml(missing, "x.twin.toml");
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("linear_half_k"), std::string::npos) << no_key.status().ToString();
  // A value of the wrong type, an unknown key, garbage points.
  std::string typed = good;
  typed.replace(typed.find("cores = 2"), 9, "cores = \"two\"");
  EXPECT_FALSE(ParseTwinToml(typed, "x").ok());
  EXPECT_FALSE(ParseTwinToml(good + "\nunknown_key = 1\n", "x").ok());
  std::string points = good;
  points.replace(points.find("points = \"2:"), 12, "points = \"x:");
  auto bad_points = ParseTwinToml(points, "x");
  ASSERT_FALSE(bad_points.ok());
  EXPECT_NE(bad_points.status().message().find("points"), std::string::npos) << bad_points.status().ToString();
  EXPECT_FALSE(ParseTwinToml("this is = = not toml", "x").ok());
  EXPECT_FALSE(LoadTwinToml("/nonexistent/x.twin.toml").ok());
}

TEST(CalibrateSpec, ClusterTomlLoadsAndCarriesTheLink) {
  const MachineCalibration c = Machine();
  for (int ranks : {1, 2, 4}) {
    auto spec = ParseClusterSpec(MachineClusterToml(c, ranks), "this-machine.toml");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->TotalDevices(), ranks);
    const double per_rank = ranks == 1 ? 400e9 : 220e9 / std::max(1.0, ranks / 2.0);
    // bf16 gets its own measured peak (800 GFLOP/s over 2 cores), memory is MemTotal / ranks.
    const double bf16 = ranks == 1 ? 800e9 : 400e9 / std::max(1.0, ranks / 2.0);
    EXPECT_NEAR(spec->device.peak_flops_bf16, bf16, 1e-6 * bf16) << ranks;
    EXPECT_NEAR(spec->device.hbm_bytes, 16e9 / ranks, 1e-3 * 16e9) << ranks;
    EXPECT_NEAR(spec->device.peak_flops_fp32, per_rank, 1e-6 * per_rank) << ranks;
    if (ranks >= 2) {
      // A 2-rank ring all-reduce on the spec is the fitted 2 alpha + S / beta.
      const double bytes = 8e6;
      const CollectiveCost cost = EstimateCollective(*spec, CollectiveKind::kAllReduce, bytes,
                                                     GroupLayout::Contiguous(*spec, 2), CollectiveAlgo::kRing);
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
  EXPECT_NEAR(back->one.linear.half_m, c.one.linear.half_m, 1e-9);
  EXPECT_NEAR(back->one.linear.fixed_s, c.one.linear.fixed_s, 1e-10);
  EXPECT_NEAR(back->one.attention.per_score_dim_s, c.one.attention.per_score_dim_s, 1e-15);
  EXPECT_NEAR(back->host_memory_bytes, 16e9, 1e6);
  EXPECT_NEAR(back->bf16_peak_flops, 800e9, 1e7);
  EXPECT_NEAR(back->one.op(OpKind::kRows).fixed_s, c.one.op(OpKind::kRows).fixed_s, 1e-10);
  ASSERT_EQ(back->one.op(OpKind::kRows).points.size(), 2u);
  EXPECT_NEAR(back->one.op(OpKind::kRows).At(5e3), c.one.op(OpKind::kRows).At(5e3), 1e-11);
  EXPECT_NEAR(back->link.beta_bytes_per_s, c.link.beta_bytes_per_s, 1e3);
  EXPECT_NEAR(back->all.context_factor, 1.3, 1e-9);
  EXPECT_NEAR(back->MeetingSeconds(2), 40e-6, 1e-12);
  EXPECT_NEAR(back->MeetingSeconds(6), 140e-6, 1e-12);  // interpolated between 4 and 8 ranks
  EXPECT_EQ(back->MeetingSeconds(1), 0);
  EXPECT_FALSE(ParseTwinToml("cores = 2\n", "x").ok());
  EXPECT_EQ(TwinPathFor("configs/clusters/this-machine.toml"), "configs/clusters/this-machine.twin.toml");
  // One rank gets all cores; ranks of a multi-rank job one thread each
  // (sharing cores is the pipeline replay's processor sharing).
  EXPECT_EQ(c.PerRank(1).threads, 2);
  EXPECT_EQ(c.PerRank(4).threads, 1);
  EXPECT_EQ(c.PerRank(8).peak_flops, c.one.peak_flops);
  // Bad factors are errors naming the key.
  std::string text = TwinToml(c);
  text.replace(text.find("context_factor = 1.3"), 20, "context_factor = -1");
  auto bad = ParseTwinToml(text, "x.twin.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("context_factor"), std::string::npos);
}

TwinModel DenseModel() { return sim::testing::SmallDenseModel(32); }

TEST(Twin, CountsTheModelWork) {
  // Ideal machine: linear layers at peak, attention at peak, no other cost.
  MachineCalibration c = Machine();
  c.all.linear = {0, 1.0, 0, 0, 0, 0, {}};
  for (OpLine& o : c.all.ops) o = {0, 0, {}};
  // Attention at peak: 12 B H T^2 Dh FLOPs forward + backward.
  c.all.attention = {0, 0, 12.0 / c.all.peak_flops, 0, 0, {}};
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
  // cross-entropy (2 V), and two scalar loss terms (64 bytes each: the
  // allocator's smallest size class; every other size here is a class).
  const double per_token = m.layers * (16 * d + 3 * 384 + m.heads) + 2 * d + 2 * 64;
  EXPECT_NEAR(p->activation_bytes, 4 * per_token * 2 * 32 + 2 * 64, 1e-6);
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
  // Meetings: 7 exchanges per MoE layer per micro-batch (2 MoE layers, 4
  // micro-batches; comm/moe's layout counts and metadata, dispatch and
  // combine, and three in the backward); pure dp ranks meet only between
  // steps.
  EXPECT_EQ(dp->sync_s, 0);
  EXPECT_NEAR(ep->sync_s, 7 * 2 * 4 * c.MeetingSeconds(2), 1e-12);
  // Pipeline over 2 stages: 1F1B bubble and activation sends.
  r = TwinRun{.global_batch = 32, .micro_batch = 4, .dp = 1, .tp = 1, .pp = 2, .ep = 1, .zero = 0};
  auto pp = PredictTrainStep(c, *spec, m, r);
  ASSERT_TRUE(pp.ok());
  EXPECT_GT(pp->bubble_s, 0);
  EXPECT_GT(pp->pp_comm_s, 0);
  EXPECT_NEAR(pp->sync_s, 8 * c.MeetingSeconds(2), 1e-12);  // one hand-off per micro-batch per stage
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
