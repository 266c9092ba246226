// GEMM throughput: Tessera's GemmF32 / GemmBF16F32 in GFLOP/s (2*M*N*K per
// call) on squares and on training-shaped problems (GPT linear layers:
// forward, input gradient with trans_b, weight gradient with trans_a), on 1
// and 2 threads. When oneDNN's runtime (libdnnl.so.2) is installed it is
// loaded with dlopen and measured on the same problems ("onednn" rows), so
// one run prints Tessera's ratio to it. Inputs are allocated once per
// benchmark; C is overwritten (beta = 0). Rates of 1-thread rows use the
// thread's CPU time (robust on a shared machine), multi-thread rows wall time.
// MatMul rows time the tensor-level operator (forward, or forward+backward).
//   ./gemm_bench --benchmark_filter=/t1/ --benchmark_min_time=0.2
//                --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "tessera/base/float16.h"
#include "tessera/ops/matmul/gemm.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/tensor/rng.h"

namespace {

using tessera::bf16;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool ta, tb;
};

const Shape kShapes[] = {
    {"sq256", 256, 256, 256, false, false},       {"sq512", 512, 512, 512, false, false},
    {"sq1024", 1024, 1024, 1024, false, false},   {"sq2048", 2048, 2048, 2048, false, false},
    {"sq1024_tn", 1024, 1024, 1024, true, false}, {"sq1024_nt", 1024, 1024, 1024, false, true},
    // GPT-ish layers on M = batch*sequence tokens.
    {"tok1024_d64_ff64", 1024, 64, 64, false, false},
    {"tok1024_d128_qkv", 1024, 384, 128, false, false},
    {"tok4096_d512_out64", 4096, 64, 512, false, false},
    {"tok4096_d256_qkv", 4096, 768, 256, false, false},
    {"tok4096_d256_up", 4096, 1024, 256, false, false},
    {"tok4096_d1024_down", 4096, 256, 1024, false, false},
    {"tok4096_dX_nt", 4096, 256, 1024, false, true},   // grad_x = grad_y @ W^T
    {"tok4096_dW_tn", 256, 1024, 4096, true, false},   // grad_W = x^T @ grad_y
    {"tok2048_dW_small_tn", 128, 128, 2048, true, false},
};

// oneDNN's row-major GEMMs, if the runtime library is present.
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
using DnnlGemmBf16 = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                             const uint16_t*, int64_t, float, float*, int64_t);
struct OneDnn {
  DnnlSgemm sgemm = nullptr;
  DnnlGemmBf16 gemm_bf16 = nullptr;
};
const OneDnn& LoadOneDnn() {
  static OneDnn lib = [] {
    OneDnn l;
    if (void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL); h != nullptr) {
      l.sgemm = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
      l.gemm_bf16 = reinterpret_cast<DnnlGemmBf16>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
    }
    return l;
  }();
  return lib;
}

enum class Impl { kTessera, kOneDnn };

