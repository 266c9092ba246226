// Parallel training against the single-process Trainer (the oracle): for a
// matrix of meshes — dp, tp (+ sequence parallel), pp (each schedule), ep,
// alone and combined up to 8 ranks; ZeRO 0–3; recompute; accumulation over
// micro-batches — every step's loss and the final parameters of a small MoE
// GPT match the single-process run of the same config. Ranks are threads
// (each with its own tape and communicator).
//
// Tolerances (documented in docs/parallel-training.md): fp32 losses within
// 1e-5 relative; parameters within 2e-5 + 2e-4·|p| (AdamW normalizes the
// update, so reordered sums in gradients of ~1e-7 move an element by up to
// a few lr·1e-3); bf16 losses within 2e-2 relative.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/hal/threading.h"
#include "tessera/train/parallel_trainer.h"
#include "tessera/train/trainer.h"

namespace tessera::train {
namespace {

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

std::string ConfigPath() {
  static std::string path = [] {
    std::string p = std::filesystem::temp_directory_path() / fmt::format("tessera_parity_{}.toml", ::getpid());
    std::ofstream(p) << kConfig;
    return p;
  }();
  return path;
}

TrainConfig Load(const std::vector<std::string>& overrides) {
  auto c = TrainConfig::Load(ConfigPath(), overrides);
  TESSERA_CHECK_OK(c.status());
  return *c;
}

TrainerOptions QuietOptions() {
  TrainerOptions o;
  static FILE* devnull = std::fopen("/dev/null", "w");
  o.out = devnull;
  o.force_plain = true;
  o.write_records = false;
  return o;
}

RunResult SingleProcess(const std::vector<std::string>& overrides) {
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
void Place(Tensor& full, const Tensor& local, int tp_rank) {
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

RunResult Parallel(const std::vector<std::string>& overrides) {
  const TrainConfig config = Load(overrides);
  const int world = config.parallel.world_size();
  RunResult r;
  std::mutex mu;
  comm::testing::RunRanks(world, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ParallelTrainerOptions o;
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

void ExpectMatches(const RunResult& ref, const RunResult& got, double loss_tol, const std::string& what) {
  ASSERT_EQ(got.losses.size(), ref.losses.size()) << what;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], ref.losses[i], loss_tol * std::fabs(ref.losses[i]))
        << what << ": loss of step " << i + 1;
  }
}

// Compares the parallel run's parameters (shards per tp rank) with the
// single-process ones.
void ExpectParamsMatch(const RunResult& ref, const RunResult& got, int tp, const std::string& what, double atol, double rtol) {
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

struct Case {
  std::string name;
  std::vector<std::string> overrides;
};

class ParallelParity : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelParity, LossesAndParametersMatchSingleProcess) {
  const Case& c = GetParam();
  static std::map<std::string, RunResult> refs;  // by the overrides that change the math
  std::vector<std::string> ref_overrides;
  // The single-process reference takes every override that changes the
  // math (not the layout, recompute or where optimizer state lives).
  for (const std::string& o : c.overrides) {
    const bool layout = o.rfind("parallel.", 0) == 0 || o.rfind("train.recompute", 0) == 0 ||
                        o.rfind("train.offload_optimizer", 0) == 0;
    if (!layout) ref_overrides.push_back(o);
  }
  std::string key = fmt::format("{}", fmt::join(ref_overrides, ","));
  if (!refs.count(key)) refs[key] = SingleProcess(ref_overrides);
  const RunResult& ref = refs[key];
  RunResult got = Parallel(c.overrides);
  const TrainConfig config = Load(c.overrides);
  const bool bf16 = config.parallel.precision == "bf16";
  ExpectMatches(ref, got, bf16 ? 2e-2 : 1e-5, c.name);
  if (!bf16) ExpectParamsMatch(ref, got, config.parallel.tp, c.name, 2e-5, 2e-4);
  EXPECT_NEAR(got.eval.loss, ref.eval.loss, (bf16 ? 2e-2 : 1e-4) * ref.eval.loss) << c.name << ": eval loss";
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, ParallelParity,
    ::testing::Values(
        Case{"dp2", {"parallel.dp=2"}}, Case{"dp4_zero1", {"parallel.dp=4", "parallel.zero=1"}},
        Case{"dp2_zero2", {"parallel.dp=2", "parallel.zero=2"}}, Case{"dp2_zero3", {"parallel.dp=2", "parallel.zero=3"}},
        Case{"tp2", {"parallel.tp=2"}}, Case{"tp4", {"parallel.tp=4"}},
        Case{"tp2_sp", {"parallel.tp=2", "parallel.sequence_parallel=true"}},
        Case{"pp2_1f1b", {"parallel.pp=2"}}, Case{"pp2_gpipe", {"parallel.pp=2", "parallel.schedule=\"gpipe\""}},
        Case{"pp4", {"parallel.pp=4"}},
        Case{"pp2_interleaved", {"parallel.pp=2", "parallel.schedule=\"interleaved\"", "parallel.virtual_stages=2"}},
        Case{"dp2_ep2", {"parallel.dp=2", "parallel.ep=2"}},
        Case{"dp2_ep2_capacity", {"parallel.dp=2", "parallel.ep=2", "model.moe.capacity_factor=1.0"}},
        Case{"tp2_dropout", {"parallel.tp=2", "parallel.sequence_parallel=true", "model.dropout=0.1"}},
        Case{"pp2_dp2_dropout", {"parallel.pp=2", "parallel.dp=2", "model.dropout=0.1"}},
        Case{"dp4_ep4_zero2", {"parallel.dp=4", "parallel.ep=4", "parallel.zero=2"}},
        Case{"recompute_full", {"parallel.dp=2", "train.recompute=\"full\""}},
        Case{"recompute_selective", {"parallel.tp=2", "train.recompute=\"selective\""}},
        Case{"dp2_tp2_pp2_ep2_zero1", {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.ep=2",
                                       "parallel.zero=1", "parallel.sequence_parallel=true"}},
        Case{"dp2_pp2_tp2_no_accumulation", {"parallel.dp=2", "parallel.pp=2", "parallel.tp=2", "train.micro_batch=4"}},
        Case{"dp2_offload", {"parallel.dp=2", "parallel.zero=1", "train.offload_optimizer=true"}},
        Case{"dp2_bf16", {"parallel.dp=2", "train.precision=\"bf16\""}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ParallelTrainer, Fp16LossScalingSkipsAnOverflowingStep) {
  // fp16 compute with dynamic loss scaling; an inf injected into the
  // gradients at step 2 must skip that update on every rank and halve the
  // scale, and training goes on with finite losses and parameters.
  const TrainConfig config = Load({"parallel.dp=2", "train.precision=\"fp16\"", "train.steps=4",
                                   "train.loss_scale=1024"});
  std::mutex mu;
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ParallelTrainerOptions o;
    o.base = QuietOptions();
    o.inject_overflow_step = 2;
    auto trainer = ParallelTrainer::Create(config, comm, o);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    TrainSummary s;
    Status st = (*trainer)->Run(&s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(s.skipped_steps, 1) << "rank " << rank;
    EXPECT_EQ((*trainer)->loss_scale(), 512.0) << "rank " << rank;
    for (double loss : (*trainer)->losses()) EXPECT_TRUE(std::isfinite(loss));
    auto params = (*trainer)->LocalParameters();
    ASSERT_TRUE(params.ok());
    for (auto& [name, t] : *params) {
      for (float v : t.ToFloatVector()) ASSERT_TRUE(std::isfinite(v)) << name;
    }
  });
  // The same run without the overflow matches the fp32 run loosely (fp16
  // activations).
  RunResult fp32 = SingleProcess({"train.steps=4"});
  RunResult fp16 = Parallel({"parallel.dp=2", "train.precision=\"fp16\"", "train.steps=4", "train.loss_scale=1024"});
  ExpectMatches(fp32, fp16, 2e-2, "fp16 vs fp32");
}

TEST(ParallelTrainer, DeviceMemoryLimitOffloadsOptimizerStateOrStops) {
  // A budget below the training state moves the optimizer state to the host
  // tier (the summary shows it there); one below parameters + gradients is
  // a clear error before training starts.
  const TrainConfig fits = Load({"parallel.dp=2", "train.device_memory_limit=600000", "train.steps=1"});
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ParallelTrainerOptions o;
    o.base = QuietOptions();
    auto trainer = ParallelTrainer::Create(fits, comm, o);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    TrainSummary s;
    ASSERT_TRUE((*trainer)->Run(&s).ok());
    const auto& r = s.parallel["ranks"][rank];
    EXPECT_EQ(r["optimizer_state_bytes"].get<int64_t>(), 0);
    EXPECT_GT(r["offloaded_optimizer_state_bytes"].get<int64_t>(), 0);
  });
  const TrainConfig tiny = Load({"parallel.dp=2", "train.device_memory_limit=1000"});
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int, comm::Communicator& comm) {
    auto trainer = ParallelTrainer::Create(tiny, comm, {});
    ASSERT_FALSE(trainer.ok());
    EXPECT_EQ(trainer.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(trainer.status().ToString().find("train.device_memory_limit = 1000"), std::string::npos)
        << trainer.status().ToString();
  });
}

TEST(ParallelTrainer, MismatchedMeshIsAClearError) {
  TrainConfig config = Load({"parallel.tp=2"});
  comm::testing::RunRanks(1, comm::testing::TestOptions(), [&](int, comm::Communicator& comm) {
    auto t = ParallelTrainer::Create(config, comm, {});
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().ToString().find("has 2 ranks but the job has 1"), std::string::npos) << t.status().ToString();
  });
  auto bad = TrainConfig::Load(ConfigPath(), {"parallel.tp=3"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("parallel.tp = 3 must divide model.n_heads = 4"), std::string::npos);
  bad = TrainConfig::Load(ConfigPath(), {"parallel.dp=2", "parallel.ep=4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("parallel.ep = 4 must divide parallel.dp = 2"), std::string::npos);
  bad = TrainConfig::Load(ConfigPath(), {"parallel.pp=8"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("model.n_layers = 4 is fewer than"), std::string::npos);
}

}  // namespace
}  // namespace tessera::train
