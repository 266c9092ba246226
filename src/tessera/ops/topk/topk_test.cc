// Top-k: parity cases on tie-free inputs (values and their gradient),
// ties resolved to the lower index, and argument errors.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/testing/parity.h"
#include "tessera/ops/topk/topk.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops::testing {
namespace {

// Each row is a random permutation of n evenly spaced values in (-1, 1):
// distinct in every dtype for n <= 64 and farther apart than the FD step.
Tensor TieFree(const Shape& shape, DType dtype, uint64_t seed) {
  const int64_t n = shape.back(), rows = NumElements(shape) / n;
  std::vector<float> values(NumElements(shape));
  std::vector<int64_t> perm(n);
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = n - 1; i > 0; --i) {
      int64_t j = std::min<int64_t>(i, static_cast<int64_t>(UniformAt(seed, r * n + i) * (i + 1)));
      std::swap(perm[i], perm[j]);
    }
    for (int64_t i = 0; i < n; ++i) values[r * n + i] = (2.0f * perm[i] + 1.0f) / n - 1.0f;
  }
  return Tensor::FromVector(values, shape, dtype);
}

ParityCase MakeCase(Shape shape, int64_t k) {
  ParityCase c;
  c.op = "topk";
  c.name = fmt::format("{} k={}", ShapeString(shape), k);
  c.make_inputs = [shape](DType dtype, uint64_t seed) { return Tensors{TieFree(shape, dtype, seed)}; };
  c.forward = [k](const Tensors& in) {
    TopKResult r = TopK(in[0], k);
    return Tensors{r.values, r.indices};
  };
  c.backward = [](const Tensors& in, const Tensors& out, const Tensors& gout) {
    return Tensors{TopKBackward(gout[0], out[1], in[0].shape())};
  };
  c.differentiable_outputs = {true, false};
  c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      MakeCase({1}, 1),     MakeCase({7}, 3),         MakeCase({4, 8}, 1),   MakeCase({3, 5, 16}, 16),
      MakeCase({6, 33}, 0), MakeCase({2048, 16}, 2),  MakeCase({64, 60}, 8),   MakeCase({5, 60}, 20),
      MakeCase({3, 40}, 40),
  };
}

TEST(TopK, DescendingWithTiesToLowerIndex) {
  Tensor x = Tensor::FromVector({1, 3, 3, 2, 3, 0}, {1, 6});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    for (int64_t k : {1, 2, 4, 6}) {
      TopKResult r = TopK(x, k);
      std::vector<int64_t> expect_idx = {1, 2, 4, 3, 0, 5};
      std::vector<float> expect_val = {3, 3, 3, 2, 1, 0};
      expect_idx.resize(k);
      expect_val.resize(k);
      EXPECT_EQ(r.indices.ToIntVector(), expect_idx) << k;
      EXPECT_EQ(r.values.ToFloatVector(), expect_val) << k;
    }
    Tensor g = TopKBackward(Tensor::FromVector({10, 20}, {1, 2}), Tensor::FromInts({4, 1}, {1, 2}), {1, 6});
    EXPECT_EQ(g.ToFloatVector(), (std::vector<float>{0, 20, 0, 0, 10, 0}));
  }
}

TEST(TopK, TiesOnTheSortingPath) {
  // k above the insertion limit: value j % 5 at index j; ties keep index order.
  const int64_t n = 40, k = 20;
  std::vector<float> x(n);
  for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>(j % 5);
  std::vector<int64_t> expect;
  for (int v = 4; v >= 0 && static_cast<int64_t>(expect.size()) < k; --v) {
    for (int64_t j = v; j < n && static_cast<int64_t>(expect.size()) < k; j += 5) expect.push_back(j);
  }
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    EXPECT_EQ(TopK(Tensor::FromVector(x, {1, n}), k).indices.ToIntVector(), expect);
  }
}

TEST(TopK, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 4});
  EXPECT_THROW(TopK(x, 5), OpError);
  EXPECT_THROW(TopK(x, -1), OpError);
  EXPECT_THROW(TopK(Tensor::FromInts({1, 2}, {2}), 1), OpError);
  EXPECT_THROW(TopKBackward(Tensor::Zeros({2, 1}), Tensor::FromInts({0, 4}, {2, 1}), {2, 4}), OpError);
  EXPECT_THROW(TopKBackward(Tensor::Zeros({2, 1}), Tensor::FromInts({0, 1}, {2, 1}), {3, 4}), OpError);
}

}  // namespace
}  // namespace tessera::ops::testing