template <typename T>
void BM_Gemm(benchmark::State& state, Shape s, int threads, Impl impl) {
  std::vector<T> a(s.m * s.k), b(s.k * s.n);
  std::vector<float> c(s.m * s.n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<float>(i % 17) * 0.0625f - 0.5f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<float>(i % 13) * 0.0625f - 0.375f);
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  const OneDnn& dnnl = LoadOneDnn();
  for (auto _ : state) {
    if (impl == Impl::kTessera) {
      if constexpr (std::is_same_v<T, float>) {
        tessera::ops::GemmF32(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
      } else {
        tessera::ops::GemmBF16F32(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                                  s.n);
      }
    } else if constexpr (std::is_same_v<T, float>) {
      dnnl.sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                 c.data(), s.n);
    } else {
      dnnl.gemm_bf16(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
                     reinterpret_cast<const uint16_t*>(a.data()), lda, reinterpret_cast<const uint16_t*>(b.data()),
                     ldb, 0.0f, c.data(), s.n);
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(saved);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(impl == Impl::kOneDnn ? "onednn"
                                       : (std::is_same_v<T, float> ? tessera::ops::GemmKernelName()
                                                                   : tessera::ops::GemmBf16KernelName()));
}

// MatMul on tensors, forward or forward+backward (3 GEMMs), including the
// bf16 rounding pass and batch handling: what a training step pays.
struct MatMulShape {
  const char* name;
  tessera::Shape a, b;
  bool trans_b;
};
const MatMulShape kMatMulShapes[] = {
    {"linear_4096x256_to_1024", {8, 512, 256}, {256, 1024}, false},
    {"linear_4096x1024_to_256", {8, 512, 1024}, {1024, 256}, false},
    {"attn_scores_b32_t256_d64", {32, 256, 64}, {32, 256, 64}, true},
};

void BM_MatMul(benchmark::State& state, MatMulShape s, tessera::DType dtype, bool backward, int threads) {
  tessera::Tensor a = tessera::Tensor::Empty(s.a, dtype), b = tessera::Tensor::Empty(s.b, dtype);
  tessera::FillUniform(a, 1, -1.0f, 1.0f);
  tessera::FillUniform(b, 2, -1.0f, 1.0f);
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  tessera::Tensor out = tessera::ops::MatMul(a, b, false, s.trans_b);
  tessera::Tensor g = out.Clone();
  for (auto _ : state) {
    tessera::Tensor y = tessera::ops::MatMul(a, b, false, s.trans_b);
    benchmark::DoNotOptimize(y.raw_data());
    if (backward) {
      tessera::ops::MatMulGrads grads = tessera::ops::MatMulBackward(g, a, b, false, s.trans_b);
      benchmark::DoNotOptimize(grads.grad_a.raw_data());
    }
  }
  omp_set_num_threads(saved);
  double flops = 2.0 * static_cast<double>(out.numel()) * (s.trans_b ? s.b.back() : s.b[s.b.size() - 2]);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * (backward ? 3 : 1) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// With --benchmark_repetitions=N, the "_max" rows report the best repetition
// (of a rate counter): the least disturbed one on a shared machine.
double MaxOf(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

int RegisterAll() {
  const bool have_dnnl = LoadOneDnn().sgemm != nullptr && LoadOneDnn().gemm_bf16 != nullptr;
  for (const Shape& s : kShapes) {
    for (int threads : {1, 2}) {
      for (Impl impl : {Impl::kTessera, Impl::kOneDnn}) {
        if (impl == Impl::kOneDnn && !have_dnnl) continue;
        const char* who = impl == Impl::kTessera ? "tessera" : "onednn";
        auto* f32 = benchmark::RegisterBenchmark(fmt::format("f32/{}/t{}/{}", s.name, threads, who).c_str(),
                                                 BM_Gemm<float>, s, threads, impl);
        auto* h16 = benchmark::RegisterBenchmark(fmt::format("bf16/{}/t{}/{}", s.name, threads, who).c_str(),
                                                 BM_Gemm<bf16>, s, threads, impl);
        for (benchmark::internal::Benchmark* b : {f32, h16}) {
          if (threads > 1) b->UseRealTime();
          b->ComputeStatistics("max", MaxOf);
        }
      }
    }
  }
  for (const MatMulShape& s : kMatMulShapes) {
    for (tessera::DType dtype : {tessera::DType::kF32, tessera::DType::kBF16}) {
      for (bool backward : {false, true}) {
        for (int threads : {1, 2}) {
          auto* b = benchmark::RegisterBenchmark(fmt::format("matmul_{}/{}/{}/t{}", backward ? "fwd_bwd" : "fwd",
                                                             tessera::DTypeName(dtype), s.name, threads)
                                                     .c_str(),
                                                 BM_MatMul, s, dtype, backward, threads);
          if (threads > 1) b->UseRealTime();
          b->ComputeStatistics("max", MaxOf);
        }
      }
    }
  }
  return 0;
}
const int g_registered = RegisterAll();

}  // namespace

BENCHMARK_MAIN();
