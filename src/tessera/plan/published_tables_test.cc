// The time model against published measurements, each table compared with
// two baselines fitted on that same table (docs/plan.md "Published tables"):
//  - Narayanan et al. 2021 Table 1 is the FIT set (gemm_max was chosen on it);
//  - Korthikanti et al. 2022 Table 5 is CHECK-ONLY (no constant set on it).
// Errors are on step (iteration) time.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"
#include "tessera/plan/time_model.h"

namespace tessera::plan {
namespace {

struct TableScore {
  double model = 0, constant = 0, flops = 0;  // MAPE of step time
};

TableScore Score(const std::vector<double>& pred, const std::vector<double>& meas, const std::vector<double>& flops) {
  TableScore s;
  s.model = Mape(pred, meas);
  s.constant = BestScaledMape(std::vector<double>(meas.size(), 1.0), meas);
  s.flops = BestScaledMape(flops, meas);
  std::printf("step-time MAPE: model %.2f%%, best constant %.2f%%, FLOP-proportional %.2f%%\n", 100 * s.model,
              100 * s.constant, 100 * s.flops);
  return s;
}

// The fit set. Every row fits in 80 GB; the model's MAPE on step time is
// under 10 % and under half the best constant's. The FLOP-proportional
// baseline (one TF/s for all rows, fitted here) is reported: on a table whose
// published TF/s lie within 135-163 it is hard to beat (docs/plan.md).
TEST(PublishedTablesTest, NarayananTable1FitSet) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  std::vector<double> pred, meas, flops;
  for (const NarayananRow& row : NarayananTable()) {
    const ModelSpec m = TestModel(row.model_file);
    const ParallelPlan p = NarayananPlan(row);
    auto r = EvaluatePlan(m, a100, p);
    ASSERT_TRUE(r.ok()) << row.model_file << ": " << r.status().ToString();
    const double step = NarayananStepSeconds(row, static_cast<int>(m.layers), static_cast<int>(m.hidden));
    pred.push_back(r->step_time);
    meas.push_back(step);
    flops.push_back(ModelFlopsPerStep(row.batch, static_cast<int>(m.layers), static_cast<int>(m.hidden)) / row.gpus);
    std::printf("%-22s %-70s step %6.2f s published %6.2f s (%+5.1f%%)  TF/s %5.1f vs %5.1f  mem %5.1f GB\n",
                row.model_file, p.ToString().c_str(), r->step_time, step, 100 * (r->step_time / step - 1),
                r->tflops_per_device, row.tflops_per_gpu, r->memory.Total() / 1e9);
    EXPECT_TRUE(r->fits) << row.model_file << ": " << r->memory.Total() / 1e9 << " GB";
    EXPECT_LT(std::abs(r->step_time / step - 1), 0.25) << row.model_file;
  }
  const TableScore s = Score(pred, meas, flops);
  EXPECT_LT(s.model, 0.10);
  EXPECT_LE(s.model, 0.5 * s.constant);
}

// Check-only: Korthikanti et al. 2022 Table 5, both columns (full recompute
// and SP + selective recompute) of the four Table 3 configurations. The
// model's MAPE on iteration time is under 10 %, under half the best
// constant's and under the FLOP-proportional baseline's (which cannot see
// what recompute costs).
TEST(PublishedTablesTest, KorthikantiTable5CheckOnly) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  std::vector<double> pred, meas, flops;
  for (const KorthikantiRow& row : KorthikantiTable()) {
    const ModelSpec m = TestModel(row.model_file);
    for (bool present : {false, true}) {
      const ParallelPlan p = KorthikantiPlan(row, present);
      auto r = EvaluatePlan(m, a100, p);
      ASSERT_TRUE(r.ok()) << row.model_file << ": " << r.status().ToString();
      const double step = present ? row.present_work_s : row.full_recompute_s;
      pred.push_back(r->step_time);
      meas.push_back(step);
      flops.push_back(ModelFlopsPerStep(row.batch, static_cast<int>(m.layers), static_cast<int>(m.hidden)) / row.gpus);
      std::printf("%-22s %-70s step %6.2f s published %6.2f s (%+5.1f%%)  MFU %4.1f%%  mem %5.1f GB\n", row.model_file,
                  p.ToString().c_str(), r->step_time, step, 100 * (r->step_time / step - 1), 100 * r->mfu,
                  r->memory.Total() / 1e9);
      EXPECT_TRUE(r->fits) << row.model_file << ": " << r->memory.Total() / 1e9 << " GB";
    }
  }
  const TableScore s = Score(pred, meas, flops);
  EXPECT_LT(s.model, 0.10);
  EXPECT_LE(s.model, 0.5 * s.constant);
  EXPECT_LT(s.model, s.flops);
}

// The re-read table is self-consistent: Table 5's MFU is Table 3's model
// FLOPs over (iteration time x GPUs x 312 TF/s) to within rounding, so the
// iteration times and configurations belong together.
TEST(PublishedTablesTest, KorthikantiTableIsSelfConsistent) {
  for (const KorthikantiRow& row : KorthikantiTable()) {
    const ModelSpec m = TestModel(row.model_file);
    const double mfu = ModelFlopsPerStep(row.batch, static_cast<int>(m.layers), static_cast<int>(m.hidden)) /
                       (row.present_work_s * row.gpus * 312e12);
    EXPECT_NEAR(mfu, row.mfu, 0.01) << row.model_file;
  }
}

// Korthikanti et al.'s abstract: the 530 B model on 2,240 A100s (Table 3's
// tp 8 x pp 35 with 8-way data parallelism) reaches 54.2 % MFU with SP +
// selective recompute and 42.1 % with full recompute. The global batch of
// that run is not stated; assumed 8 x 280 = 2,240 (Table 3's per-replica
// batch), interleaved with 3 virtual stages as in Table 3. Check-only.
TEST(PublishedTablesTest, KorthikantiMfu530BOn2240) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  const ModelSpec m = TestModel("megatron-529.6b.toml");
  KorthikantiRow row = KorthikantiTable()[2];
  row.gpus = 2240;
  row.batch = 2240;
  auto sel = EvaluatePlan(m, a100, KorthikantiPlan(row, true));
  auto full = EvaluatePlan(m, a100, KorthikantiPlan(row, false));
  ASSERT_TRUE(sel.ok() && full.ok());
  std::printf("530B on 2240 GPUs, MFU: SP+selective %.1f%% (published 54.2%%), full recompute %.1f%% (published "
              "42.1%%)\n",
              100 * sel->mfu, 100 * full->mfu);
  EXPECT_NEAR(sel->mfu, 0.542, 0.542 * 0.10);
  EXPECT_NEAR(full->mfu, 0.421, 0.421 * 0.10);
}

}  // namespace
}  // namespace tessera::plan
