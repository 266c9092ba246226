// The GEMM entry points beyond plain fp32/bf16: fused epilogues (bias,
// activations, scale, residual) against the unfused composition, the int8
// GEMM bit-exact against an integer loop, the quantized GEMM bit-exact
// against its formula written independently here (and close to the fp32
// GEMM of the dequantized operands), and their argument errors.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/gemm.h"

namespace tessera::ops {
namespace {

using ::testing::HasSubstr;

std::vector<float> Uniform(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

float Act(GemmActivation act, float v) {
  switch (act) {
    case GemmActivation::kRelu:
      return std::max(v, 0.0f);
    case GemmActivation::kGelu:
      return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case GemmActivation::kSilu:
      return v / (1.0f + std::exp(-v));
    default:
      return v;
  }
}

TEST(GemmFused, EveryEpilogueMatchesTheUnfusedComposition) {
  for (const auto& [m, n, k] : {std::tuple{37, 53, 29}, std::tuple{300, 260, 200}, std::tuple{1, 5, 700}}) {
    const std::vector<float> a = Uniform(m * k, 1), b = Uniform(k * n, 2), bias = Uniform(n, 3, -2, 2);
    const std::vector<float> res = Uniform(m * (n + 3), 4), c0 = Uniform(m * n, 5);
    for (GemmActivation act :
         {GemmActivation::kNone, GemmActivation::kRelu, GemmActivation::kGelu, GemmActivation::kSilu}) {
      for (bool use_bias : {false, true}) {
        for (bool use_res : {false, true}) {
          SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " act " << static_cast<int>(act)
                                            << " bias " << use_bias << " residual " << use_res);
          GemmEpilogue e;
          e.bias = use_bias ? bias.data() : nullptr;
          e.activation = act;
          e.scale = 0.75f;
          e.residual = use_res ? res.data() : nullptr;
          e.ldr = n + 3;
          std::vector<float> fused = c0, plain = c0;
          GemmF32(false, false, m, n, k, 1.5f, a.data(), k, b.data(), n, 0.5f, fused.data(), n, e);
          GemmF32(false, false, m, n, k, 1.5f, a.data(), k, b.data(), n, 0.5f, plain.data(), n);
          int bad = 0;
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
              float v = plain[i * n + j] + (use_bias ? bias[j] : 0.0f);
              v = Act(act, v) * 0.75f + (use_res ? res[i * (n + 3) + j] : 0.0f);
              bad += std::fabs(fused[i * n + j] - v) > 1e-5f * (1 + std::fabs(v));
            }
          }
          EXPECT_EQ(bad, 0);
          // The reference path composes the same way.
          ScopedImpl ref(Impl::kReference);
          std::vector<float> r = c0;
          GemmF32(false, false, m, n, k, 1.5f, a.data(), k, b.data(), n, 0.5f, r.data(), n, e);
          for (size_t i = 0; i < r.size(); ++i) bad += std::fabs(r[i] - fused[i]) > 1e-4f * (1 + std::fabs(r[i]));
          EXPECT_EQ(bad, 0);
        }
      }
    }
  }
}

TEST(GemmFused, ResidualOverlappingCIsAnError) {
  std::vector<float> a(16, 1), b(16, 1), c(16, 0);
  GemmEpilogue e;
  e.residual = c.data() + 2;
  e.ldr = 4;
  try {
    GemmF32(false, false, 4, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 4, e);
    ADD_FAILURE() << "no throw";
  } catch (const OpError& err) {
    EXPECT_THAT(std::string(err.what()), HasSubstr("overlaps C"));
  }
  e.residual = a.data();
  e.ldr = 3;
  EXPECT_THROW(GemmF32(false, false, 4, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 4, e), OpError);
}

TEST(GemmInt8, ExactAgainstIntegerLoopAndArgumentErrors) {
  std::mt19937 rng(9);
  for (const auto& [ta, tb, m, n, k] : {std::tuple{false, false, 61, 67, 1031}, std::tuple{true, true, 13, 5, 7},
                                        std::tuple{false, true, 130, 33, 260}, std::tuple{true, false, 1, 1, 1}}) {
    std::vector<uint8_t> a(m * k);
    std::vector<int8_t> b(k * n);
    for (auto& v : a) v = static_cast<uint8_t>(rng());
    for (auto& v : b) v = static_cast<int8_t>(rng());
    std::vector<int32_t> c(m * n, 7), want(m * n, 7);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        for (int p = 0; p < k; ++p) {
          want[i * n + j] += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
        }
      }
    }
    GemmU8S8S32(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(), tb ? k : n, /*accumulate=*/true, c.data(), n);
    EXPECT_EQ(c, want);
  }
  std::vector<uint8_t> a(16);
  std::vector<int8_t> b(16);
  std::vector<int32_t> c(16);
  EXPECT_THROW(GemmU8S8S32(false, false, 4, 4, 4, a.data(), 3, b.data(), 4, false, c.data(), 4), OpError);
  try {
    GemmU8S8S32(false, false, 1, 1, 70000, a.data(), 70000, b.data(), 1, false, c.data(), 1);
    ADD_FAILURE() << "no throw";
  } catch (const OpError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("overflow"));
  }
}

