// Flash-attention kernels compiled for AVX-512 (16 lanes); selected at run
// time only on CPUs that have it (see attention.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/ops/attention/attention_internal.h"
#include "tessera/ops/attention/kernel_util.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")

namespace tessera::ops::attention_internal {
namespace avx512 {

using V = __m512;
constexpr int64_t kW = 16;
inline V Zero() { return _mm512_setzero_ps(); }
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V Set1(float x) { return _mm512_set1_ps(x); }
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V Add(V a, V b) { return _mm512_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V Max(V a, V b) { return _mm512_max_ps(a, b); }
inline V Exp(V x) { return detail::Exp512(x); }
inline float ReduceAdd(V x) { return _mm512_reduce_add_ps(x); }
// 32 zmm registers: accumulators R·NV + NV loads + 1 broadcast.
constexpr int RowsFor(int nv) { return nv >= 4 ? 4 : 8; }

#include "tessera/ops/attention/flash_kernels.inc"
#include "tessera/ops/attention/flash_forward.inc"
#include "tessera/ops/attention/flash_backward.inc"

}  // namespace avx512

const FlashKernels& FlashAvx512() {
  static const FlashKernels k{"flash_attention_f32_64x64_avx512", &avx512::Forward, &avx512::Backward};
  return k;
}

}  // namespace tessera::ops::attention_internal

#pragma GCC pop_options
