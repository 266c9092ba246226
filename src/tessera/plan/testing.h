// Test-only helpers for the planner's tests: the presets under configs/
// (TESSERA_SOURCE_DIR is defined for plan_test by the module's CMakeLists),
// the published tables the planner is checked against, re-read from their
// sources (docs/plan.md quotes each and says what was stated and what is
// assumed), and the two baselines every table is compared with (the best
// constant step time and time proportional to model FLOPs per GPU, both
// fitted on the table itself). Header-only; thread-safe.
//  - Narayanan et al. 2021 Table 1 (the FIT set: `Efficiency::gemm_max` was
//    chosen on it);
//  - Korthikanti et al. 2022 Tables 3 and 5 (CHECK-ONLY: no constant was set
//    or changed while looking at it).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::plan {

// One row of Narayanan et al. 2021 Table 1 (TF/s per GPU as published) with
// the run configuration of the authors' own script for it
// (Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh): micro-
// batch, interleaving (--num-layers-per-virtual-pipeline-stage) and the DDP
// implementation (torch DDP overlaps the gradient all-reduce with backward;
// "local" DDP reduces after the flush). All rows: sequence 2,048, vocabulary
// 51,200, full ("uniform") activation recompute, fp16.
struct NarayananRow {
  const char* model_file;  // under configs/models/
  double params_b;
  int tp;
  int pp;
  int gpus;
  int batch;
  int micro_batch;        // run_table_1.sh MBS
  int vpp;                // layers per stage / layers per virtual stage (1: not interleaved)
  bool overlap_dp;        // DDP=torch
  double tflops_per_gpu;  // published, counting the recompute FLOPs (96·B·s·l·h²·(...))
};

inline const std::vector<NarayananRow>& NarayananTable() {
  static const std::vector<NarayananRow> rows = {
      {"megatron-1.7b.toml", 1.7, 1, 1, 32, 512, 16, 1, true, 137},
      {"megatron-3.6b.toml", 3.6, 2, 1, 64, 512, 16, 1, true, 138},
      {"megatron-7.5b.toml", 7.5, 4, 1, 128, 512, 16, 1, true, 142},
      {"megatron-18.4b.toml", 18.4, 8, 1, 256, 1024, 8, 1, true, 135},
      {"megatron-39.1b.toml", 39.1, 8, 2, 512, 1536, 4, 1, false, 138},
      {"megatron-76.1b.toml", 76.1, 8, 4, 1024, 1792, 2, 3, false, 140},
      {"megatron-145.6b.toml", 145.6, 8, 8, 1536, 2304, 2, 2, false, 148},
      {"megatron-310.1b.toml", 310.1, 8, 16, 1920, 2160, 1, 2, false, 155},
      {"megatron-529.6b.toml", 529.6, 8, 35, 2520, 2520, 1, 3, false, 163},
      {"megatron-1008b.toml", 1008, 8, 64, 3072, 3072, 1, 1, false, 163},
  };
  return rows;
}

// Narayanan et al.'s FLOPs per iteration (their eq. 3, with full recompute):
// 96 B s l h^2 (1 + s/6h + V/16lh); the measured step time of a row is this
// over (published TF/s x GPUs).
inline double NarayananStepSeconds(const NarayananRow& row, int layers, int hidden) {
  const double B = row.batch, s = 2048, l = layers, h = hidden, V = 51200;
  const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return flops / (row.tflops_per_gpu * 1e12 * row.gpus);
}

