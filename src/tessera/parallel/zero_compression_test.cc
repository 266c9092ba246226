// ZeroOptimizer with compressed gradient reductions (comm/compress): a
// linear least-squares model trained on 2 ranks follows the uncompressed
// run's loss closely with int8 (stages 0 and 2), replicas stay identical,
// and the bytes counters show the compression.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/parallel/parallel_config.h"
#include "tessera/parallel/zero.h"

namespace tessera::parallel {
namespace {

constexpr int kOut = 8, kIn = 64, kBatch = 16, kSteps = 100;

float Target(int o, int i) { return std::sin(0.3f * o + 0.17f * i); }

// Loss per step (averaged over the ranks' batches), for one run.
struct TrainRun {
  std::vector<double> loss;
  ZeroCommBytes bytes;
  std::vector<float> final_w;
};

TrainRun Train(const std::string& compression, int stage) {
  const int world = 2;
  TrainRun out;
  out.loss.assign(kSteps, 0.0);
  std::vector<std::vector<float>> finals(world);
  std::mutex mu;
  comm::testing::RunRanks(world, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    Tensor w = Tensor::FromVector(std::vector<float>(kOut * kIn, 0.0f), {kOut, kIn});
    w.set_requires_grad(true);
    ZeroBucketSpec bucket{"w", {{"w", w, 0.0, true, {}, {}}}, &comm};
    ZeroOptions options;
    options.stage = stage;
    options.adam.beta2 = 0.99;
    options.grad_compression = ParseGradCompressionPolicy(compression).value();
    auto zero = ZeroOptimizer::Create({bucket}, options);
    ASSERT_TRUE(zero.ok()) << zero.status().ToString();
    std::mt19937 rng(17 + rank);
    std::normal_distribution<float> nd;
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE((*zero)->GatherAll().ok());
      const std::vector<float> wv = w.ToFloatVector();
      std::vector<float> grad(kOut * kIn, 0.0f);
      double loss = 0;
      for (int b = 0; b < kBatch; ++b) {
        std::vector<float> x(kIn);
        for (float& v : x) v = nd(rng);
        for (int o = 0; o < kOut; ++o) {
          double pred = 0, target = 0;
          for (int i = 0; i < kIn; ++i) {
            pred += wv[o * kIn + i] * x[i];
            target += Target(o, i) * x[i];
          }
          const double e = pred - target;
          loss += e * e / (kBatch * kOut);
          for (int i = 0; i < kIn; ++i) grad[o * kIn + i] += static_cast<float>(2 * e * x[i] / (kBatch * kOut));
        }
      }
      w.set_grad(Tensor::FromVector(grad, {kOut, kIn}));
      ASSERT_TRUE((*zero)->ReduceGradients(0).ok());
      ASSERT_TRUE((*zero)->Step(0.02).ok());
      {
        std::lock_guard<std::mutex> lock(mu);
        out.loss[step] += loss / world;
      }
    }
    ASSERT_TRUE((*zero)->GatherAll().ok());
    finals[rank] = w.ToFloatVector();
    if (rank == 0) out.bytes = (*zero)->GradCommBytes();
  });
  EXPECT_EQ(finals[0], finals[1]) << compression << ": replicas differ";
  out.final_w = finals[0];
  return out;
}

TEST(ZeroCompression, Int8FollowsUncompressed) {
  for (int stage : {0, 2}) {
    SCOPED_TRACE(stage);
    const TrainRun exact = Train("none", stage);
    const TrainRun int8 = Train("int8", stage);
    ASSERT_LT(exact.loss.back(), 0.1 * exact.loss.front()) << "the model must learn";
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(int8.loss[s], exact.loss[s], 0.03 * exact.loss[s] + 1e-3) << "step " << s;
    }
    EXPECT_EQ(exact.bytes.sent, exact.bytes.fp32_equivalent);
    EXPECT_GT(exact.bytes.sent, 0u);
    EXPECT_EQ(int8.bytes.fp32_equivalent, exact.bytes.fp32_equivalent);
    const double ratio = double(int8.bytes.sent) / int8.bytes.fp32_equivalent;
    EXPECT_GT(ratio, 0.25);
    EXPECT_LT(ratio, 0.27);
  }
}

