// Unit tests of the raw GEMM entry points (against a double-precision oracle,
// with alpha/beta/leading-dimension variations, threading and edge tiles) and
// of MatMul's argument checks and layout handling.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/gemm.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/ops/testing/parity.h"
#include "tessera/tensor/rng.h"
#include "tessera/tile/kernels.h"

namespace tessera::ops {
namespace {

using ::testing::HasSubstr;

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad;  // extra leading-dimension padding of every operand
  float alpha, beta;
};

std::vector<GemmCase> Cases() {
  std::vector<GemmCase> out;
  const int64_t sizes[][3] = {{1, 1, 1},    {5, 7, 3},     {12, 32, 1},    {13, 33, 257}, {97, 65, 300},
                              {257, 129, 513}, {600, 700, 40}, {31, 1000, 17}, {1000, 5, 64},
                              {37, 45, 1024}};
  int i = 0;
  for (auto& s : sizes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        float alpha = (i % 3 == 0) ? 1.0f : 1.5f;
        float beta = (i % 4 == 0) ? 0.0f : (i % 4 == 1 ? 1.0f : -0.5f);
        out.push_back({ta, tb, s[0], s[1], s[2], (i % 2) * 3, alpha, beta});
        ++i;
      }
    }
  }
  return out;
}

template <typename T>
void RunGemm(const GemmCase& g, const T* a, int64_t lda, const T* b, int64_t ldb, float* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    GemmF32(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
  } else {
    GemmBF16F32(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
  }
}

// Checks one case against a double-precision oracle; relative bound scales
// with sum |alpha a b| + |beta c|, so it is independent of summation order.
template <typename T>
void CheckGemm(const GemmCase& g, double rel) {
  SCOPED_TRACE(::testing::Message() << "ta=" << g.ta << " tb=" << g.tb << " m=" << g.m << " n=" << g.n
                                    << " k=" << g.k << " pad=" << g.pad << " alpha=" << g.alpha
                                    << " beta=" << g.beta);
  int64_t lda = (g.ta ? g.m : g.k) + g.pad, ldb = (g.tb ? g.k : g.n) + g.pad, ldc = g.n + g.pad;
  int64_t a_rows = g.ta ? g.k : g.m, b_rows = g.tb ? g.n : g.k;
  std::vector<T> a(a_rows * lda), b(b_rows * ldb);
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(UniformAt(11, i) * 2 - 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(UniformAt(12, i) * 2 - 1);
  std::vector<float> c(g.m * ldc);
  for (size_t i = 0; i < c.size(); ++i) c[i] = g.beta == 0.0f ? NAN : UniformAt(13, i) * 2 - 1;
  std::vector<float> c0 = c;
  RunGemm(g, a.data(), lda, b.data(), ldb, c.data(), ldc);
  int bad = 0;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      float got = c[i * ldc + j];
      if (j >= g.n) {  // padding must be untouched
        if (!(std::isnan(got) && std::isnan(c0[i * ldc + j])) && got != c0[i * ldc + j]) ++bad;
        continue;
      }
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        double x = static_cast<float>(g.ta ? a[p * lda + i] : a[i * lda + p]);
        double y = static_cast<float>(g.tb ? b[j * ldb + p] : b[p * ldb + j]);
        acc += x * y;
        mag += std::fabs(x * y);
      }
      double want = g.alpha * acc, bound = std::fabs(g.alpha) * mag;
      if (g.beta != 0.0f) {
        want += g.beta * static_cast<double>(c0[i * ldc + j]);
        bound += std::fabs(g.beta * c0[i * ldc + j]);
      }
      if (!(std::fabs(got - want) <= rel * bound + 1e-6)) {
        if (++bad <= 5) ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(Gemm, F32MatchesOracle) {
  for (const GemmCase& g : Cases()) CheckGemm<float>(g, 2e-6);
}

TEST(Gemm, BF16MatchesOracle) {
  for (const GemmCase& g : Cases()) CheckGemm<bf16>(g, 2e-6);
}

// Runs `body` with each tile kernel of `type` this CPU can execute as the
// default (every ISA and register tile, bf16 both native and through fp32),
// plus copies of the first with tiny blocks (every blocking loop, odd K
// blocks and edge tiles taken).
template <typename F>
void ForEachKernel(tile::GemmType type, F&& body) {
  std::vector<tile::KernelInfo> kernels;
  for (const tile::KernelInfo* k : tile::AllKernels()) {
    if (k->type == type && k->supported()) kernels.push_back(*k);
  }
  ASSERT_FALSE(kernels.empty());
  tile::KernelInfo tiny = kernels.front();
  tiny.mc = 2 * tiny.mr;
  tiny.nc = 2 * tiny.nr;
  tiny.kc = tiny.group == 1 ? 13 : 17;
  kernels.push_back(tiny);
  for (const tile::KernelInfo& k : kernels) {
    SCOPED_TRACE(fmt::format("{} mc {} nc {} kc {}", k.name, k.mc, k.nc, k.kc));
    tile::SetDefaultKernelForTesting(type, &k);
    body();
    tile::SetDefaultKernelForTesting(type, nullptr);
  }
}

TEST(Gemm, EveryKernelMatchesOracle) {
  ForEachKernel(tile::GemmType::kF32, [] {
    for (const GemmCase& g : Cases()) {
      if (g.m * g.n * g.k <= 5'000'000) CheckGemm<float>(g, 2e-6);
    }
    CheckGemm<float>({false, true, 300, 260, 200, 1, 1.0f, 0.5f}, 2e-6);  // threaded
  });
  ForEachKernel(tile::GemmType::kBf16F32, [] {
    for (const GemmCase& g : Cases()) {
      if (g.m * g.n * g.k <= 5'000'000) CheckGemm<bf16>(g, 2e-6);
    }
    CheckGemm<bf16>({true, false, 300, 260, 201, 1, 1.0f, 0.0f}, 2e-6);
  });
}

TEST(Gemm, ReferenceMatchesOracle) {
  ScopedImpl ref(Impl::kReference);
  for (const GemmCase& g : Cases()) {
    if (g.m * g.n * g.k > 5'000'000) continue;
    CheckGemm<float>(g, 2e-6);
    CheckGemm<bf16>(g, 2e-6);
  }
}

TEST(Gemm, InsideParallelRegionAndThreadCounts) {
  GemmCase g{false, true, 300, 260, 200, 1, 1.0f, 0.0f};
  int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    CheckGemm<float>(g, 2e-6);
    CheckGemm<bf16>(g, 2e-6);
  }
  omp_set_num_threads(saved);
#pragma omp parallel num_threads(2)
  {
    // Each thread runs its own GEMM single-threaded; failures are collected
    // by gtest, which is thread-safe on this platform.
    CheckGemm<float>({true, false, 70 + omp_get_thread_num(), 90, 150, 2, 0.5f, 1.0f}, 2e-6);
  }
}

TEST(Gemm, ZeroKScalesC) {
  std::vector<float> c = {1, 2, 3, 4};
  GemmF32(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  GemmF32(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST(Gemm, BadArgumentsThrow) {
  std::vector<float> a(64), b(64), c(64);
  std::vector<bf16> ah(64), bh(64);
  EXPECT_THROW(GemmF32(false, false, 4, 4, 4, 1, a.data(), 3, b.data(), 4, 0, c.data(), 4), OpError);
  EXPECT_THROW(GemmF32(false, true, 4, 4, 4, 1, a.data(), 4, b.data(), 3, 0, c.data(), 4), OpError);
  EXPECT_THROW(GemmF32(false, false, 4, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 2), OpError);
  EXPECT_THROW(GemmF32(false, false, -1, 4, 4, 1, a.data(), 4, b.data(), 4, 0, c.data(), 4), OpError);
  EXPECT_THROW(GemmF32(false, false, 4, 4, 4, 1, nullptr, 4, b.data(), 4, 0, c.data(), 4), OpError);
  EXPECT_THROW(GemmBF16F32(true, false, 4, 8, 2, 1, ah.data(), 3, bh.data(), 8, 0, c.data(), 8), OpError);
  try {
    GemmF32(true, false, 5, 4, 3, 1, a.data(), 4, b.data(), 4, 0, c.data(), 4);
    ADD_FAILURE() << "no throw";
  } catch (const OpError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("lda=4 < 5"));
  }
}

TEST(Gemm, KernelNameNamesTheIsa) {
  std::string name = GemmKernelName();
  EXPECT_THAT(name, HasSubstr("f32_gemm_"));
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_THAT(name, HasSubstr("avx512"));
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_THAT(name, HasSubstr("avx2"));
  }
}

TEST(MatMul, BadShapesNameBothOperands) {
  Tensor a = Tensor::Zeros({2, 3, 4}), b = Tensor::Zeros({5, 6});
  try {
    MatMul(a, b);
    ADD_FAILURE() << "no throw";
  } catch (const OpError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("[2, 3, 4]"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("[5, 6]"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("matmul"));
  }
  EXPECT_NO_THROW(MatMul(a, Tensor::Zeros({6, 4}), false, true));
  EXPECT_THROW(MatMul(a, Tensor::Zeros({4, 6}, DType::kBF16)), OpError);
  EXPECT_THROW(MatMul(a, Tensor::Zeros({3, 4, 6})), OpError);     // leading axes differ
  EXPECT_THROW(MatMul(Tensor::Zeros({4}), Tensor::Zeros({4, 6})), OpError);
  EXPECT_THROW(MatMul(a, Tensor::FromInts({1, 2, 3, 4}, {4, 1})), OpError);
  EXPECT_THROW(MatMulBackward(Tensor::Zeros({2, 3, 5}), a, Tensor::Zeros({4, 6}), false, false), OpError);
  ScopedImpl ref(Impl::kReference);
  EXPECT_THROW(MatMul(a, b), OpError);
}

TEST(MatMul, StridedAndBroadcastViewsMatchReference) {
  Tensor base = testing::RandomTensor({6, 20, 18}, DType::kF32, 3);
  Tensor a = base.Slice(2, 0, 18, 2);          // [6, 20, 9], column stride 2: copied
  Tensor a2 = base.Slice(0, 0, 6, 2);          // [3, 20, 18], gapped batch: looped, not folded
  Tensor b = testing::RandomTensor({9, 7}, DType::kF32, 4);
  Tensor bb = testing::RandomTensor({1, 18, 7}, DType::kF32, 5).Expand({3, 18, 7});  // stride-0 batch
  std::vector<std::pair<Tensor, Tensor>> pairs = {{a, b}, {a2, bb}, {a2, bb.Slice(0, 0, 1).Squeeze(0)}};
  for (auto& [x, y] : pairs) {
    Tensor got = MatMul(x, y);
    Tensor want;
    {
      ScopedImpl ref(Impl::kReference);
      want = MatMul(x, y);
    }
    Status st = testing::AllClose(got, want, {1e-5, 1e-5}, "matmul " + ShapeString(x.shape()));
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

TEST(MatMul, EmptyDims) {
  Tensor out = MatMul(Tensor::Zeros({0, 4}), Tensor::Zeros({4, 3}));
  EXPECT_EQ(out.shape(), (Shape{0, 3}));
  Tensor z = MatMul(Tensor::Full({2, 0}, 1.0), Tensor::Full({0, 3}, 1.0));
  EXPECT_EQ(z.ToFloatVector(), std::vector<float>(6, 0.0f));
  MatMulGrads g = MatMulBackward(Tensor::Zeros({0, 5, 3}), Tensor::Zeros({0, 5, 4}), Tensor::Full({4, 3}, 1.0),
                                 false, false);
  EXPECT_EQ(g.grad_b.ToFloatVector(), std::vector<float>(12, 0.0f));
}

}  // namespace
}  // namespace tessera::ops
