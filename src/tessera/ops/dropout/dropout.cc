// Dropout with a counter-based (Philox-4x32-10) mask. The reference calls
// UniformAt per element; the optimized kernel evaluates the same Philox
// rounds for 16 (AVX-512) or 8 (AVX2) counters at once with explicit
// intrinsics (the auto-vectorized loop used 64-bit multiplies, ~4x slower),
// so both produce bit-identical masks for any chunking and thread count.
#include "tessera/ops/dropout/dropout.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/binary_kernels.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/elementwise/simd.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

// Uniform in [0, 1) for stream element `index`: exactly UniformAt(seed, index).
TESSERA_ALWAYS_INLINE float PhiloxUniform(uint64_t seed, uint64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return static_cast<float>(c0 >> 8) * (1.0f / 16777216.0f);
}

// Scalar tail / fallback: y[i] = UniformAt(seed, first + i) >= p ? x[i] * scale : 0.
void DropoutScalar(const float* x, uint64_t seed, uint64_t first, float p, float scale, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = PhiloxUniform(seed, first + static_cast<uint64_t>(i)) >= p ? x[i] * scale : 0.0f;
}

// Round keys of the 10 Philox rounds.
struct RoundKeys {
  uint32_t k0[10], k1[10];
  explicit RoundKeys(uint64_t seed) {
    uint32_t a = static_cast<uint32_t>(seed), b = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r, a += 0x9E3779B9u, b += 0xBB67AE85u) {
      k0[r] = a;
      k1[r] = b;
    }
  }
};

// GCC 12 flags the intrinsics' internal undefined-vector idiom.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 16 lanes of Philox-4x32-10 (counter words c0 = low, c1 = high 32 bits of
// the index, c2 = c3 = 0), returning the first output word. 32x32 -> 64-bit
// products come from vpmuludq on even and odd lanes.
TESSERA_TARGET_AVX512 inline __m512i Philox16(__m512i c0, __m512i c1, const RoundKeys& keys) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __mmask16 odd = 0xAAAA;
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  for (int r = 0; r < 10; ++r) {
    __m512i e0 = _mm512_mul_epu32(c0, m0), o0 = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0);
    __m512i e1 = _mm512_mul_epu32(c2, m1), o1 = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1);
    __m512i hi0 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e0, 32), o0);
    __m512i lo0 = _mm512_mask_blend_epi32(odd, e0, _mm512_slli_epi64(o0, 32));
    __m512i hi1 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e1, 32), o1);
    __m512i lo1 = _mm512_mask_blend_epi32(odd, e1, _mm512_slli_epi64(o1, 32));
    __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(keys.k0[r])));
    __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(keys.k1[r])));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return c0;
}

TESSERA_TARGET_AVX512 void Dropout512(const float* x, uint64_t seed, uint64_t first, float p, float scale, float* y,
                                      int64_t n) {
  const RoundKeys keys(seed);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 vp = _mm512_set1_ps(p), vscale = _mm512_set1_ps(scale), unit = _mm512_set1_ps(1.0f / 16777216.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint64_t index = first + static_cast<uint64_t>(i);
    if (static_cast<uint32_t>(index) > 0xFFFFFFFFu - 15u) {  // low word wraps inside the block
      DropoutScalar(x + i, seed, index, p, scale, y + i, 16);
      continue;
    }
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(index))), lane);
    __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(index >> 32)));
    __m512i r = Philox16(c0, c1, keys);
    __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r, 8)), unit);
    __mmask16 keep = _mm512_cmp_ps_mask(u, vp, _CMP_GE_OQ);
    _mm512_storeu_ps(y + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), vscale));
  }
  DropoutScalar(x + i, seed, first + static_cast<uint64_t>(i), p, scale, y + i, n - i);
}

#pragma GCC diagnostic pop

