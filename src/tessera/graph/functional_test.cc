// Every differentiable function: autograd vs central finite differences
// through a small composition (graph/gradcheck_test_util.h).
#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::Project;
using Ins = std::vector<Tensor>;

Tensor Ints(const std::vector<int64_t>& v, const Shape& shape) { return Tensor::FromInts(v, shape); }

// Moves values within `margin` of zero away from it (kinks of relu).
Tensor AwayFromZero(Tensor t, float margin) {
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::abs(d[i]) < margin) d[i] = d[i] < 0 ? -3 * margin : 3 * margin;
  }
  return t;
}

TEST(GradCheckTest, MatMul) {
  ExpectGradientsMatch("matmul", {Leaf({3, 4}, 1), Leaf({4, 5}, 2)},
                       [](const Ins& in) { return Project(MatMul(in[0], in[1])); });
  ExpectGradientsMatch("matmul trans_b", {Leaf({3, 4}, 3), Leaf({5, 4}, 4)},
                       [](const Ins& in) { return Project(MatMul(Affine(in[0], 2.0f, 0.5f), in[1], false, true)); });
  ExpectGradientsMatch("matmul trans_a", {Leaf({4, 3}, 5), Leaf({4, 5}, 6)},
                       [](const Ins& in) { return Project(MatMul(in[0], in[1], true, false)); });
  ExpectGradientsMatch("matmul folded", {Leaf({2, 3, 4}, 7), Leaf({4, 5}, 8)},
                       [](const Ins& in) { return Project(MatMul(in[0], in[1])); });
  ExpectGradientsMatch("matmul batched", {Leaf({2, 3, 4}, 9), Leaf({2, 4, 5}, 10)},
                       [](const Ins& in) { return Project(MatMul(in[0], in[1])); });
}

TEST(GradCheckTest, BinaryWithBroadcast) {
  Ins in = {Leaf({2, 3, 4}, 11), Leaf({3, 1}, 12)};
  ExpectGradientsMatch("add", in, [](const Ins& x) { return Project(Add(x[0], x[1])); });
  ExpectGradientsMatch("sub", in, [](const Ins& x) { return Project(Sub(x[1], x[0])); });
  ExpectGradientsMatch("mul", in, [](const Ins& x) { return Project(Mul(x[0], x[1])); });
  Ins div = {Leaf({2, 3, 4}, 13), Leaf({4}, 14, 0.5f, 1.5f)};
  ExpectGradientsMatch("div", div, [](const Ins& x) { return Project(Div(x[0], x[1])); });
  ExpectGradientsMatch("affine", {Leaf({5}, 15)}, [](const Ins& x) { return Project(Affine(x[0], -1.5f, 2.0f)); });
  // The same tensor on both sides: both gradient contributions accumulate.
  ExpectGradientsMatch("mul self", {Leaf({6}, 16)}, [](const Ins& x) { return Project(Mul(x[0], x[0])); });
}

TEST(GradCheckTest, Reductions) {
  Ins in = {Leaf({2, 3, 4}, 21)};
  ExpectGradientsMatch("sum all", in, [](const Ins& x) { return Sum(Mul(x[0], x[0])); });
  ExpectGradientsMatch("sum axis", in, [](const Ins& x) { return Project(Sum(x[0], {1})); });
  ExpectGradientsMatch("sum keepdim", in, [](const Ins& x) { return Project(Mul(Sum(x[0], {2}, true), x[0])); });
  ExpectGradientsMatch("mean axes", in, [](const Ins& x) { return Project(Mean(x[0], {0, 2})); });
  // Distinct values 0.1 apart so the finite-difference step never changes the argmax.
  std::vector<float> spread(24);
  for (int i = 0; i < 24; ++i) spread[i] = 0.1f * static_cast<float>((i * 7) % 24) - 1.2f;
  Tensor distinct = Tensor::FromVector(spread, {2, 3, 4});
  distinct.set_requires_grad(true);
  ExpectGradientsMatch("max", {distinct}, [](const Ins& x) { return Project(Max(x[0], 1).values); });
  ExpectGradientsMatch("max keepdim", {distinct}, [](const Ins& x) { return Project(Max(x[0], -1, true).values); });
}

