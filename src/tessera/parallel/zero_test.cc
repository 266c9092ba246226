// ZeroOptimizer against optim::AdamW on one process: for every ZeRO stage and
// group sizes 1–4 (threads as ranks), each rank holds the same parameters and
// its own gradients; after the reduction and Step every rank's parameters
// equal AdamW's on the averaged gradients, a parameter that has no gradient
// on any rank is left alone, and the global norm matches.
#include "tessera/parallel/zero.h"

#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/tensor/rng.h"

namespace tessera::parallel {
namespace {

struct Problem {
  std::vector<Shape> shapes = {{7, 5}, {5}, {3, 11}, {13}};
  std::vector<double> decay = {0.1, 0.0, 0.1, 0.0};
  // Parameter 3 gets no gradient anywhere; parameter 2 only on rank 0.
  bool HasGrad(size_t i, int rank) const { return i != 3 && (i != 2 || rank == 0); }

  Tensor Init(size_t i) const {
    std::vector<float> v(static_cast<size_t>(NumElements(shapes[i])));
    for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(0.37f * (k + 1) + i);
    return Tensor::FromVector(v, shapes[i]);
  }
  Tensor Grad(size_t i, int rank, int step) const {
    std::vector<float> v(static_cast<size_t>(NumElements(shapes[i])));
    for (size_t k = 0; k < v.size(); ++k) v[k] = std::cos(0.11f * (k + 3) * (rank + 1) + step + i) * (rank + 1);
    return Tensor::FromVector(v, shapes[i]);
  }
};

constexpr int kSteps = 3;

// The expected parameters: AdamW on one process with the mean gradient.
std::vector<std::vector<float>> Expected(const Problem& pb, int world, double* norm_of_last) {
  std::vector<optim::ParamGroup> groups;
  std::vector<Tensor> params;
  for (size_t i = 0; i < pb.shapes.size(); ++i) {
    Tensor p = pb.Init(i);
    p.set_requires_grad(true);
    params.push_back(p);
    groups.push_back({{{fmt::format("p{}", i), p}}, pb.decay[i], 1.0});
  }
  optim::AdamW adam(groups, {});
  for (int step = 0; step < kSteps; ++step) {
    double sq = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      int contributors = 0;
      std::vector<float> sum(static_cast<size_t>(params[i].numel()), 0.0f);
      for (int r = 0; r < world; ++r) {
        if (!pb.HasGrad(i, r)) continue;
        ++contributors;
        auto g = pb.Grad(i, r, step).ToFloatVector();
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += g[k];
      }
      params[i].ZeroGrad();
      if (contributors == 0) continue;
      for (float& x : sum) {
        x /= world;
        sq += static_cast<double>(x) * x;
      }
      params[i].set_grad(Tensor::FromVector(sum, params[i].shape()));
    }
    *norm_of_last = std::sqrt(sq);
    adam.Step(1e-2);
  }
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(p.ToFloatVector());
  return out;
}

void CheckStage(int stage, int world) {
  Problem pb;
  double expected_norm = 0;
  const auto expected = Expected(pb, world, &expected_norm);
  comm::testing::RunRanks(world, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ZeroBucketSpec a{"a", {}, &comm}, b{"b", {}, &comm};
    std::vector<Tensor> params;
    for (size_t i = 0; i < pb.shapes.size(); ++i) {
      Tensor p = pb.Init(i);
      p.set_requires_grad(true);
      params.push_back(p);
      (i < 2 ? a : b).params.push_back({fmt::format("p{}", i), p, pb.decay[i], true, {}, {}});
    }
    ZeroOptions options;
    options.stage = stage;
    auto zero = ZeroOptimizer::Create({a, b}, options);
    ASSERT_TRUE(zero.ok()) << zero.status().ToString();
    double norm = 0;
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE((*zero)->GatherAll().ok());
      for (size_t i = 0; i < params.size(); ++i) {
        if (pb.HasGrad(i, rank)) params[i].set_grad(pb.Grad(i, rank, step));
      }
      for (int bucket : {1, 0}) ASSERT_TRUE((*zero)->ReduceGradients(bucket).ok());
      ASSERT_TRUE((*zero)->FinishReductions().ok());
      double sq = (*zero)->SquaredGradNorm();
      ASSERT_TRUE(comm.AllReduce(&sq, &sq, 1, comm::DataType::kFloat64, comm::ReduceOp::kSum).ok());
      norm = std::sqrt(sq);
      ASSERT_TRUE((*zero)->Step(1e-2).ok());
      for (int bucket : {0, 1}) (*zero)->Release(bucket);
    }
    EXPECT_NEAR(norm, expected_norm, 1e-5 * expected_norm) << "stage " << stage << " world " << world;
    ASSERT_TRUE((*zero)->GatherAll().ok());
    for (size_t i = 0; i < params.size(); ++i) {
      auto got = params[i].ToFloatVector();
      ASSERT_EQ(got.size(), expected[i].size());
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], expected[i][k], 1e-6f + 1e-5f * std::fabs(expected[i][k]))
            << "stage " << stage << " world " << world << " rank " << rank << " param " << i << " element " << k;
      }
    }
    ZeroMemory m = (*zero)->Memory();
    const int64_t total = 35 + 5 + 33 + 13;
    if (stage >= 1 && world > 1) {
      EXPECT_LT(m.optimizer_state, 2 * total * 4) << "stage " << stage << " shards the optimizer state";
    } else {
      EXPECT_EQ(m.optimizer_state, 2 * total * 4);
    }
  });
}

TEST(ZeroOptimizer, Stage0MatchesAdamW) {
  for (int world : {1, 2, 3}) CheckStage(0, world);
}
TEST(ZeroOptimizer, Stage1MatchesAdamW) {
  for (int world : {1, 2, 4}) CheckStage(1, world);
}
TEST(ZeroOptimizer, Stage2MatchesAdamW) {
  for (int world : {2, 3}) CheckStage(2, world);
}
TEST(ZeroOptimizer, Stage3MatchesAdamW) {
  for (int world : {1, 2, 4}) CheckStage(3, world);
}

TEST(ZeroOptimizer, BadStageAndDtypeAreErrors) {
  comm::testing::RunRanks(1, comm::testing::TestOptions(), [&](int, comm::Communicator& comm) {
    ZeroOptions o;
    o.stage = 4;
    EXPECT_NE(ZeroOptimizer::Create({}, o).status().ToString().find("parallel.zero = 4"), std::string::npos);
    ZeroBucketSpec spec{"blocks.0", {{"w", Tensor::Zeros({2, 2}, DType::kBF16), 0.0, true, {}, {}}}, &comm};
    auto z = ZeroOptimizer::Create({spec}, {});
    ASSERT_FALSE(z.ok());
    EXPECT_NE(z.status().ToString().find("'w' of bucket 'blocks.0'"), std::string::npos) << z.status().ToString();
  });
}

}  // namespace
}  // namespace tessera::parallel
