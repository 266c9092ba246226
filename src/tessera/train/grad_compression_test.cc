// Training with parallel.grad_compression (comm/compress through
// ZeroOptimizer): on 2 data-parallel ranks the int8 run's losses follow the
// exact run's, the replicas stay identical (checked by parity::Parallel),
// and the summary counts the gradient bytes (int8 ≈ 1/4 of fp32's).
#include <gtest/gtest.h>

#include "tessera/train/parity_test_util.h"

namespace tessera::train {
namespace {

using namespace parity;

TEST(GradCompression, Int8FollowsExactAndCountsBytes) {
  TrainSummary exact_summary, int8_summary;
  const RunResult exact = Parallel({"parallel.dp=2", "parallel.zero=1"}, {}, &exact_summary);
  const RunResult int8 =
      Parallel({"parallel.dp=2", "parallel.zero=1", "parallel.grad_compression=int8"}, {}, &int8_summary);
  ASSERT_EQ(exact.losses.size(), int8.losses.size());
  for (size_t s = 0; s < exact.losses.size(); ++s) {
    EXPECT_NEAR(int8.losses[s], exact.losses[s], 0.02 * exact.losses[s]) << "step " << s;
  }
  const auto& pe = exact_summary.parallel;
  const auto& pi = int8_summary.parallel;
  EXPECT_EQ(pe["grad_compression"], "none");
  EXPECT_EQ(pi["grad_compression"], "int8");
  EXPECT_GT(pe["grad_bytes_sent"].get<int64_t>(), 0);
  EXPECT_EQ(pe["grad_bytes_sent"], pe["grad_bytes_fp32_equivalent"]);
  EXPECT_EQ(pi["grad_bytes_fp32_equivalent"], pe["grad_bytes_fp32_equivalent"]);
  EXPECT_GT(pi["grad_bytes_ratio"].get<double>(), 0.25);
  EXPECT_LT(pi["grad_bytes_ratio"].get<double>(), 0.27);
  EXPECT_GT(pi["ranks"][1]["grad_bytes_sent"].get<int64_t>(), 0);
}

TEST(GradCompression, ZeroStage2TopKTrains) {
  TrainSummary s;
  const RunResult r = Parallel({"parallel.dp=2", "parallel.zero=2", "parallel.grad_compression=topk:0.01"}, {}, &s);
  ASSERT_FALSE(r.losses.empty());
  // reduce-scatter: (P-1)·8k bytes against (P-1)·4·shard = 2n for fp32, 0.04 at k = n/100
  EXPECT_LT(s.parallel["grad_bytes_ratio"].get<double>(), 0.1);
  EXPECT_TRUE(std::isfinite(r.losses.back()));
}

// Per-bucket rules reach the trainer's buckets; a rule that names no bucket
// on any rank is a clear error (a typo would otherwise be silent).
TEST(GradCompression, PerBucketRulesAndUnmatchedRule) {
  TrainSummary s;
  const RunResult r =
      Parallel({"parallel.dp=2", "parallel.grad_compression=\"none, blocks.*=int8\""}, {}, &s);
  ASSERT_FALSE(r.losses.empty());
  TrainSummary all;
  Parallel({"parallel.dp=2", "parallel.grad_compression=int8"}, {}, &all);
  const double ratio = s.parallel["grad_bytes_ratio"].get<double>();
  const double all_int8 = all.parallel["grad_bytes_ratio"].get<double>();
  EXPECT_GT(ratio, all_int8 + 0.003) << "embed and head (no rule: the default, none) must stay exact";
  EXPECT_LT(ratio, 0.5) << "the blocks (rule blocks.*=int8) must be compressed";

  TrainConfig config = Load({"parallel.dp=2", "parallel.grad_compression=\"int8, embd=none\""});
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int, comm::Communicator& comm) {
    auto t = ParallelTrainer::Create(config, comm, {});
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().ToString().find("'embd' matches no gradient bucket"), std::string::npos)
        << t.status().ToString();
  });
}

TEST(GradCompression, Fp16PrecisionIsRefused) {
  auto c = TrainConfig::Load(ConfigPath(), {"parallel.grad_compression=int8", "train.precision=fp16"});
  const Status st = c.ok() ? parallel::ValidateParallelConfig(c->parallel, c->model, c->train.global_batch,
                                                               c->train.micro_batch)
                           : c.status();
  EXPECT_NE(st.ToString().find("grad_compression"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tessera::train
