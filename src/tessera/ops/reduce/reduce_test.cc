// Unit tests of sum / mean / max: known values, ties, accuracy of long
// sums, thread-count independence and argument errors.
#include "tessera/ops/reduce/reduce.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

const Impl kImpls[] = {Impl::kReference, Impl::kOptimized};

TEST(Reduce, KnownValues) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
    EXPECT_EQ(Sum(x).Item(), 21.0);
    EXPECT_EQ(Sum(x).dim(), 0);
    EXPECT_EQ(Sum(x, {0}).ToFloatVector(), (std::vector<float>{5, 7, 9}));
    Tensor rows = Sum(x, {1}, /*keepdim=*/true);
    EXPECT_EQ(rows.shape(), (Shape{2, 1}));
    EXPECT_EQ(rows.ToFloatVector(), (std::vector<float>{6, 15}));
    EXPECT_EQ(Mean(x, {-1}).ToFloatVector(), (std::vector<float>{2, 5}));
    EXPECT_FLOAT_EQ(Mean(x).Item(), 3.5f);
    Tensor y = Tensor::FromVector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
    EXPECT_EQ(Sum(y, {0, 2}).ToFloatVector(), (std::vector<float>{1 + 2 + 5 + 6, 3 + 4 + 7 + 8}));
    EXPECT_EQ(MeanBackward(Tensor::FromVector({2, 4}, {2}), {2, 3}, {1}, false).ToFloatVector(),
              (std::vector<float>{2.0f / 3, 2.0f / 3, 2.0f / 3, 4.0f / 3, 4.0f / 3, 4.0f / 3}));
    EXPECT_EQ(SumBackward(Tensor::FromVector({1, 2, 3}, {1, 3}), {2, 3}, {0}, true).ToFloatVector(),
              (std::vector<float>{1, 2, 3, 1, 2, 3}));
  }
}

TEST(Reduce, MaxValuesIndicesAndTies) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor x = Tensor::FromVector({3, 1, 3, -2, 7, 7}, {2, 3});
    MaxResult r = Max(x, 1);
    EXPECT_EQ(r.values.ToFloatVector(), (std::vector<float>{3, 7}));
    EXPECT_EQ(r.indices.ToIntVector(), (std::vector<int64_t>{0, 1}));  // first index on ties
    MaxResult c = Max(x, 0, /*keepdim=*/true);
    EXPECT_EQ(c.values.shape(), (Shape{1, 3}));
    EXPECT_EQ(c.values.ToFloatVector(), (std::vector<float>{3, 7, 7}));
    EXPECT_EQ(c.indices.ToIntVector(), (std::vector<int64_t>{0, 1, 1}));
    Tensor g = MaxBackward(Tensor::FromVector({10, 20}, {2}), r.indices, {2, 3}, 1, false);
    EXPECT_EQ(g.ToFloatVector(), (std::vector<float>{10, 0, 0, 0, 20, 0}));
  }
}

TEST(Reduce, LongSumsStayAccurate) {
  Tensor ones = Tensor::Full({3000000}, 1.0);
  EXPECT_EQ(Sum(ones).Item(), 3000000.0);
  Tensor tenth = Tensor::Full({1000, 1000}, 0.1);
  EXPECT_NEAR(Sum(tenth).Item(), 100000.0, 1.0);
  Tensor cols = Sum(tenth, {0});
  for (float v : cols.ToFloatVector()) EXPECT_NEAR(v, 100.0f, 1e-3f);
}

TEST(Reduce, ResultsIndependentOfThreadCount) {
  Tensor x = Tensor::Empty({6, 70000});
  FillUniform(x, 9, -1, 1);
  Tensor y = Tensor::Empty({3, 20000, 5});
  FillUniform(y, 10, -1, 1);
  int saved = omp_get_max_threads();
  std::vector<std::vector<float>> results[2];
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    auto& out = results[threads - 1];
    out.push_back(Sum(x).ToFloatVector());
    out.push_back(Sum(x, {1}).ToFloatVector());
    out.push_back(Sum(x, {0}).ToFloatVector());
    out.push_back(Sum(y, {1}).ToFloatVector());
    out.push_back(Mean(y, {0, 1}).ToFloatVector());
  }
  omp_set_num_threads(saved);
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_EQ(results[0][i].size(), results[1][i].size());
    EXPECT_EQ(0, std::memcmp(results[0][i].data(), results[1][i].data(), results[0][i].size() * sizeof(float)))
        << "result " << i;
  }
}

TEST(Reduce, EmptyAndScalarTensors) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor empty = Tensor::Zeros({0, 5});
    EXPECT_EQ(Sum(empty, {0}).ToFloatVector(), (std::vector<float>(5, 0.0f)));
    EXPECT_EQ(Sum(empty).Item(), 0.0);
    EXPECT_EQ(Sum(empty, {1}).shape(), (Shape{0}));
    EXPECT_THROW(Mean(empty), OpError);
    Tensor s = Tensor::Scalar(3.0);
    EXPECT_EQ(Sum(s).Item(), 3.0);
    EXPECT_EQ(Mean(s).Item(), 3.0);
    EXPECT_EQ(SumBackward(Tensor::Scalar(2.0), {2, 2}, {}, false).ToFloatVector(), (std::vector<float>(4, 2.0f)));
  }
}

TEST(Reduce, RejectsBadArguments) {
  Tensor x = Tensor::Zeros({2, 3});
  EXPECT_THROW(Sum(x, {2}), OpError);
  EXPECT_THROW(Sum(x, {-3}), OpError);
  EXPECT_THROW(Sum(x, {1, -1}), OpError);
  EXPECT_THROW(Mean(Tensor::Zeros({3}, DType::kI64)), OpError);
  EXPECT_THROW(Max(x, 2), OpError);
  EXPECT_THROW(Max(Tensor::Zeros({2, 0}), 1), OpError);
  EXPECT_THROW(SumBackward(Tensor::Zeros({2}), {2, 3}, {1}, true), OpError);
  Tensor bad = Tensor::FromInts({0, 3}, {2});
  EXPECT_THROW(MaxBackward(Tensor::Zeros({2}), bad, {2, 3}, 1, false), OpError);
  EXPECT_THROW(MaxBackward(Tensor::Zeros({2}), Tensor::Zeros({2}), {2, 3}, 1, false), OpError);
  try {
    Sum(x, {5});
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("sum: axis 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::ops