TEST(GradCheckTest, SoftmaxAndLoss) {
  Ins in = {Leaf({3, 5}, 31, -2.0f, 2.0f)};
  ExpectGradientsMatch("softmax", in, [](const Ins& x) { return Project(Softmax(x[0], -1)); });
  ExpectGradientsMatch("softmax axis0", in, [](const Ins& x) { return Project(Softmax(x[0], 0)); });
  ExpectGradientsMatch("log_softmax", in, [](const Ins& x) { return Project(LogSoftmax(x[0], -1)); });
  Tensor targets = Ints({1, -100, 4}, {3});
  ExpectGradientsMatch("cross_entropy", in,
                       [&](const Ins& x) { return CrossEntropy(Affine(x[0], 2.0f, 0.0f), targets); });
  Tensor targets3 = Ints({0, 6, 2, 6, -100, 1}, {2, 3});
  ExpectGradientsMatch("cross_entropy 3d", {Leaf({2, 3, 7}, 32)},
                       [&](const Ins& x) { return CrossEntropy(x[0], targets3); });
  ops::CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.1f;
  ExpectGradientsMatch("cross_entropy smoothing", in,
                       [&](const Ins& x) { return graph::CrossEntropy(x[0], targets, smooth); });
}

TEST(GradCheckTest, EmbeddingAndNorms) {
  Tensor ids = Ints({3, 1, 3, 9, 0, 1}, {2, 3});
  ExpectGradientsMatch("embedding", {Leaf({10, 4}, 41)}, [&](const Ins& w) { return Project(Embedding(w[0], ids)); });
  Ins ln = {Leaf({3, 8}, 42, -2.0f, 2.0f), Leaf({8}, 43, 0.5f, 1.5f), Leaf({8}, 44)};
  ExpectGradientsMatch("layernorm", ln, [](const Ins& x) { return Project(LayerNorm(x[0], x[1], x[2])); });
  Ins rms = {Leaf({3, 8}, 45, -2.0f, 2.0f), Leaf({8}, 46, 0.5f, 1.5f)};
  ExpectGradientsMatch("rmsnorm", rms, [](const Ins& x) { return Project(RmsNorm(x[0], x[1])); });
}

TEST(GradCheckTest, Activations) {
  Ins in = {Leaf({4, 5}, 51, -3.0f, 3.0f)};
  ExpectGradientsMatch("gelu", in, [](const Ins& x) { return Project(Gelu(x[0])); });
  ExpectGradientsMatch("silu", in, [](const Ins& x) { return Project(Silu(x[0])); });
  ExpectGradientsMatch("relu", {AwayFromZero(Leaf({4, 5}, 52), 0.05f)},
                       [](const Ins& x) { return Project(Relu(x[0])); });
  ExpectGradientsMatch("swiglu", {Leaf({3, 4}, 53, -2.0f, 2.0f), Leaf({3, 4}, 54)},
                       [](const Ins& x) { return Project(SwiGlu(x[0], x[1])); });
}

TEST(GradCheckTest, Dropout) {
  Ins in = {Leaf({8, 8}, 61)};
  ExpectGradientsMatch("dropout", in, [](const Ins& x) { return Project(Dropout(x[0], 0.3f, true, 5, 7)); });
  Tensor x = in[0];
  EXPECT_EQ(Dropout(x, 0.3f, false, 5).impl(), x.impl());  // eval: identity
  Tensor y = Dropout(x, 0.5f, true, 5);
  int zeros = 0;
  for (float v : y.ToFloatVector()) zeros += v == 0.0f;
  EXPECT_GT(zeros, 10);
  EXPECT_LT(zeros, 54);
  ClearTape();
}

TEST(GradCheckTest, AttentionAndRope) {
  Ins qkv = {Leaf({1, 2, 5, 4}, 71), Leaf({1, 2, 5, 4}, 72), Leaf({1, 2, 5, 4}, 73)};
  ExpectGradientsMatch("attention", qkv, [](const Ins& x) { return Project(CausalAttention(x[0], x[1], x[2], 0.5f)); });
  ExpectGradientsMatch("rope", {Leaf({1, 2, 3, 4}, 74)}, [](const Ins& x) { return Project(Rope(x[0])); });
  ExpectGradientsMatch("rope offset", {Leaf({2, 1, 3, 6}, 75)},
                       [](const Ins& x) { return Project(Rope(Affine(x[0], 1.5f, 0.0f), 100.0f, 4)); });
}

TEST(GradCheckTest, TopK) {
  // Well-separated values so the finite-difference step never reorders them.
  std::vector<float> v = {0.1f, 0.9f, -0.5f, 0.4f, 0.7f, -0.2f, 0.3f, -0.8f, 0.6f, 0.0f, 0.2f, 0.5f};
  Tensor x = Tensor::FromVector(v, {2, 6});
  x.set_requires_grad(true);
  ExpectGradientsMatch("topk", {x}, [](const Ins& in) { return Project(TopK(in[0], 3).values); });
  TopKOutput top = TopK(x, 2);
  EXPECT_EQ(top.indices.ToIntVector(), (std::vector<int64_t>{1, 4, 2, 5}));
  ClearTape();
}

