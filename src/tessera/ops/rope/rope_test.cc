// RoPE: parity cases (odd T, offsets, Dh 2..128), a known rotation, the
// inverse property, and argument errors.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/rope/rope.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

ParityCase MakeCase(Shape shape, int64_t offset, float base = 10000.0f, bool f16 = false) {
  ParityCase c;
  c.op = "rope";
  c.name = fmt::format("{} offset {} base {}", ShapeString(shape), offset, base);
  c.make_inputs = [shape](DType dtype, uint64_t seed) { return Tensors{RandomTensor(shape, dtype, seed)}; };
  c.forward = [=](const Tensors& in) { return Tensors{Rope(in[0], base, offset)}; };
  c.backward = [=](const Tensors&, const Tensors&, const Tensors& gout) {
    return Tensors{RopeBackward(gout[0], base, offset)};
  };
  if (f16) c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      MakeCase({1, 1, 1, 2}, 0),          MakeCase({2, 3, 5, 8}, 0, 10000.0f, true),
      MakeCase({1, 2, 7, 16}, 13, 500.0f), MakeCase({2, 2, 33, 64}, 1000),
      MakeCase({8, 4, 64, 32}, 0),         MakeCase({1, 1, 3, 128}, 4096, 1e6f),
  };
}

TEST(Rope, KnownRotationAndInverse) {
  // Dh = 2: the pair rotates by position · base^0 = position radians.
  Tensor x = Tensor::FromVector({1, 0, 1, 0, 0, 1}, {1, 1, 3, 2});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    std::vector<float> y = Rope(x, 10000.0f, 1).ToFloatVector();  // positions 1, 2, 3
    EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);
    EXPECT_NEAR(y[1], std::sin(1.0), 1e-6);
    EXPECT_NEAR(y[2], std::cos(2.0), 1e-6);
    EXPECT_NEAR(y[3], std::sin(2.0), 1e-6);
    EXPECT_NEAR(y[4], -std::sin(3.0), 1e-6);
    EXPECT_NEAR(y[5], std::cos(3.0), 1e-6);
    Tensor big = RandomTensor({2, 3, 40, 64}, DType::kF32, 5);
    Tensor back = RopeBackward(Rope(big, 10000.0f, 7), 10000.0f, 7);
    EXPECT_TRUE(AllClose(back, big, {1e-5, 1e-5}, "inverse").ok());
  }
}

TEST(Rope, CacheServesGrowingSequences) {
  // Longer sequences after shorter ones (the table cache grows) still match
  // the reference.
  // Offsets past the cached range use a table of their own.
  const std::pair<int64_t, int64_t> cases[] = {{4, 5}, {300, 5}, {2000, 5}, {7, 100000}, {70, 65500}};
  for (auto [t, offset] : cases) {
    Tensor x = RandomTensor({1, 2, t, 16}, DType::kF32, t);
    Tensor opt = Rope(x, 10000.0f, offset);
    ScopedImpl scope(Impl::kReference);
    Tensor ref = Rope(x, 10000.0f, offset);
    EXPECT_TRUE(AllClose(opt, ref, {1e-5, 1e-5}, "rope").ok()) << t << " " << offset;
  }
}

TEST(Rope, RejectsBadArguments) {
  EXPECT_THROW(Rope(Tensor::Zeros({1, 1, 2, 3})), OpError);  // odd Dh
  EXPECT_THROW(Rope(Tensor::Zeros({1, 2, 4})), OpError);     // rank 3
  EXPECT_THROW(Rope(Tensor::Zeros({1, 1, 2, 4}), 10000.0f, -1), OpError);
  EXPECT_THROW(Rope(Tensor::FromInts({1, 2}, {1, 1, 1, 2})), OpError);
}

}  // namespace
}  // namespace tessera::ops::testing
