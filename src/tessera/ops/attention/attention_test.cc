// Causal attention: parity of the flash kernels against the reference
// (T = 1, T not a multiple of the 64-row tile, Dh 8..128, fp32/bf16/fp16),
// finite-difference gradients, known values and argument errors.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/attention/attention.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

ParityCase MakeCase(int64_t b, int64_t h, int64_t t, int64_t dh, bool f16 = false, int fd_samples = 8) {
  ParityCase c;
  c.op = "causal_attention";
  c.name = fmt::format("B={} H={} T={} Dh={}", b, h, t, dh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    Shape s = {b, h, t, dh};
    return Tensors{RandomTensor(s, dtype, seed, -2.0f, 2.0f), RandomTensor(s, dtype, seed + 1, -2.0f, 2.0f),
                   RandomTensor(s, dtype, seed + 2)};
  };
  c.forward = [scale](const Tensors& in) {
    AttentionResult r = CausalAttention(in[0], in[1], in[2], scale);
    return Tensors{r.out, r.lse};
  };
  c.backward = [scale](const Tensors& in, const Tensors& out, const Tensors& gout) {
    AttentionResult fwd{out[0], out[1]};
    AttentionGrads g = CausalAttentionBackward(gout[0], in[0], in[1], in[2], fwd, scale);
    return Tensors{g.grad_q, g.grad_k, g.grad_v};
  };
  c.differentiable_outputs = {true, false};
  c.fd_samples = fd_samples;
  if (f16) c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      MakeCase(1, 1, 1, 8, true),
      MakeCase(2, 3, 5, 16, true),
      MakeCase(1, 2, 64, 32),
      MakeCase(1, 2, 70, 8),      // T not a multiple of the tile, Dh below one vector
      MakeCase(2, 1, 129, 64, true),
      MakeCase(1, 1, 40, 24),     // Dh not a multiple of the vector width
      MakeCase(1, 2, 100, 128, false, 4),
      MakeCase(4, 4, 96, 32, false, 4),  // enough heads for threads
  };
}

TEST(CausalAttention, SingleTokenReturnsV) {
  Tensor q = RandomTensor({2, 3, 1, 16}, DType::kF32, 1);
  Tensor k = RandomTensor({2, 3, 1, 16}, DType::kF32, 2);
  Tensor v = RandomTensor({2, 3, 1, 16}, DType::kF32, 3);
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    AttentionResult r = CausalAttention(q, k, v, 0.25f);
    EXPECT_TRUE(AllClose(r.out, v, {1e-6, 1e-6}, "out").ok());
    // One key: lse is the single score.
    std::vector<float> qv = q.ToFloatVector(), kv = k.ToFloatVector(), lse = r.lse.ToFloatVector();
    for (int bh = 0; bh < 6; ++bh) {
      double s = 0;
      for (int c = 0; c < 16; ++c) s += qv[bh * 16 + c] * kv[bh * 16 + c];
      EXPECT_NEAR(lse[bh], 0.25 * s, 1e-5);
    }
  }
}

TEST(CausalAttention, EqualKeysAverageTheVisibleValues) {
  // All keys equal → uniform weights over the causal prefix: out_i = mean(v_0..v_i).
  const int64_t t = 150, dh = 32;
  Tensor q = RandomTensor({1, 1, t, dh}, DType::kF32, 4);
  Tensor k = Tensor::Full({1, 1, t, dh}, 0.5);
  Tensor v = RandomTensor({1, 1, t, dh}, DType::kF32, 5);
  std::vector<float> vv = v.ToFloatVector();
  std::vector<float> expect(t * dh);
  for (int64_t c = 0; c < dh; ++c) {
    double run = 0;
    for (int64_t i = 0; i < t; ++i) {
      run += vv[i * dh + c];
      expect[i * dh + c] = static_cast<float>(run / (i + 1));
    }
  }
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    AttentionResult r = CausalAttention(q, k, v, 0.3f);
    EXPECT_TRUE(AllClose(r.out, Tensor::FromVector(expect, {1, 1, t, dh}), {1e-5, 1e-5}, "out").ok());
  }
}

TEST(CausalAttention, AcceptsStridedViews) {
  // Heads split from a [B, T, H, Dh] tensor by a transposed view, as models do.
  Tensor q = RandomTensor({2, 37, 3, 16}, DType::kF32, 6).Transpose(1, 2);
  Tensor k = RandomTensor({2, 37, 3, 16}, DType::kF32, 7).Transpose(1, 2);
  Tensor v = RandomTensor({2, 37, 3, 16}, DType::kF32, 8).Transpose(1, 2);
  Tensor g = RandomTensor({2, 37, 3, 16}, DType::kF32, 9).Transpose(1, 2);
  ASSERT_FALSE(q.is_contiguous());
  AttentionResult a = CausalAttention(q, k, v, 0.25f);
  AttentionResult b = CausalAttention(q.Contiguous(), k.Contiguous(), v.Contiguous(), 0.25f);
  EXPECT_TRUE(AllClose(a.out, b.out, {0, 0}, "out").ok());
  AttentionGrads ga = CausalAttentionBackward(g, q, k, v, a, 0.25f);
  AttentionGrads gb = CausalAttentionBackward(g.Contiguous(), q.Contiguous(), k.Contiguous(), v.Contiguous(), b, 0.25f);
  EXPECT_TRUE(AllClose(ga.grad_q, gb.grad_q, {0, 0}, "dq").ok());
  EXPECT_TRUE(AllClose(ga.grad_k, gb.grad_k, {0, 0}, "dk").ok());
  EXPECT_TRUE(AllClose(ga.grad_v, gb.grad_v, {0, 0}, "dv").ok());
}

TEST(CausalAttention, RejectsBadArguments) {
  Tensor q = Tensor::Zeros({1, 2, 4, 8});
  EXPECT_THROW(CausalAttention(q, Tensor::Zeros({1, 2, 5, 8}), q, 1.0f), OpError);
  EXPECT_THROW(CausalAttention(q, q, Tensor::Zeros({1, 2, 4, 8}, DType::kBF16), 1.0f), OpError);
  EXPECT_THROW(CausalAttention(Tensor::Zeros({2, 4, 8}), Tensor::Zeros({2, 4, 8}), Tensor::Zeros({2, 4, 8}), 1.0f),
               OpError);
  AttentionResult fwd = CausalAttention(q, q, q, 1.0f);
  EXPECT_THROW(CausalAttentionBackward(Tensor::Zeros({1, 2, 4, 4}), q, q, q, fwd, 1.0f), OpError);
  AttentionResult bad = fwd;
  bad.lse = Tensor::Zeros({1, 2, 5});
  EXPECT_THROW(CausalAttentionBackward(q, q, q, q, bad, 1.0f), OpError);
  try {
    CausalAttention(q, Tensor::Zeros({1, 2, 5, 8}), q, 1.0f);
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("causal_attention"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[1, 2, 5, 8]"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera::ops::testing