TEST(GemmInt8, QuantizedGemmIsTheFormulaBitForBit) {
  std::mt19937 rng(21);
  for (const auto& [m, n, k, per_col, relu] :
       {std::tuple{50, 70, 300, true, false}, std::tuple{33, 17, 2000, false, true},
        std::tuple{1, 64, 9, true, true}}) {
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
    std::vector<uint8_t> a(m * k);
    std::vector<int8_t> b(k * n);
    for (auto& v : a) v = static_cast<uint8_t>(rng());
    for (auto& v : b) v = static_cast<int8_t>(rng());
    const std::vector<float> b_scale = Uniform(n, 6, 0.001f, 0.01f), bias = Uniform(n, 7, -3, 3);
    QuantizedGemmArgs q;
    q.m = m;
    q.n = n;
    q.k = k;
    q.a = a.data();
    q.lda = k;
    q.a_scale = 0.02f;
    q.a_zero = 131;
    q.b = b.data();
    q.ldb = n;
    q.b_scale = b_scale.data();
    q.b_scale_per_column = per_col;
    q.bias = bias.data();
    q.activation = relu ? GemmActivation::kRelu : GemmActivation::kNone;
    q.ldy = n;
    q.y_scale = 0.05f;
    q.y_zero = 100;
    std::vector<float> y(m * n), want_f(m * n), deq(m * n);
    std::vector<uint8_t> yq(m * n), want_q(m * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        int64_t acc = 0;
        double real = 0;
        const float bs = per_col ? b_scale[j] : b_scale[0];
        for (int p = 0; p < k; ++p) {
          acc += (a[i * k + p] - 131) * b[p * n + j];
          real += (0.02 * (a[i * k + p] - 131)) * (double{bs} * b[p * n + j]);
        }
        float v = (0.02f * bs) * static_cast<float>(acc) + bias[j];
        if (relu) v = std::max(v, 0.0f);
        want_f[i * n + j] = v;
        deq[i * n + j] = static_cast<float>(relu ? std::max(real + bias[j], 0.0) : real + bias[j]);
        want_q[i * n + j] = static_cast<uint8_t>(std::clamp(std::nearbyint(v / 0.05f) + 100.0f, 0.0f, 255.0f));
      }
    }
    q.y_f32 = y.data();
    QuantizedGemm(q);
    EXPECT_EQ(y, want_f);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], deq[i], 1e-4 * (1 + std::fabs(deq[i])));
    q.y_f32 = nullptr;
    q.y_u8 = yq.data();
    QuantizedGemm(q);
    EXPECT_EQ(yq, want_q);
  }
}

TEST(GemmInt8, QuantizedGemmRejectsBadParameters) {
  std::vector<uint8_t> a(16);
  std::vector<int8_t> b(16);
  std::vector<float> s(4, 1.0f), y(16);
  std::vector<uint8_t> yq(16);
  QuantizedGemmArgs q;
  q.m = q.n = q.k = 4;
  q.a = a.data();
  q.lda = 4;
  q.b = b.data();
  q.ldb = 4;
  q.b_scale = s.data();
  q.ldy = 4;
  EXPECT_THROW(QuantizedGemm(q), OpError);  // no output
  q.y_f32 = y.data();
  q.y_u8 = yq.data();
  EXPECT_THROW(QuantizedGemm(q), OpError);  // two outputs
  q.y_f32 = nullptr;
  q.y_scale = 0.0f;
  EXPECT_THROW(QuantizedGemm(q), OpError);
  q.y_scale = 1.0f;
  q.a_zero = 300;
  EXPECT_THROW(QuantizedGemm(q), OpError);
  q.a_zero = 0;
  q.activation = GemmActivation::kGelu;
  EXPECT_THROW(QuantizedGemm(q), OpError);
  q.activation = GemmActivation::kNone;
  EXPECT_NO_THROW(QuantizedGemm(q));
}

}  // namespace
}  // namespace tessera::ops
