// Shared by the parallel-training tests: a small MoE GPT config (ranks as
// threads), the single-process run as oracle, a parallel run that collects
// every rank's parameter shards, and the comparisons with the tolerances of
// docs/parallel-training.md. Header-only, test code.
#pragma once

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/train/parallel_trainer.h"
#include "tessera/train/trainer.h"

namespace tessera::train::parity {

constexpr char kConfig[] = R"(
name = "parity"
[model]
vocab_size = 16
seq_len = 20
n_layers = 4
d_model = 32
n_heads = 4
d_ff = 64
norm = "rmsnorm"
activation = "swiglu"
rope = true
tie_embeddings = true
[model.moe]
num_experts = 4
top_k = 2
every = 2
d_ff_expert = 32
aux_loss_coef = 0.01
[data]
kind = "arithmetic"
digits = 2
[train]
steps = 3
micro_batch = 2
global_batch = 8
lr = 3e-3
eps = 1e-6
min_lr = 1e-3
warmup_steps = 1
grad_clip = 0.5
threads = 1
log_every = 1
[eval]
every = 0
samples = 16
batch = 8
)";

struct RunResult {
  std::vector<double> losses;
  std::map<std::string, Tensor> params;  // full names -> full values
  EvalResult eval;
};

inline std::string ConfigPath() {
  static std::string path = [] {
    std::string p = std::filesystem::temp_directory_path() / fmt::format("tessera_parity_{}.toml", ::getpid());
    std::ofstream(p) << kConfig;
    return p;
  }();
  return path;
}

inline TrainConfig Load(const std::vector<std::string>& overrides) {
  auto c = TrainConfig::Load(ConfigPath(), overrides);
  TESSERA_CHECK_OK(c.status());
  return *c;
}

inline TrainerOptions QuietOptions() {
  TrainerOptions o;
  static FILE* devnull = std::fopen("/dev/null", "w");
  o.out = devnull;
  o.force_plain = true;
  o.write_records = false;
  return o;
}

inline RunResult SingleProcess(const std::vector<std::string>& overrides) {
  auto trainer = Trainer::Create(Load(overrides), QuietOptions());
  TESSERA_CHECK_OK(trainer.status());
  TrainSummary s;
  TESSERA_CHECK_OK((*trainer)->Run(&s));
  RunResult r;
  r.losses = (*trainer)->losses();
  for (auto& [name, t] : (*trainer)->model().NamedParameters()) r.params[name] = t.Clone();
  r.eval = s.eval;
  return r;
}

// Places a rank's shard into the full tensor: a tensor-parallel shard is a
// block of rows or of columns at this rank's tp index.
inline void Place(Tensor& full, const Tensor& local, int tp_rank) {
  if (local.shape() == full.shape()) {
    full.CopyFrom(local);
    return;
  }
  if (local.size(0) != full.size(0)) {
    const int64_t rows = local.size(0);
    full.Slice(0, tp_rank * rows, (tp_rank + 1) * rows).CopyFrom(local);
  } else {
    const int64_t cols = local.size(1);
    full.Slice(1, tp_rank * cols, (tp_rank + 1) * cols).CopyFrom(local);
  }
}

// `options` (its base replaced by QuietOptions()); `summary`: rank 0's.
inline RunResult Parallel(const std::vector<std::string>& overrides, const ParallelTrainerOptions& options = {},
                          TrainSummary* summary = nullptr) {
  const TrainConfig config = Load(overrides);
  const int world = config.parallel.world_size();
  RunResult r;
  std::mutex mu;
  comm::testing::RunRanks(world, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ParallelTrainerOptions o = options;
    o.base = QuietOptions();
    auto trainer = ParallelTrainer::Create(config, comm, o);
    ASSERT_TRUE(trainer.ok()) << "rank " << rank << ": " << trainer.status().ToString();
    TrainSummary s;
    Status st = (*trainer)->Run(&s);
    ASSERT_TRUE(st.ok()) << "rank " << rank << ": " << st.ToString();
    auto params = (*trainer)->LocalParameters();
    ASSERT_TRUE(params.ok()) << params.status().ToString();
    const int tp_rank = (*trainer)->mesh().coord().tp;
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) {
      r.losses = (*trainer)->losses();
      r.eval = s.eval;
      if (summary != nullptr) *summary = s;
    }
    for (auto& [name, local] : *params) {
      // Shards by tp rank; replicas (dp, the tied copy on the last stage)
      // must agree exactly.
      const std::string key = name + "#" + std::to_string(tp_rank);
      auto it = r.params.find(key);
      if (it == r.params.end()) {
        r.params.emplace(key, local);
        continue;
      }
      auto a = it->second.ToFloatVector(), b = local.ToFloatVector();
      ASSERT_EQ(a.size(), b.size()) << key;
      for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], b[k]) << "replicas of " << key << " differ at " << k;
    }
  });
  return r;
}

inline void ExpectMatches(const RunResult& ref, const RunResult& got, double loss_tol, const std::string& what) {
  ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], ref.losses[i], loss_tol * std::fabs(ref.losses[i]))
        << what << ": loss of step " << i + 1;
  }
}

// Compares the parallel run's parameters (shards per tp rank) with the
// single-process ones.
inline void ExpectParamsMatch(const RunResult& ref, const RunResult& got, int tp, const std::string& what, double atol, double rtol) {
  int compared = 0;
  for (const auto& [name, want] : ref.params) {
    Tensor full = Tensor::Zeros(want.shape(), DType::kF32);
    bool found = false;
    for (int r = 0; r < tp; ++r) {
      auto it = got.params.find(name + "#" + std::to_string(r));
      if (it == got.params.end()) continue;
      Place(full, it->second, r);
      found = true;
    }
    ASSERT_TRUE(found) << what << ": no rank holds " << name;
    auto a = full.ToFloatVector(), b = want.ToFloatVector();
    int bad = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::fabs(a[k] - b[k]) > atol + rtol * std::fabs(b[k]) && bad++ < 3) {
        ADD_FAILURE() << what << ": " << name << "[" << k << "] = " << a[k] << ", single process " << b[k];
      }
    }
    ++compared;
  }
  EXPECT_GT(compared, 10) << what;
}

}  // namespace tessera::train::parity