// Model FLOPs of one step (Korthikanti et al. eq. for MFU, no recompute):
// 72 B s l h^2 (1 + s/6h + V/12lh).
inline double ModelFlopsPerStep(int64_t batch, int layers, int hidden) {
  const double B = static_cast<double>(batch), s = 2048, l = layers, h = hidden, V = 51200;
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

// One row of Korthikanti et al. 2022 (arXiv 2205.05198): configuration from
// Table 3, iteration times and utilizations from Table 5 (no data
// parallelism; interleaved schedule with 3 virtual stages for 175B and 530B;
// sequence 2,048, vocabulary 51,200; A100 80 GB).
struct KorthikantiRow {
  const char* model_file;
  int tp, pp, gpus, batch, micro_batch, vpp;
  double full_recompute_s;  // Table 5 "full recompute" iteration time
  double present_work_s;    // Table 5 sequence parallelism + selective recompute
  double mfu, hfu;          // Table 5, present work
};

inline const std::vector<KorthikantiRow>& KorthikantiTable() {
  static const std::vector<KorthikantiRow> rows = {
      {"korthikanti-22b.toml", 8, 1, 8, 4, 4, 1, 1.42, 1.10, 0.415, 0.437},
      {"korthikanti-175b.toml", 8, 8, 64, 64, 1, 3, 18.13, 13.75, 0.514, 0.528},
      {"megatron-529.6b.toml", 8, 35, 280, 280, 1, 3, 49.05, 37.83, 0.560, 0.570},
      {"megatron-1008b.toml", 8, 64, 512, 512, 1, 1, 94.42, 71.49, 0.563, 0.570},
  };
  return rows;
}

// Mean absolute percentage error of `pred` against `meas`.
inline double Mape(const std::vector<double>& pred, const std::vector<double>& meas) {
  double sum = 0;
  for (size_t i = 0; i < meas.size(); ++i) sum += std::abs(pred[i] - meas[i]) / meas[i];
  return meas.empty() ? 0 : sum / static_cast<double>(meas.size());
}
// The best MAPE of pred_i = k * x_i over k > 0, fitted on `meas` itself
// (MAPE is piecewise linear in k, so the optimum is at some k = meas_j / x_j).
// x_i = 1 is the best constant; x_i = model FLOPs per GPU is the
// FLOP-proportional baseline (one fitted FLOP/s).
inline double BestScaledMape(const std::vector<double>& x, const std::vector<double>& meas) {
  double best = 1e300;
  for (size_t j = 0; j < meas.size(); ++j) {
    const double k = meas[j] / x[j];
    std::vector<double> pred(x.size());
    for (size_t i = 0; i < x.size(); ++i) pred[i] = k * x[i];
    best = std::min(best, Mape(pred, meas));
  }
  return best;
}

#ifdef TESSERA_SOURCE_DIR
inline std::string ModelPath(const std::string& file) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/models/" + file;
}
inline std::string ClusterPath(const std::string& file) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/clusters/" + file;
}
// A preset, or a test failure (and a default value).
inline ModelSpec TestModel(const std::string& file) {
  auto m = LoadModelSpec(ModelPath(file));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : ModelSpec();
}
inline sim::ClusterSpec TestCluster(const std::string& file) {
  auto c = sim::LoadClusterSpec(ClusterPath(file));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : sim::ClusterSpec();
}
#endif

// dp x tp x pp with `global_batch` sequences in micro-batches of `micro_batch`;
// everything else default.
inline ParallelPlan Plan3D(int dp, int tp, int pp, int64_t global_batch, int64_t micro_batch = 1) {
  ParallelPlan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.global_batch = global_batch;
  p.micro_batch = micro_batch;
  return p;
}

// A Table 1 row as the authors' script ran it: full recompute, no SP, no
// flash attention, no ZeRO, the row's micro-batch and interleaving, the
// gradient all-reduce overlapped with backward only under torch DDP.
inline ParallelPlan NarayananPlan(const NarayananRow& row) {
  ParallelPlan p = Plan3D(row.gpus / (row.tp * row.pp), row.tp, row.pp, row.batch, row.micro_batch);
  p.recompute = Recompute::kFull;
  p.sequence_parallel = false;
  p.flash_attention = false;
  p.overlap_grad_reduce = row.overlap_dp;
  p.zero = 0;
  p.vpp = row.vpp;
  p.schedule = row.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  return p;
}

// A Table 3 row of Korthikanti et al.: dp 1, its micro-batch and
// interleaving; `present` = sequence parallelism + selective recompute, else
// full recompute without SP. No flash attention (2022 Megatron).
inline ParallelPlan KorthikantiPlan(const KorthikantiRow& row, bool present) {
  ParallelPlan p = Plan3D(row.gpus / (row.tp * row.pp), row.tp, row.pp, row.batch, row.micro_batch);
  p.recompute = present ? Recompute::kSelective : Recompute::kFull;
  p.sequence_parallel = present;
  p.flash_attention = false;
  p.overlap_grad_reduce = false;
  p.zero = 0;
  p.vpp = row.vpp;
  p.schedule = row.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  return p;
}

}  // namespace tessera::plan
