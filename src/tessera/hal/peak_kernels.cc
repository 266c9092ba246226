#include "tessera/hal/peak_kernels.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "tessera/base/check.h"
#include "tessera/hal/cpu_features.h"

namespace tessera::hal::internal {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// (_mm512_reduce_add_ps trips a GCC 12 -Wuninitialized false positive.)
__attribute__((target("avx512f"))) float HorizontalSum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

// 16 accumulators: FMA latency 4-6 cycles x 2-3 pipes needs >= 12 chains.
#define TESSERA_REPEAT16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

__attribute__((target("avx512f"))) float Fp32Avx512(int64_t iters) {
#define DECL(i) __m512 acc##i = _mm512_set1_ps(0.5f + 0.01f * i);
  TESSERA_REPEAT16(DECL)
#undef DECL
  // acc = acc * m + c converges to c / (1 - m) = 1: stays normal, never overflows.
  const __m512 m = _mm512_set1_ps(0.999f);
  const __m512 c = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, m, c);
    TESSERA_REPEAT16(STEP)
#undef STEP
    __asm__ volatile("" ::: "memory");
  }
  __m512 sum = _mm512_setzero_ps();
#define SUM(i) sum = _mm512_add_ps(sum, acc##i);
  TESSERA_REPEAT16(SUM)
#undef SUM
  return HorizontalSum(sum);
}

// AVX2 has 16 ymm registers: 12 accumulators + 2 constants.
#define TESSERA_REPEAT12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx2,fma"))) float Fp32Avx2(int64_t iters) {
#define DECL(i) __m256 acc##i = _mm256_set1_ps(0.5f + 0.01f * i);
  TESSERA_REPEAT12(DECL)
#undef DECL
  const __m256 m = _mm256_set1_ps(0.999f);
  const __m256 c = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, m, c);
    TESSERA_REPEAT12(STEP)
#undef STEP
    __asm__ volatile("" ::: "memory");
  }
  __m256 sum = _mm256_setzero_ps();
#define SUM(i) sum = _mm256_add_ps(sum, acc##i);
  TESSERA_REPEAT12(SUM)
#undef SUM
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Avx512(int64_t iters) {
#define DECL(i) __m512 acc##i = _mm512_set1_ps(0.01f * i);
  TESSERA_REPEAT16(DECL)
#undef DECL
  // Each lane adds 2 * 2^-20 per step: stays normal and finite for any
  // realistic iteration count.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.0009765625f), _mm512_set1_ps(0.0009765625f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.0009765625f), _mm512_set1_ps(0.0009765625f));
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
    TESSERA_REPEAT16(STEP)
#undef STEP
    __asm__ volatile("" ::: "memory");
  }
  __m512 sum = _mm512_setzero_ps();
#define SUM(i) sum = _mm512_add_ps(sum, acc##i);
  TESSERA_REPEAT16(SUM)
#undef SUM
  return HorizontalSum(sum);
}

#undef TESSERA_REPEAT16
#undef TESSERA_REPEAT12

// Keeps loop results observable.
volatile float g_sink = 0;

// Wall time of `threads` threads each running `iters` iterations, timed
// from after a barrier (so waking the team is not counted) to the end of
// the slowest thread.
double TimedRun(const FmaLoop& loop, int threads, int64_t iters) {
  double start = 0, elapsed = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp barrier
#pragma omp master
    start = Now();
    const float r = loop.run(iters);
#pragma omp barrier
#pragma omp master
    elapsed = Now() - start;
#pragma omp critical(tessera_peak_sink)
    g_sink = g_sink + r;
  }
  return elapsed;
}

}  // namespace

FmaLoop Fp32Loop() {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.avx512f) return {"avx512", 16 * 16 * 2.0, &Fp32Avx512};
  TESSERA_CHECK(f.avx2 && f.fma, "this CPU lacks AVX2+FMA, which the x86-64-v3 build requires");
  return {"avx2", 12 * 8 * 2.0, &Fp32Avx2};
}

FmaLoop Bf16Loop() {
  const CpuFeatures& f = GetCpuFeatures();
  // Each VDPBF16PS: 16 fp32 lanes x 2 bf16 products, 2 FLOPs per multiply-add.
  if (f.avx512f && f.avx512_bf16) return {"avx512_bf16", 16 * 16 * 2 * 2.0, &Bf16Avx512};
  FmaLoop fp32 = Fp32Loop();
  fp32.isa = "fp32";
  return fp32;
}

int64_t CalibrateIters(const FmaLoop& loop, double seconds) {
  TESSERA_CHECK(seconds > 0);
  // Grow on one thread, called directly (no OpenMP team whose wake-up
  // latency could dominate a short run), until a run takes >= seconds / 4.
  int64_t iters = 1 << 12;
  double t = 0;
  for (;;) {
    const double t0 = Now();
    g_sink = g_sink + loop.run(iters);
    t = Now() - t0;
    if (t >= seconds / 4 || iters >= (int64_t{1} << 40)) break;
    iters *= 2;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / t));
}

double MeasureLoopFlops(const FmaLoop& loop, int threads, int64_t iters, int reps) {
  TESSERA_CHECK(threads >= 1 && reps >= 1 && iters >= 1);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double elapsed = TimedRun(loop, threads, iters);
    best = std::max(best, static_cast<double>(threads) * static_cast<double>(iters) * loop.flops_per_iter / elapsed);
  }
  return best;
}

TriadBuffers::TriadBuffers(size_t n, int threads) : n_(n) {
  TESSERA_CHECK(n > 0 && threads >= 1);
  const size_t bytes = (n * sizeof(double) + 63) / 64 * 64;
  a_ = static_cast<double*>(std::aligned_alloc(64, bytes));
  b_ = static_cast<double*>(std::aligned_alloc(64, bytes));
  c_ = static_cast<double*>(std::aligned_alloc(64, bytes));
  TESSERA_CHECK(a_ && b_ && c_, "out of memory allocating 3 x {} bytes for the triad", bytes);
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < count; ++i) {
    a_[i] = 0.0;
    b_[i] = 1.0;
    c_[i] = 2.0;
  }
}

TriadBuffers::~TriadBuffers() {
  std::free(a_);
  std::free(b_);
  std::free(c_);
}

double TriadBuffers::Measure(int threads, int reps) {
  TESSERA_CHECK(threads >= 1 && reps >= 1);
  double* __restrict a = a_;
  const double* __restrict b = b_;
  const double* __restrict c = c_;
  const int64_t count = static_cast<int64_t>(n_);
  const double s = 3.0;
  double best = 0;
  double start = 0;
  // One team for all passes, each timed from a barrier to the loop's
  // closing barrier, so waking threads is not counted. Pass 0 is warm-up.
#pragma omp parallel num_threads(threads)
  for (int r = 0; r <= reps; ++r) {
#pragma omp barrier
#pragma omp master
    start = Now();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < count; ++i) a[i] = b[i] + s * c[i];
#pragma omp master
    if (r > 0) best = std::max(best, 24.0 * static_cast<double>(count) / (Now() - start));
  }
  TESSERA_CHECK(a[0] == 7.0 && a[count - 1] == 7.0, "triad produced wrong values");
  return best;
}

}  // namespace tessera::hal::internal
