// Unit tests of element-wise ops and their internal helpers: known values,
// broadcasting, non-contiguous inputs, argument errors, the vectorized exp
// and the bf16/fp16 block conversions.
#include "tessera/ops/elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/elementwise/simd.h"
#include "tessera/ops/testing/parity.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

const Impl kImpls[] = {Impl::kReference, Impl::kOptimized};

TEST(Elementwise, KnownValuesWithBroadcast) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor a = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = Tensor::FromVector({10, 20, 30}, {3});
    EXPECT_EQ(Add(a, b).ToFloatVector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
    EXPECT_EQ(Sub(a, b).ToFloatVector(), (std::vector<float>{-9, -18, -27, -6, -15, -24}));
    Tensor col = Tensor::FromVector({2, 4}, {2, 1});
    EXPECT_EQ(Mul(a, col).ToFloatVector(), (std::vector<float>{2, 4, 6, 16, 20, 24}));
    EXPECT_EQ(Div(a, col).ToFloatVector(), (std::vector<float>{0.5f, 1, 1.5f, 1, 1.25f, 1.5f}));
    Tensor outer = Add(Tensor::FromVector({1, 2}, {2, 1}), Tensor::FromVector({10, 20, 30}, {1, 3}));
    EXPECT_EQ(outer.shape(), (Shape{2, 3}));
    EXPECT_EQ(outer.ToFloatVector(), (std::vector<float>{11, 21, 31, 12, 22, 32}));
  }
}

TEST(Elementwise, BackwardSumsBroadcastAxes) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor a = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = Tensor::FromVector({1, 2, 4}, {3});
    Tensor g = Tensor::Full({2, 3}, 1.0);
    BinaryGrads add = BinaryBackward(BinaryOp::kAdd, g, a, b);
    EXPECT_EQ(add.grad_a.ToFloatVector(), g.ToFloatVector());
    EXPECT_EQ(add.grad_b.ToFloatVector(), (std::vector<float>{2, 2, 2}));
    BinaryGrads mul = BinaryBackward(BinaryOp::kMul, g, a, b);
    EXPECT_EQ(mul.grad_b.ToFloatVector(), (std::vector<float>{5, 7, 9}));
    EXPECT_EQ(mul.grad_a.ToFloatVector(), (std::vector<float>{1, 2, 4, 1, 2, 4}));
    BinaryGrads sub = BinaryBackward(BinaryOp::kSub, g, a, b);
    EXPECT_EQ(sub.grad_b.ToFloatVector(), (std::vector<float>{-2, -2, -2}));
    BinaryGrads div = BinaryBackward(BinaryOp::kDiv, g, a, b);
    // d(a/b)/db = -a / b^2, summed over rows: -(1+4)/1, -(2+5)/4, -(3+6)/16.
    EXPECT_EQ(div.grad_b.ToFloatVector(), (std::vector<float>{-5.0f, -1.75f, -0.5625f}));
  }
}

TEST(Elementwise, GradientsDoNotAliasGradOut) {
  Tensor a = Tensor::FromVector({1, 2}, {2});
  Tensor g = Tensor::FromVector({3, 4}, {2});
  BinaryGrads grads = BinaryBackward(BinaryOp::kAdd, g, a, a);
  EXPECT_NE(grads.grad_a.storage(), g.storage());
  EXPECT_NE(grads.grad_b.storage(), g.storage());
  EXPECT_NE(grads.grad_a.storage(), grads.grad_b.storage());
}

TEST(Elementwise, NonContiguousInputs) {
  Tensor x = Tensor::Empty({5, 7});
  FillUniform(x, 3, -1, 1);
  Tensor y = Tensor::Empty({7, 5});
  FillUniform(y, 4, -1, 1);
  Tensor yt = y.Transpose(0, 1);  // [5, 7] view
  ASSERT_FALSE(yt.is_contiguous());
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    EXPECT_EQ(Mul(x, yt).ToFloatVector(), Mul(x, yt.Contiguous()).ToFloatVector());
  }
}

TEST(Elementwise, LowPrecisionRoundsOnce) {
  Tensor a = Tensor::FromVector({1.0f, 3.0f}, {2}, DType::kBF16);
  Tensor b = Tensor::FromVector({3.0f, 7.0f}, {2}, DType::kBF16);
  Tensor q = Div(a, b);
  ASSERT_EQ(q.dtype(), DType::kBF16);
  EXPECT_EQ(q.ToFloatVector()[0], bf16(1.0f / 3.0f).ToFloat());
  EXPECT_EQ(q.ToFloatVector()[1], bf16(3.0f / 7.0f).ToFloat());
}

TEST(Elementwise, EmptyAndScalarTensors) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor empty = Tensor::Zeros({0, 5}), row = Tensor::Full({5}, 2.0);
    EXPECT_EQ(Add(empty, row).shape(), (Shape{0, 5}));
    BinaryGrads g = BinaryBackward(BinaryOp::kMul, empty, empty, row);
    EXPECT_EQ(g.grad_a.shape(), (Shape{0, 5}));
    EXPECT_EQ(g.grad_b.ToFloatVector(), (std::vector<float>(5, 0.0f)));
    Tensor s = Tensor::Scalar(3.0);
    EXPECT_EQ(Mul(s, s).Item(), 9.0);
    EXPECT_EQ(Add(s, row).ToFloatVector(), (std::vector<float>(5, 5.0f)));
    EXPECT_EQ(BinaryBackward(BinaryOp::kAdd, Tensor::Full({5}, 1.0), s, row).grad_a.Item(), 5.0);
  }
}

