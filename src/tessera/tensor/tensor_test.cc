#include "tessera/tensor/tensor.h"

#include <gtest/gtest.h>

#include "tessera/tensor/rng.h"

namespace tessera {
namespace {

TEST(Tensor, FactoriesAndViews) {
  Tensor t = Tensor::FromVector({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.is_contiguous());
  Tensor tt = t.Transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.ToFloatVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(tt.Contiguous().ToFloatVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor s = t.Slice(1, 1, 3);
  EXPECT_EQ(s.ToFloatVector(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(t.Reshape({3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(t.Unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(t.Slice(0, 0, 1).Squeeze(0).ToFloatVector(), (std::vector<float>{0, 1, 2}));
  Tensor e = Tensor::FromVector({7, 8, 9}, {3}).Expand({2, 3});
  EXPECT_EQ(e.ToFloatVector(), (std::vector<float>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(t.Permute({1, 0}).ToFloatVector(), tt.ToFloatVector());
}

TEST(Tensor, DTypeConversion) {
  Tensor t = Tensor::FromVector({1.0f, 1.00390625f, -2.5f}, {3}, DType::kBF16);
  // 1.00390625 = 1 + 2^-8 is a tie between 1 and 1+2^-7 in bf16: rounds to even (1).
  EXPECT_EQ(t.ToFloatVector(), (std::vector<float>{1.0f, 1.0f, -2.5f}));
  Tensor f = t.To(DType::kF32);
  EXPECT_EQ(f.dtype(), DType::kF32);
  EXPECT_EQ(f.ToFloatVector(), (std::vector<float>{1.0f, 1.0f, -2.5f}));
  EXPECT_EQ(Tensor::FromInts({1, 2, 3}, {3}).ToIntVector(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Tensor, BroadcastShapes) {
  EXPECT_EQ(*BroadcastShapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  auto bad = BroadcastShapes({2, 3}, {4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2, 3]"), std::string::npos);
}

TEST(Rng, IndependentOfLayoutAndDeterministic) {
  Tensor a = Tensor::Empty({4, 8});
  FillNormal(a, 42, 0.0f, 1.0f);
  Tensor b = Tensor::Empty({32});
  FillNormal(b, 42, 0.0f, 1.0f);
  EXPECT_EQ(a.ToFloatVector(), b.ToFloatVector());
  Tensor c = Tensor::Empty({16});
  FillNormal(c, 42, 0.0f, 1.0f, 16);  // second half of the same stream
  auto bv = b.ToFloatVector();
  EXPECT_EQ(c.ToFloatVector(), std::vector<float>(bv.begin() + 16, bv.end()));
  Tensor big = Tensor::Empty({100000});
  FillUniform(big, 7, 0.0f, 1.0f);
  double mean = 0;
  for (float v : big.ToFloatVector()) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    mean += v;
  }
  EXPECT_NEAR(mean / 100000, 0.5, 0.01);
}

}  // namespace
}  // namespace tessera
