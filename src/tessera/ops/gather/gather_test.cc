// Gather / scatter-add (PyTorch semantics) and their row forms: parity
// cases along every axis, known values, index errors, and thread-count
// independence of scatter-add.
#include <omp.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/gather/gather.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

ParityCase GatherCase(Shape x_shape, int axis, Shape index_shape) {
  ParityCase c;
  c.op = "gather";
  c.name = fmt::format("x {} axis {} index {}", ShapeString(x_shape), axis, ShapeString(index_shape));
  int ax = axis < 0 ? axis + static_cast<int>(x_shape.size()) : axis;
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(x_shape, dtype, seed), RandomIndices(index_shape, x_shape[ax], seed + 1)};
  };
  c.forward = [axis](const Tensors& in) { return Tensors{Gather(in[0], axis, in[1])}; };
  c.backward = [axis](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{GatherBackward(gout[0], axis, in[1], in[0].shape()), Tensor()};
  };
  return c;
}

ParityCase ScatterCase(Shape base_shape, int axis, Shape index_shape) {
  ParityCase c;
  c.op = "scatter_add";
  c.name = fmt::format("base {} axis {} index {}", ShapeString(base_shape), axis, ShapeString(index_shape));
  int ax = axis < 0 ? axis + static_cast<int>(base_shape.size()) : axis;
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(base_shape, dtype, seed), RandomIndices(index_shape, base_shape[ax], seed + 1),
                   RandomTensor(index_shape, dtype, seed + 2)};
  };
  c.forward = [axis](const Tensors& in) { return Tensors{ScatterAdd(in[0], axis, in[1], in[2])}; };
  c.backward = [axis](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{gout[0], Tensor(), ScatterAddBackwardSrc(gout[0], axis, in[1])};
  };
  return c;
}

ParityCase GatherRowsCase(int64_t n, int64_t d, int64_t m) {
  ParityCase c;
  c.op = "gather";
  c.name = fmt::format("rows x [{}, {}] rows [{}]", n, d, m);
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor({n, d}, dtype, seed), RandomIndices({m}, n, seed + 1)};
  };
  c.forward = [](const Tensors& in) { return Tensors{GatherRows(in[0], in[1])}; };
  c.backward = [n](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{ScatterAddRows(gout[0], in[1], n), Tensor()};
  };
  return c;
}

ParityCase ScatterRowsCase(int64_t m, int64_t d, int64_t n) {
  ParityCase c;
  c.op = "scatter_add";
  c.name = fmt::format("rows src [{}, {}] into {}", m, d, n);
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor({m, d}, dtype, seed), RandomIndices({m}, n, seed + 1)};
  };
  c.forward = [n](const Tensors& in) { return Tensors{ScatterAddRows(in[0], in[1], n)}; };
  c.backward = [](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{GatherRows(gout[0], in[1]), Tensor()};
  };
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      GatherCase({5}, 0, {7}),
      GatherCase({4, 6}, 1, {4, 3}),
      GatherCase({4, 6}, 0, {9, 6}),
      GatherCase({3, 5, 7}, 1, {2, 8, 4}),  // index smaller than x on the other axes
      GatherCase({3, 5, 7}, -1, {3, 5, 2}),
      GatherCase({64, 40, 33}, 1, {64, 40, 33}),  // threads
      ScatterCase({6}, 0, {11}),
      ScatterCase({4, 6}, 1, {4, 9}),
      ScatterCase({5, 3, 4}, 0, {8, 3, 2}),
      ScatterCase({3, 5, 7}, 2, {3, 4, 10}),
      ScatterCase({8, 1000}, 1, {8, 3000}),   // threads, many collisions
      ScatterCase({1000, 96}, 0, {3000, 96}),  // axis 0: chunks over the inner axis
      GatherRowsCase(10, 5, 13),
      GatherRowsCase(256, 64, 1024),
      ScatterRowsCase(13, 5, 4),
      ScatterRowsCase(1024, 64, 96),
  };
}

