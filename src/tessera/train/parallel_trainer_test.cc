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
#include "tessera/train/parity_test_util.h"

namespace tessera::train {
namespace {

using namespace parity;

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

// The gradient communication's time and the part ranks waited for are
// reported; with dp 1 there is none (null fraction).
TEST(ParallelTrainer, ReportsHowMuchGradientCommunicationWasHidden) {
  TrainSummary dp2, dp1;
  Parallel({"parallel.dp=2"}, {}, &dp2);
  Parallel({"parallel.tp=2"}, {}, &dp1);
  const nlohmann::json& p = dp2.parallel;
  ASSERT_TRUE(p.contains("grad_comm_s") && p.contains("grad_comm_exposed_s")) << p.dump(1);
  EXPECT_GT(p["grad_comm_s"].get<double>(), 0.0);
  EXPECT_GE(p["grad_comm_exposed_s"].get<double>(), 0.0);
  ASSERT_TRUE(p["grad_comm_hidden_fraction"].is_number()) << p.dump(1);
  const double hidden = p["grad_comm_hidden_fraction"].get<double>();
  EXPECT_GE(hidden, 0.0);
  EXPECT_LE(hidden, 1.0);
  for (const auto& r : p["ranks"]) EXPECT_GT(r["grad_comm_s"].get<double>(), 0.0) << r.dump();
  EXPECT_EQ(dp1.parallel["grad_comm_s"].get<double>(), 0.0);
  EXPECT_TRUE(dp1.parallel["grad_comm_hidden_fraction"].is_null()) << dp1.parallel.dump(1);
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
