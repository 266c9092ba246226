// Each differentiable tensor-parallel collective, on 1, 2 and 4 thread ranks
// in fp32, bf16 and fp16, against the same computation on full tensors:
// forward values and input gradients (loss_r = Σ out_r ⊙ W_r with a
// different W_r per rank, so a wrong reduction in backward shows).
#include "tessera/parallel/tensor_parallel/collectives.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tessera/base/error.h"
#include "tessera/parallel/tensor_parallel/tp_test_util.h"

namespace tessera::parallel {
namespace {

using testing::ExpectClose;
using testing::Project;
using testing::RandomLeaf;
using testing::RunRanks;
using testing::Shard;

const Shape kShape = {4, 8, 12};  // every axis divisible by 4

// Reference helpers on full tensors (no tape).
Tensor SumOver(int size, const std::function<Tensor(int)>& part) {
  graph::NoGradGuard no_grad;
  Tensor acc = part(0).To(DType::kF32).Clone();
  for (int r = 1; r < size; ++r) acc = graph::Add(acc, part(r).To(DType::kF32));
  return acc;
}

Tensor ConcatOver(int size, int axis, const std::function<Tensor(int)>& part) {
  graph::NoGradGuard no_grad;
  std::vector<Tensor> parts;
  for (int r = 0; r < size; ++r) parts.push_back(part(r).To(DType::kF32));
  return graph::Concat(parts, axis);
}

Shape ShardShape(Shape s, int axis, int size) {
  s[axis] /= size;
  return s;
}

class TpCollectives : public ::testing::TestWithParam<std::tuple<int, DType>> {
 protected:
  int tp() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  double tol() const { return testing::Tolerance(dtype()); }
  // Per-rank input X_r and upstream weight W_r.
  Tensor X(int r, const Shape& shape = kShape) const { return RandomLeaf(shape, 100 + r, dtype()); }
  Tensor W(int r, const Shape& shape) const { return RandomLeaf(shape, 200 + r, DType::kF32); }
};

TEST_P(TpCollectives, CopyIsIdentityForwardAndSumsGradients) {
  const int p = tp();
  RunRanks(p, [&](int r, comm::Communicator& c) {
    Tensor x = X(r);
    Tensor out = CopyToTensorParallel(x, &c);
    ExpectClose(out, x, 0.0, "forward");
    graph::Backward(Project(out, W(r, kShape)));
    ExpectClose(x.grad(), SumOver(p, [&](int q) { return W(q, kShape); }), tol(), "x.grad");
  });
}

TEST_P(TpCollectives, ReduceSumsForwardAndPassesGradients) {
  const int p = tp();
  RunRanks(p, [&](int r, comm::Communicator& c) {
    Tensor x = X(r);
    Tensor out = ReduceFromTensorParallel(x, &c);
    ExpectClose(out, SumOver(p, [&](int q) { return X(q); }), tol(), "forward");
    graph::Backward(Project(out, W(r, kShape)));
    ExpectClose(x.grad(), W(r, kShape), tol(), "x.grad");
  });
}

TEST_P(TpCollectives, GatherAndScatterAlongEveryAxis) {
  const int p = tp();
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int a = axis < 0 ? axis + 3 : axis;
    const Shape shard = ShardShape(kShape, a, p);
    RunRanks(p, [&](int r, comm::Communicator& c) {
      // Gather: the output is replicated, so every rank uses the same W.
      Tensor x = X(r, shard);
      Tensor out = GatherFromTensorParallel(x, axis, &c);
      ExpectClose(out, ConcatOver(p, a, [&](int q) { return X(q, shard); }), tol(), "gather forward");
      graph::Backward(Project(out, W(0, kShape)));
      ExpectClose(x.grad(), Shard(W(0, kShape), a, r, p), tol(), "gather x.grad");

      // Scatter: the same full input everywhere; rank r keeps block r.
      Tensor full = X(0);
      Tensor mine = ScatterToTensorParallel(full, axis, &c);
      ExpectClose(mine, Shard(full, a, r, p), 0.0, "scatter forward");
      graph::Backward(Project(mine, W(r, shard)));
      ExpectClose(full.grad(), ConcatOver(p, a, [&](int q) { return W(q, shard); }), tol(), "scatter x.grad");
    });
  }
}

TEST_P(TpCollectives, SequenceGatherAndReduceScatter) {
  const int p = tp();
  for (int axis : {1, 0, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const Shape shard = ShardShape(kShape, axis, p);
    RunRanks(p, [&](int r, comm::Communicator& c) {
      Tensor x = X(r, shard);
      Tensor out = AllGatherSequence(x, axis, &c);
      ExpectClose(out, ConcatOver(p, axis, [&](int q) { return X(q, shard); }), tol(), "all-gather forward");
      graph::Backward(Project(out, W(r, kShape)));
      ExpectClose(x.grad(), Shard(SumOver(p, [&](int q) { return W(q, kShape); }), axis, r, p), tol(),
                  "all-gather x.grad (reduce-scatter)");

      Tensor y = X(r);
      Tensor part = ReduceScatterSequence(y, axis, &c);
      ExpectClose(part, Shard(SumOver(p, [&](int q) { return X(q); }), axis, r, p), tol(), "reduce-scatter forward");
      graph::Backward(Project(part, W(r, shard)));
      ExpectClose(y.grad(), ConcatOver(p, axis, [&](int q) { return W(q, shard); }), tol(),
                  "reduce-scatter x.grad (all-gather)");
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(DType::kF32, DType::kBF16, DType::kF16)),
                         [](const auto& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(DTypeName(std::get<1>(info.param)));
                         });

TEST(TpCollectivesGradients, AllReduceGradientsSumsMixedDtypesAndMissingGradients) {
  RunRanks(3, [&](int r, comm::Communicator& c) {
    // a: fp32 [2, 3]; b: bf16 [4] (bf16 gradient); d: fp32 [5], no gradient on rank 1.
    Tensor a = RandomLeaf({2, 3}, 1), b = RandomLeaf({4}, 2, DType::kBF16), d = RandomLeaf({5}, 3);
    a.set_grad(Tensor::Full({2, 3}, r + 1.0));
    b.set_grad(Tensor::Full({4}, 2.0 * (r + 1), DType::kBF16));
    if (r != 1) d.set_grad(Tensor::Full({5}, 10.0 * r));
    AllReduceGradients({a, b, d}, &c);
    ExpectClose(a.grad(), Tensor::Full({2, 3}, 6.0), 0.0, "a");
    ExpectClose(b.grad(), Tensor::Full({4}, 12.0), 0.0, "b");
    EXPECT_EQ(b.grad().dtype(), DType::kBF16);
    ExpectClose(d.grad(), Tensor::Full({5}, 20.0), 0.0, "d");
  });
}

TEST(TpCollectivesErrors, NullGroupIsIdentity) {
  Tensor x = RandomLeaf({2, 4}, 1);
  EXPECT_EQ(CopyToTensorParallel(x, nullptr).impl(), x.impl());
  EXPECT_EQ(ReduceFromTensorParallel(x, nullptr).impl(), x.impl());
  EXPECT_EQ(GatherFromTensorParallel(x, 1, nullptr).impl(), x.impl());
  EXPECT_EQ(ScatterToTensorParallel(x, 0, nullptr).impl(), x.impl());
  EXPECT_EQ(AllGatherSequence(x, 0, nullptr).impl(), x.impl());
  EXPECT_EQ(ReduceScatterSequence(x, 0, nullptr).impl(), x.impl());
  graph::ClearTape();
}

TEST(TpCollectivesErrors, IndivisibleAxisAndFailedCommunicationThrowOpError) {
  RunRanks(2, [&](int, comm::Communicator& c) {
    Tensor x = RandomLeaf({3, 4}, 1);
    testing::ExpectOpError([&] { ScatterToTensorParallel(x, 0, &c); },
                           "ScatterToTensorParallel: size 3 of axis 0 (shape [3, 4]) is not divisible by tp = 2");
    c.Abort("test abort");
    testing::ExpectOpError([&] { ReduceFromTensorParallel(x, &c); }, "all_reduce");
    graph::ClearTape();
  });
}

}  // namespace
}  // namespace tessera::parallel