TEST(Gather, KnownValues) {
  Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor index = Tensor::FromInts({2, 0, 1, 1}, {2, 2});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    EXPECT_EQ(Gather(x, 1, index).ToFloatVector(), (std::vector<float>{3, 1, 5, 5}));
    Tensor index0 = Tensor::FromInts({1, 0, 0}, {1, 3});
    EXPECT_EQ(Gather(x, 0, index0).ToFloatVector(), (std::vector<float>{4, 2, 3}));
    Tensor s = ScatterAdd(Tensor::Zeros({2, 3}), 1, index, Tensor::FromVector({1, 2, 3, 4}, {2, 2}));
    EXPECT_EQ(s.ToFloatVector(), (std::vector<float>{2, 0, 1, 0, 7, 0}));
    Tensor rows = ScatterAddRows(Tensor::FromVector({1, 2, 3, 4, 5, 6}, {3, 2}), Tensor::FromInts({1, 1, 0}, {3}), 3);
    EXPECT_EQ(rows.ToFloatVector(), (std::vector<float>{5, 6, 4, 6, 0, 0}));
    EXPECT_EQ(GatherRows(x, Tensor::FromInts({1, 1, 0}, {3})).ToFloatVector(),
              (std::vector<float>{4, 5, 6, 4, 5, 6, 1, 2, 3}));
  }
}

TEST(Gather, RejectsBadIndices) {
  Tensor x = Tensor::Zeros({2, 3});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    try {
      Gather(x, 1, Tensor::FromInts({0, 1, 3, 0}, {2, 2}));
      FAIL() << "expected OpError";
    } catch (const OpError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("gather"), std::string::npos) << msg;
      EXPECT_NE(msg.find("index value 3 at flat position 2"), std::string::npos) << msg;
    }
    EXPECT_THROW(Gather(x, 2, Tensor::FromInts({0}, {1, 1})), OpError);          // bad axis
    EXPECT_THROW(Gather(x, 1, Tensor::FromInts({0, 0, 0}, {3, 1})), OpError);    // too big on axis 0
    EXPECT_THROW(Gather(x, 1, Tensor::FromInts({0, 0}, {2})), OpError);          // rank
    EXPECT_THROW(ScatterAdd(x, 0, Tensor::FromInts({-1}, {1, 1}), Tensor::Zeros({1, 1})), OpError);
    EXPECT_THROW(ScatterAdd(x, 0, Tensor::FromInts({0, 1}, {1, 2}), Tensor::Zeros({1, 1})), OpError);  // src small
    EXPECT_THROW(GatherRows(x, Tensor::FromInts({2}, {1})), OpError);
    EXPECT_THROW(ScatterAddRows(x, Tensor::FromInts({0, 5}, {2}), 5), OpError);  // position 1 → 5 >= 5
    EXPECT_THROW(ScatterAddRows(x, Tensor::FromInts({0}, {1}), 5), OpError);     // rows length
  }
}

TEST(Gather, ScatterAddIsBitwiseIndependentOfThreads) {
  Tensor base = RandomTensor({64, 500}, DType::kF32, 3);
  Tensor index = RandomIndices({64, 4000}, 500, 4);
  Tensor src = RandomTensor({64, 4000}, DType::kF32, 5, -2.0f, 2.0f);
  Tensor base0 = RandomTensor({300, 80}, DType::kF32, 6);
  Tensor index0 = RandomIndices({5000, 80}, 300, 7);
  Tensor src0 = RandomTensor({5000, 80}, DType::kF32, 8);
  Tensor rows = RandomIndices({5000}, 300, 9);
  auto run = [&] {
    std::vector<float> a = ScatterAdd(base, 1, index, src).ToFloatVector();
    std::vector<float> b = ScatterAdd(base0, 0, index0, src0).ToFloatVector();
    std::vector<float> c = ScatterAddRows(src0, rows, 300).ToFloatVector();
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<float> one = run();
  omp_set_num_threads(2);
  std::vector<float> two = run();
  omp_set_num_threads(saved);
  std::vector<float> ref;
  {
    ScopedImpl scope(Impl::kReference);
    ref = run();
  }
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(FloatBits(one[i]), FloatBits(two[i])) << i;
    ASSERT_EQ(FloatBits(one[i]), FloatBits(ref[i])) << i;
  }
}

}  // namespace
}  // namespace tessera::ops::testing