TEST(Elementwise, RejectsBadArguments) {
  Tensor a = Tensor::Zeros({2, 3});
  EXPECT_THROW(Add(a, Tensor::Zeros({4})), OpError);
  EXPECT_THROW(Mul(a, Tensor::Zeros({2, 3}, DType::kBF16)), OpError);
  EXPECT_THROW(Sub(Tensor::Zeros({3}, DType::kI64), Tensor::Zeros({3}, DType::kI64)), OpError);
  EXPECT_THROW(BinaryBackward(BinaryOp::kMul, Tensor::Zeros({3, 2}), a, a), OpError);
  EXPECT_THROW(SumToShape(a, {4}), OpError);
  EXPECT_THROW(SumToShape(a, {1, 2, 3}), OpError);
  try {
    Div(a, Tensor::Zeros({5}));
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("div"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  }
}

TEST(Elementwise, SumToShapeAffineAddInPlace) {
  for (Impl impl : kImpls) {
    ScopedImpl scope(impl);
    Tensor g = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
    EXPECT_EQ(SumToShape(g, {2}).ToFloatVector(), (std::vector<float>{4, 6}));
    EXPECT_EQ(SumToShape(g, {2, 1}).ToFloatVector(), (std::vector<float>{3, 7}));
    EXPECT_EQ(SumToShape(g, {1}).ToFloatVector(), (std::vector<float>{10}));
    EXPECT_EQ(Affine(g, 2.0f, -1.0f).ToFloatVector(), (std::vector<float>{1, 3, 5, 7}));
    Tensor acc = Tensor::Full({2, 2}, 0.5);
    AddInPlace(acc, g.To(DType::kBF16));
    EXPECT_EQ(acc.ToFloatVector(), (std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f}));
    Tensor base = Tensor::Zeros({2, 2});
    Tensor view = base.Transpose(0, 1);
    AddInPlace(view, g);
    EXPECT_EQ(base.ToFloatVector(), (std::vector<float>{1, 3, 2, 4}));
    EXPECT_THROW(AddInPlace(acc, Tensor::Zeros({4})), OpError);
    Tensor low = Tensor::Zeros({2, 2}, DType::kBF16);
    EXPECT_THROW(AddInPlace(low, g), OpError);
  }
}

TEST(KernelUtil, FastExpMatchesStdExp) {
  double worst = 0;
  for (int i = -80000; i <= 80000; ++i) {
    float x = static_cast<float>(i) * 1e-3f + 1.2345e-4f;
    double rel = std::fabs(kern::FastExp(x) - std::exp(static_cast<double>(x))) / std::exp(static_cast<double>(x));
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(kern::FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(kern::FastExp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(kern::FastExp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(kern::FastExp(1000.0f)));
  EXPECT_GT(kern::FastExp(1000.0f), 1e38f);
}

TEST(KernelUtil, BlockConversionsMatchScalarRounding) {
  std::vector<float> v;
  for (int i = 0; i < 4000; ++i) v.push_back(NormalAt(5, i) * std::pow(2.0f, static_cast<float>(i % 40 - 20)));
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-0.0f);
  v.push_back(1e-8f);    // fp16 subnormal range
  v.push_back(70000.f);  // fp16 overflow
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<uint16_t> bits(n), f16bits(n);
  kern::StoreF32(DType::kBF16, v.data(), bits.data(), n);
  kern::StoreF32(DType::kF16, v.data(), f16bits.data(), n);
  std::vector<float> back(n), back16(n);
  kern::LoadF32(DType::kBF16, bits.data(), back.data(), n);
  kern::LoadF32(DType::kF16, f16bits.data(), back16.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(bits[i], bf16::FromFloat(v[i])) << v[i];
    EXPECT_EQ(f16bits[i], fp16::FromFloat(v[i])) << v[i];
    float expect = bf16::FromBits(bits[i]).ToFloat(), expect16 = fp16::ToFloatBits(f16bits[i]);
    EXPECT_TRUE(back[i] == expect || (std::isnan(back[i]) && std::isnan(expect)));
    EXPECT_TRUE(back16[i] == expect16 || (std::isnan(back16[i]) && std::isnan(expect16)));
  }
}

// The parity harness runs whichever SIMD path this CPU selects; this runs
// the fp32 cases of this helper's op families again on the AVX2 kernels so
// both paths are checked on AVX-512 machines too.
TEST(KernelUtil, ParityOnForcedAvx2Path) {
  const std::set<std::string> ops = {"add",  "sub",     "mul",         "div",       "sum",     "mean",
                                     "max",  "softmax", "log_softmax", "layernorm", "rmsnorm", "gelu",
                                     "silu", "relu",    "swiglu",      "dropout"};
  kern::ForceAvx2ForTesting(true);
  EXPECT_FALSE(kern::HasAvx512());
  int checked = 0;
  for (const testing::ParityCase& c : testing::Registry()) {
    if (!ops.count(c.op)) continue;
    Status st = testing::CheckParity(c, DType::kF32);
    EXPECT_TRUE(st.ok()) << st.ToString();
    ++checked;
  }
  kern::ForceAvx2ForTesting(false);
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace tessera::ops
