// Cross-entropy: parity cases (plain, ignored rows, label smoothing, big V,
// int32 targets) and unit tests for known values and argument errors.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/loss/cross_entropy.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

// Targets in [0, v) with every `ignore_every`-th row set to the ignore index.
Tensor MakeTargets(int64_t n, int64_t v, uint64_t seed, int ignore_every, int64_t ignore_index, DType dtype) {
  std::vector<int64_t> t = RandomIndices({n}, v, seed).ToIntVector();
  if (ignore_every > 0) {
    for (int64_t i = 0; i < n; i += ignore_every) t[i] = ignore_index;
  }
  return Tensor::FromInts(t, {n}, dtype);
}

ParityCase MakeCase(int64_t n, int64_t v, int ignore_every, float smoothing, bool with_f16 = false,
                    DType index_dtype = DType::kI64, float scale = 3.0f) {
  ParityCase c;
  c.op = "cross_entropy";
  c.name = fmt::format("N={} V={} ignore_every={} eps={} {}", n, v, ignore_every, smoothing, DTypeName(index_dtype));
  CrossEntropyOptions o;
  o.label_smoothing = smoothing;
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor({n, v}, dtype, seed, -scale, scale),
                   MakeTargets(n, v, seed + 5, ignore_every, o.ignore_index, index_dtype)};
  };
  c.forward = [o](const Tensors& in) {
    CrossEntropyResult r = CrossEntropy(in[0], in[1], o);
    return Tensors{r.loss, r.lse};
  };
  c.backward = [o](const Tensors& in, const Tensors& out, const Tensors& gout) {
    CrossEntropyResult r;
    r.loss = out[0];
    r.lse = out[1];
    return Tensors{CrossEntropyBackward(gout[0], in[0], in[1], r, o), Tensor()};
  };
  c.differentiable_outputs = {true, false};
  if (with_f16) c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      MakeCase(1, 1, 0, 0.0f),
      MakeCase(4, 7, 0, 0.0f, true),
      MakeCase(9, 33, 3, 0.0f),
      MakeCase(8, 50, 0, 0.1f, true),
      MakeCase(6, 129, 2, 0.2f, false, DType::kI32),
      MakeCase(5, 2500, 4, 0.1f),  // crosses the 2048-column streaming block
      MakeCase(64, 1000, 5, 0.0f),  // several threads
      MakeCase(4, 16, 1, 0.0f),     // every row ignored: loss 0, grad 0
  };
}

TEST(CrossEntropy, UniformLogitsGiveLogV) {
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    for (int64_t v : {1, 10, 4096, 50257}) {
      Tensor logits = Tensor::Full({3, v}, 0.25);
      Tensor targets = Tensor::FromInts({0, v - 1, v / 2}, {3});
      CrossEntropyResult r = CrossEntropy(logits, targets);
      EXPECT_NEAR(r.loss.Item(), std::log(static_cast<double>(v)), 1e-5 * std::log(v + 1.0)) << v;
      EXPECT_EQ(r.count, 3);
      // With label smoothing the loss of uniform logits is still log V.
      CrossEntropyResult s = CrossEntropy(logits, targets, {.ignore_index = -100, .label_smoothing = 0.3f});
      EXPECT_NEAR(s.loss.Item(), std::log(static_cast<double>(v)), 1e-5 * std::log(v + 1.0)) << v;
    }
  }
}

TEST(CrossEntropy, KnownValueAndGradient) {
  // Row [0, ln 3]: softmax = [1/4, 3/4]; target 1 → loss -ln(3/4).
  Tensor logits = Tensor::FromVector({0.0f, std::log(3.0f), 5.0f, 5.0f}, {2, 2});
  Tensor targets = Tensor::FromInts({1, -100}, {2});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    CrossEntropyResult r = CrossEntropy(logits, targets);
    EXPECT_EQ(r.count, 1);
    EXPECT_NEAR(r.loss.Item(), -std::log(0.75), 1e-6);
    Tensor g = CrossEntropyBackward(Tensor::Scalar(2.0), logits, targets, r);
    std::vector<float> gv = g.ToFloatVector();
    EXPECT_NEAR(gv[0], 2.0 * 0.25, 1e-6);
    EXPECT_NEAR(gv[1], 2.0 * (0.75 - 1.0), 1e-6);
    EXPECT_EQ(gv[2], 0.0f);  // ignored row
    EXPECT_EQ(gv[3], 0.0f);
  }
}