TEST(GradCheckTest, GatherScatter) {
  Tensor index = Ints({0, 3, 2, 2, 1, 0}, {3, 2});
  ExpectGradientsMatch("gather", {Leaf({3, 4}, 81)}, [&](const Ins& x) { return Project(Gather(x[0], 1, index)); });
  ExpectGradientsMatch("scatter_add", {Leaf({3, 4}, 82), Leaf({3, 2}, 83)},
                       [&](const Ins& x) { return Project(ScatterAdd(x[0], 1, index, x[1])); });
  Tensor rows = Ints({4, 0, 4, 2}, {4});
  ExpectGradientsMatch("gather_rows", {Leaf({5, 3}, 84)},
                       [&](const Ins& x) { return Project(GatherRows(x[0], rows)); });
  Tensor targets = Ints({1, 1, 0, 3}, {4});
  ExpectGradientsMatch("scatter_add_rows", {Leaf({4, 3}, 85)},
                       [&](const Ins& x) { return Project(ScatterAddRows(x[0], targets, 5)); });
}

TEST(GradCheckTest, ConcatAndSplit) {
  ExpectGradientsMatch("concat", {Leaf({2, 3}, 91), Leaf({2, 2}, 92)}, [](const Ins& x) {
    return Project(Concat({x[0], x[1]}, 1));
  });
  ExpectGradientsMatch("split", {Leaf({2, 5}, 93)}, [](const Ins& x) {
    std::vector<Tensor> parts = Split(x[0], {2, 3}, 1);
    return Add(Project(parts[0], 1), Project(Mul(parts[1], parts[1]), 2));
  });
  // Only one piece used: the other piece's gradient is zero-filled.
  ExpectGradientsMatch("split partial", {Leaf({4, 3}, 94)}, [](const Ins& x) {
    return Project(Split(x[0], {1, 3}, 0)[1]);
  });
}

TEST(GradCheckTest, ViewsAndCopies) {
  ExpectGradientsMatch("views", {Leaf({2, 3, 4}, 101), Leaf({3, 2}, 102)}, [](const Ins& x) {
    Tensor t = Transpose(x[0], 0, 2);                      // [4, 3, 2] strided
    Tensor c = Contiguous(t);                              // copy
    Tensor r = Reshape(c, {4, 6});                         // view
    Tensor s = Slice(r, 1, 1, 6, 2);                       // [4, 3] strided
    Tensor p = Permute(Reshape(s, {2, 2, 3}), {2, 0, 1});  // [3, 2, 2]
    Tensor v = View(Contiguous(p), {3, 4});
    return Project(MatMul(Transpose(v, 0, 1), x[1]));  // [4, 3] @ [3, 2]
  });
  ExpectGradientsMatch("reshape of strided", {Leaf({3, 4}, 103)}, [](const Ins& x) {
    return Project(Reshape(Transpose(x[0], 0, 1), {2, 6}));
  });
}

TEST(GradCheckTest, CastCarriesGradientBackInTheLeafDtype) {
  Tensor x = Leaf({4}, 111);
  Tensor y = Cast(x, DType::kBF16);
  EXPECT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(Cast(x, DType::kF32).impl(), x.impl());
  Tensor loss = Sum(Cast(Affine(y, 3.0f, 0.0f), DType::kF32));
  Backward(loss);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::kF32);
  EXPECT_EQ(x.grad().ToFloatVector(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(GradCheckTest, TwoLayerNetworkWithSharedInput) {
  // x feeds two branches and a residual: intermediate gradients accumulate.
  Ins in = {Leaf({4, 6}, 121), Leaf({8, 6}, 122, -0.5f, 0.5f), Leaf({6, 8}, 123, -0.5f, 0.5f), Leaf({6}, 124)};
  ExpectGradientsMatch("mlp", in, [](const Ins& p) {
    Tensor h = LayerNorm(p[0], Affine(p[3], 0.1f, 1.0f), p[3]);
    Tensor a = Gelu(MatMul(h, p[1], false, true));
    Tensor y = Add(p[0], MatMul(a, p[2], false, true));
    Tensor z = Add(y, Mul(h, Silu(h)));
    return Mean(Mul(z, z));
  });
}

}  // namespace
}  // namespace tessera::graph
