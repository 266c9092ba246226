// Flash-attention kernels compiled for the AVX2 + FMA baseline (8 lanes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/ops/attention/attention_internal.h"
#include "tessera/ops/attention/kernel_util.h"

namespace tessera::ops::attention_internal {
namespace avx2 {

using V = __m256;
constexpr int64_t kW = 8;
inline V Zero() { return _mm256_setzero_ps(); }
inline V Load(const float* p) { return _mm256_loadu_ps(p); }
inline void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V Set1(float x) { return _mm256_set1_ps(x); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V Add(V a, V b) { return _mm256_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V Max(V a, V b) { return _mm256_max_ps(a, b); }
inline V Exp(V x) { return detail::Exp256(x); }
inline float ReduceAdd(V x) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
// 16 ymm registers: accumulators R·NV + NV loads + 1 broadcast.
constexpr int RowsFor(int nv) { return nv >= 4 ? 2 : nv == 2 ? 4 : 6; }

#include "tessera/ops/attention/flash_kernels.inc"
#include "tessera/ops/attention/flash_forward.inc"
#include "tessera/ops/attention/flash_backward.inc"

}  // namespace avx2

const FlashKernels& FlashAvx2() {
  static const FlashKernels k{"flash_attention_f32_64x64_avx2", &avx2::Forward, &avx2::Backward};
  return k;
}

}  // namespace tessera::ops::attention_internal
