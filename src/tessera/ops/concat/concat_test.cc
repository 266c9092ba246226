// Concat / split: parity cases along every axis (each is the other's
// backward), known values, and shape/dtype errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/concat/concat.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

// Inputs: one tensor per size, all `shape` except `sizes[i]` on `axis`.
ParityCase ConcatCase(Shape shape, int axis, std::vector<int64_t> sizes) {
  ParityCase c;
  c.op = "concat";
  c.name = fmt::format("{} axis {} sizes {}", ShapeString(shape), axis, ShapeString(sizes));
  const int ax = axis < 0 ? axis + static_cast<int>(shape.size()) : axis;
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    Tensors in;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape s = shape;
      s[ax] = sizes[i];
      in.push_back(RandomTensor(s, dtype, seed + i));
    }
    return in;
  };
  c.forward = [axis](const Tensors& in) { return Tensors{Concat(in, axis)}; };
  c.backward = [axis, sizes](const Tensors&, const Tensors&, const Tensors& gout) {
    return Split(gout[0], sizes, axis);
  };
  c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

ParityCase SplitCase(Shape shape, int axis, std::vector<int64_t> sizes) {
  ParityCase c;
  c.op = "split";
  c.name = fmt::format("{} axis {} sizes {}", ShapeString(shape), axis, ShapeString(sizes));
  c.make_inputs = [=](DType dtype, uint64_t seed) { return Tensors{RandomTensor(shape, dtype, seed)}; };
  c.forward = [axis, sizes](const Tensors& in) { return Split(in[0], sizes, axis); };
  c.backward = [axis](const Tensors&, const Tensors&, const Tensors& gout) { return Tensors{Concat(gout, axis)}; };
  c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      ConcatCase({4}, 0, {1, 3, 2}),
      ConcatCase({3, 5}, 1, {2, 1, 4}),
      ConcatCase({3, 5, 7}, 0, {2, 5}),
      ConcatCase({2, 3, 4, 5}, -2, {1, 6, 2}),
      ConcatCase({64, 256, 64}, 1, {256, 128}),  // threads
      ConcatCase({1, 300000}, 1, {200000, 100000}),  // one long block per input
      SplitCase({9}, 0, {4, 0, 5}),
      SplitCase({3, 8}, 1, {3, 5}),
      SplitCase({6, 2, 5}, 0, {1, 2, 3}),
      SplitCase({2, 3, 4, 6}, -1, {2, 2, 2}),
      SplitCase({64, 384, 64}, 1, {128, 256}),  // threads
  };
}

TEST(Concat, KnownValuesAndRoundTrip) {
  Tensor a = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::FromVector({5, 6}, {2, 1});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    Tensor c = Concat({a, b}, 1);
    EXPECT_EQ(c.shape(), (Shape{2, 3}));
    EXPECT_EQ(c.ToFloatVector(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
    std::vector<Tensor> parts = Split(c, {2, 1}, -1);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].ToFloatVector(), a.ToFloatVector());
    EXPECT_EQ(parts[1].ToFloatVector(), b.ToFloatVector());
    // Non-contiguous input (a transposed view).
    Tensor t = Concat({a.Transpose(0, 1), a}, 0);
    EXPECT_EQ(t.ToFloatVector(), (std::vector<float>{1, 3, 2, 4, 1, 2, 3, 4}));
    // Integer tensors concatenate too.
    Tensor i = Concat({Tensor::FromInts({1, 2}, {2}), Tensor::FromInts({3}, {1})}, 0);
    EXPECT_EQ(i.ToIntVector(), (std::vector<int64_t>{1, 2, 3}));
  }
}

TEST(Concat, RejectsBadArguments) {
  Tensor a = Tensor::Zeros({2, 2});
  EXPECT_THROW(Concat({}, 0), OpError);
  EXPECT_THROW(Concat({a, Tensor::Zeros({3, 3})}, 0), OpError);
  EXPECT_THROW(Concat({a, Tensor::Zeros({2, 2}, DType::kBF16)}, 0), OpError);
  EXPECT_THROW(Concat({a, Tensor::Zeros({2, 2, 1})}, 0), OpError);
  EXPECT_THROW(Concat({a, a}, 2), OpError);
  EXPECT_THROW(Split(a, {1, 2}, 0), OpError);
  EXPECT_THROW(Split(a, {3, -1}, 0), OpError);
  EXPECT_THROW(Split(a, {2}, -3), OpError);
  try {
    Concat({a, Tensor::Zeros({3, 3})}, 1);
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("concat: input 1 has shape [3, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::ops::testing