// Per-bucket rules (glob=codec, first match wins) pick each bucket's codec.
TEST(ZeroCompression, PerBucketRules) {
  const TrainRun exact = Train("none", 0);
  const TrainRun kept = Train("int8, w=none", 0);  // the only bucket, "w", stays exact
  EXPECT_EQ(kept.loss, exact.loss);
  EXPECT_EQ(kept.bytes.sent, exact.bytes.sent);
  const TrainRun ruled = Train("none, x*=bf16, w*=int8", 0);  // default none, "w" matches the second rule
  const double ratio = double(ruled.bytes.sent) / ruled.bytes.fp32_equivalent;
  EXPECT_GT(ratio, 0.25);
  EXPECT_LT(ratio, 0.27);

  auto p = ParseGradCompressionPolicy("int8, embed=none, blocks.*.experts=topk:0.05, blocks.1*=bf16");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->For("embed").codec, comm::compress::Codec::kNone);
  EXPECT_EQ(p->For("blocks.3.experts").codec, comm::compress::Codec::kTopK);
  EXPECT_EQ(p->For("blocks.12").codec, comm::compress::Codec::kBf16);
  EXPECT_EQ(p->For("blocks.3").codec, comm::compress::Codec::kInt8);
  EXPECT_EQ(p->For("head").codec, comm::compress::Codec::kInt8);
  EXPECT_TRUE(p->any_enabled());
  auto only_rules = ParseGradCompressionPolicy("head=fp8");
  ASSERT_TRUE(only_rules.ok());
  EXPECT_EQ(only_rules->For("embed").codec, comm::compress::Codec::kNone);
  EXPECT_EQ(only_rules->For("head").codec, comm::compress::Codec::kFp8);
  EXPECT_TRUE(only_rules->any_enabled());
  EXPECT_FALSE(ParseGradCompressionPolicy("none, head=none")->any_enabled());
  for (const char* bad : {"int8, embed", "int8, =none", "int8, embed=int4", "int3"}) {
    auto b = ParseGradCompressionPolicy(bad);
    EXPECT_FALSE(b.ok()) << bad;
  }
  EXPECT_NE(ParseGradCompressionPolicy("int8, embed=int4").status().ToString().find("'embed'"), std::string::npos);
}

TEST(ZeroCompression, TopKAndFp8Learn) {
  for (const char* c : {"fp8", "bf16", "topk:0.1"}) {
    const TrainRun r = Train(c, 1);
    EXPECT_LT(r.loss.back(), 0.2 * r.loss.front()) << c;
  }
}

}  // namespace
}  // namespace tessera::parallel

namespace tessera::parallel {
namespace {

TEST(ZeroCompression, ConfigValidation) {
  models::GptConfig m;
  ParallelConfig c;
  c.dp = 2;
  ASSERT_TRUE(ValidateParallelConfig(c, m, 8, 2).ok()) << ValidateParallelConfig(c, m, 8, 2).ToString();
  for (const char* ok : {"none", "bf16", "fp16", "int8", "fp8", "topk:0.01"}) {
    c.grad_compression = ok;
    EXPECT_TRUE(ValidateParallelConfig(c, m, 8, 2).ok()) << ok;
  }
  c.grad_compression = "int4";
  Status st = ValidateParallelConfig(c, m, 8, 2);
  EXPECT_NE(st.ToString().find("parallel.grad_compression"), std::string::npos) << st.ToString();
  c.grad_compression = "int8";
  c.precision = "fp16";
  st = ValidateParallelConfig(c, m, 8, 2);
  EXPECT_NE(st.ToString().find("train.precision = 'fp16'"), std::string::npos) << st.ToString();
  c.grad_compression = "none, head=int8";  // a rule alone enables compression
  st = ValidateParallelConfig(c, m, 8, 2);
  EXPECT_NE(st.ToString().find("train.precision = 'fp16'"), std::string::npos) << st.ToString();
  c.grad_compression = "int8, head=int4";
  c.precision = "fp32";
  st = ValidateParallelConfig(c, m, 8, 2);
  EXPECT_NE(st.ToString().find("parallel.grad_compression"), std::string::npos) << st.ToString();
  c.grad_compression = "none";
  EXPECT_TRUE(ValidateParallelConfig(c, m, 8, 2).ok());
}

}  // namespace
}  // namespace tessera::parallel
