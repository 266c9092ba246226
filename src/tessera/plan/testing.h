// Test-only helpers for the planner's tests: the presets under configs/ (TESSERA_SOURCE_DIR is defined for plan_test by the module's
// CMakeLists) and Table 1 of Narayanan et al. 2021 (SC'21, "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"),
// as listed in /work/shared/REFERENCE.md. Header-only; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::plan {

struct NarayananRow {
  const char* model_file;  // under configs/models/
  double params_b;
  int tp;
  int pp;
  int gpus;
  int batch;
  double tflops_per_gpu;  // published, counting the recompute FLOPs (96·B·s·l·h²·(...))
};

inline const std::vector<NarayananRow>& NarayananTable() {
  static const std::vector<NarayananRow> rows = {
      {"megatron-1.7b.toml", 1.7, 1, 1, 32, 512, 137},
      {"megatron-3.6b.toml", 3.6, 2, 1, 64, 512, 138},
      {"megatron-7.5b.toml", 7.5, 4, 1, 128, 512, 142},
      {"megatron-18.4b.toml", 18.4, 8, 1, 256, 1024, 135},
      {"megatron-39.1b.toml", 39.1, 8, 2, 512, 1536, 138},
      {"megatron-76.1b.toml", 76.1, 8, 4, 1024, 1792, 140},
      {"megatron-145.6b.toml", 145.6, 8, 8, 1536, 2304, 148},
      {"megatron-310.1b.toml", 310.1, 8, 16, 1920, 2160, 155},
      {"megatron-529.6b.toml", 529.6, 8, 35, 2520, 2520, 163},
      {"megatron-1008b.toml", 1008, 8, 64, 3072, 3072, 163},
  };
  return rows;
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

}  // namespace tessera::plan