// 8 lanes of Philox-4x32-10 with AVX2.
inline __m256i Philox8(__m256i c0, __m256i c1, const RoundKeys& keys) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  for (int r = 0; r < 10; ++r) {
    __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
    __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
    __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
    __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
    __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
    __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
    __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(keys.k0[r])));
    __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(keys.k1[r])));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return c0;
}

void Dropout256(const float* x, uint64_t seed, uint64_t first, float p, float scale, float* y, int64_t n) {
  const RoundKeys keys(seed);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 vp = _mm256_set1_ps(p), vscale = _mm256_set1_ps(scale), unit = _mm256_set1_ps(1.0f / 16777216.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t index = first + static_cast<uint64_t>(i);
    if (static_cast<uint32_t>(index) > 0xFFFFFFFFu - 7u) {
      DropoutScalar(x + i, seed, index, p, scale, y + i, 8);
      continue;
    }
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(index))), lane);
    __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(index >> 32)));
    __m256i r = Philox8(c0, c1, keys);
    __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(r, 8)), unit);
    __m256 keep = _mm256_cmp_ps(u, vp, _CMP_GE_OQ);
    _mm256_storeu_ps(y + i, _mm256_and_ps(keep, _mm256_mul_ps(_mm256_loadu_ps(x + i), vscale)));
  }
  DropoutScalar(x + i, seed, first + static_cast<uint64_t>(i), p, scale, y + i, n - i);
}

void DropoutF32(const float* x, uint64_t seed, uint64_t first, float p, float scale, float* y, int64_t n) {
  if (kern::HasAvx512()) {
    Dropout512(x, seed, first, p, scale, y, n);
  } else {
    Dropout256(x, seed, first, p, scale, y, n);
  }
}

Tensor Apply(const char* op, const Tensor& x_in, float p, uint64_t seed, uint64_t offset) {
  TESSERA_OP_CHECK(x_in.defined() && IsFloating(x_in.dtype()), "{}: input must be a floating tensor, got {}", op,
                   x_in.defined() ? DTypeName(x_in.dtype()) : "undefined");
  TESSERA_OP_CHECK(p >= 0.0f && p <= 1.0f, "{}: p must be in [0, 1], got {} (input {} {})", op, p,
                   DTypeName(x_in.dtype()), ShapeString(x_in.shape()));
  Tensor x = x_in.Contiguous();
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const int64_t n = x.numel();
  Tensor y = Tensor::Empty(x.shape(), x.dtype());
  if (UseReference()) {
    std::vector<float> v = x.ToFloatVector();
    for (int64_t i = 0; i < n; ++i) {
      v[i] = UniformAt(seed, offset + static_cast<uint64_t>(i)) >= p ? v[i] * scale : 0.0f;
    }
    y.CopyFrom(Tensor::FromVector(v, x.shape()));
    return y;
  }
  if (p == 0.0f) {
    kern::CopyConvert(x, y);
    return y;
  }
  const DType dt = x.dtype();
  const void* xp = x.raw_data();
  void* yp = y.raw_data();
  kern::ParallelFor((n + kern::kChunk - 1) / kern::kChunk, n, kern::kParallelComputeBound, [&](int64_t t) {
    const int64_t start = t * kern::kChunk, len = std::min(kern::kChunk, n - start);
    const float* xf = kern::AsF32(dt, kern::ElemPtr(xp, dt, start), len, 0);
    void* dst = kern::ElemPtr(yp, dt, start);
    float* yf = kern::OutF32(dt, dst, len, 1);
    DropoutF32(xf, seed, offset + static_cast<uint64_t>(start), p, scale, yf, len);
    kern::FinishF32(dt, yf, dst, len);
  });
  return y;
}

}  // namespace

Tensor Dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset) {
  return Apply("dropout", x, p, seed, offset);
}

Tensor DropoutBackward(const Tensor& grad_out, float p, uint64_t seed, uint64_t offset) {
  return Apply("dropout backward", grad_out, p, seed, offset);
}

}  // namespace tessera::ops