TEST(CrossEntropy, LargeVocabularyMatchesReference) {
  Tensor logits = RandomTensor({33, 32000}, DType::kF32, 7, -8.0f, 8.0f);
  Tensor targets = RandomIndices({33}, 32000, 8);
  CrossEntropyResult opt = CrossEntropy(logits, targets);
  CrossEntropyResult ref;
  {
    ScopedImpl scope(Impl::kReference);
    ref = CrossEntropy(logits, targets);
  }
  EXPECT_NEAR(opt.loss.Item(), ref.loss.Item(), 1e-5 * std::fabs(ref.loss.Item()));
  EXPECT_TRUE(AllClose(opt.lse, ref.lse, {1e-5, 1e-6}, "lse").ok());
}

TEST(CrossEntropy, StreamedGradientOfLargeLogitsMatchesReference) {
  // 288 x 32000 fp32 = 37 MB: past the 32 MB non-temporal-store threshold.
  Tensor logits = RandomTensor({288, 32000}, DType::kF32, 9, -6.0f, 6.0f);
  Tensor targets = MakeTargets(288, 32000, 10, 7, -100, DType::kI64);
  CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = 0.05f};
  CrossEntropyResult fwd = CrossEntropy(logits, targets, o);
  Tensor opt = CrossEntropyBackward(Tensor::Scalar(1.5), logits, targets, fwd, o);
  ScopedImpl scope(Impl::kReference);
  Tensor ref = CrossEntropyBackward(Tensor::Scalar(1.5), logits, targets, fwd, o);
  Status st = AllClose(opt, ref, {1e-9, 1e-5}, "grad");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(CrossEntropy, AcceptsStridedViews) {
  // Logits as a column slice of a wider tensor; targets as a strided slice.
  Tensor wide = RandomTensor({6, 40}, DType::kF32, 3, -3.0f, 3.0f);
  Tensor logits = wide.Slice(1, 5, 35);
  Tensor targets = Tensor::FromInts({1, 9, 2, 9, 29, 9, 0, 9, 7, 9, 3, 9}, {12}).Slice(0, 0, 12, 2);
  ASSERT_FALSE(logits.is_contiguous());
  CrossEntropyResult a = CrossEntropy(logits, targets);
  CrossEntropyResult b = CrossEntropy(logits.Contiguous(), targets.Contiguous());
  EXPECT_EQ(a.loss.Item(), b.loss.Item());
  Tensor ga = CrossEntropyBackward(Tensor::Scalar(1.0), logits, targets, a);
  Tensor gb = CrossEntropyBackward(Tensor::Scalar(1.0), logits.Contiguous(), targets.Contiguous(), b);
  EXPECT_TRUE(AllClose(ga, gb, {0, 0}, "grad").ok());
}

TEST(CrossEntropy, RejectsBadArguments) {
  Tensor logits = Tensor::Zeros({3, 5});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    try {
      CrossEntropy(logits, Tensor::FromInts({0, 5, 1}, {3}));
      FAIL() << "expected OpError";
    } catch (const OpError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("cross_entropy"), std::string::npos) << msg;
      EXPECT_NE(msg.find("target 5 at position 1"), std::string::npos) << msg;
    }
    EXPECT_THROW(CrossEntropy(logits, Tensor::FromInts({0, -1, 1}, {3})), OpError);
    EXPECT_THROW(CrossEntropy(logits, Tensor::FromInts({0, 1}, {2})), OpError);
    EXPECT_THROW(CrossEntropy(Tensor::Zeros({3, 5, 1}), Tensor::FromInts({0, 1, 2}, {3})), OpError);
    EXPECT_THROW(CrossEntropy(logits, Tensor::Zeros({3})), OpError);  // float targets
    EXPECT_THROW(CrossEntropy(logits, Tensor::FromInts({0, 1, 2}, {3}), {.ignore_index = -100,
                                                                          .label_smoothing = 1.5f}),
                 OpError);
    // A custom ignore index is accepted even though it is out of range.
    CrossEntropyResult r = CrossEntropy(logits, Tensor::FromInts({0, 7, 1}, {3}), {.ignore_index = 7});
    EXPECT_EQ(r.count, 2);
  }
}

}  // namespace
}  // namespace tessera::ops::testing
