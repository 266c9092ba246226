// Panel packing for tile GEMMs (see pack.h).
#include "tessera/tile/pack.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tessera::tile {
namespace {

// Source rows copied into every panel before moving on: enough to reuse
// their cache lines, few enough that the panels' write streams stay in L1.
constexpr int64_t kRowBlock = 16;
// Elements ahead that transposing packers prefetch along each source row.
constexpr int64_t kPrefetchAhead = 64;

// Prefetches the cache lines of n contiguous elements starting at p.
template <typename T>
inline void PrefetchRun(const T* p, int n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t off = 0; off < static_cast<int64_t>(n * sizeof(T)); off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// Transposes an 8x8 block of 32-bit elements: row r of the source (8
// consecutive elements at src + r*ld bytes) becomes column r of the output
// (element (r, c) lands at out[c*w + r]). Rows need no alignment.
inline void Transpose8x8(const char* src, int64_t ld, float* out, int64_t w) {
  auto row = [&](int r) { return _mm256_loadu_ps(reinterpret_cast<const float*>(src + r * ld)); };
  __m256 r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3), r4 = row(4), r5 = row(5), r6 = row(6), r7 = row(7);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_storeu_ps(out + 0 * w, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + 1 * w, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * w, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * w, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * w, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * w, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * w, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * w, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Transposes 4 rows x 8 elements (32-bit) into 8 rows of 4 at out[c*w].
inline void Transpose4x8(const char* src, int64_t ld, float* out, int64_t w) {
  auto row = [&](int r) { return _mm256_loadu_ps(reinterpret_cast<const float*>(src + r * ld)); };
  __m256 r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  _mm_storeu_ps(out + 0 * w, _mm256_castps256_ps128(u0));
  _mm_storeu_ps(out + 1 * w, _mm256_castps256_ps128(u1));
  _mm_storeu_ps(out + 2 * w, _mm256_castps256_ps128(u2));
  _mm_storeu_ps(out + 3 * w, _mm256_castps256_ps128(u3));
  _mm_storeu_ps(out + 4 * w, _mm256_extractf128_ps(u0, 1));
  _mm_storeu_ps(out + 5 * w, _mm256_extractf128_ps(u1, 1));
  _mm_storeu_ps(out + 6 * w, _mm256_extractf128_ps(u2, 1));
  _mm_storeu_ps(out + 7 * w, _mm256_extractf128_ps(u3, 1));
}

// One panel of 32-bit elements (fp32 values or bf16 pairs) whose rows are
// contiguous runs over p: out[p*w + x] = element p of the row at
// src + x*ld bytes, for x < xv and p < n.
void TransposePanel32(const char* src, int64_t ld, int xv, int64_t n, int w, float* out) {
  const int64_t n8 = n / 8 * 8;
  int x = 0;
  for (; x + 8 <= xv; x += 8) {
    const char* s = src + x * ld;
    for (int64_t p = 0; p < n8; p += 8) {
      if ((p & 15) == 0) {  // one line ahead per row, a few lines in advance
        for (int r = 0; r < 8; ++r) _mm_prefetch(s + r * ld + (p + kPrefetchAhead) * 4, _MM_HINT_T0);
      }
      Transpose8x8(s + p * 4, ld, out + p * w + x, w);
    }
  }
  for (; x + 4 <= xv; x += 4) {
    for (int64_t p = 0; p < n8; p += 8) Transpose4x8(src + x * ld + p * 4, ld, out + p * w + x, w);
  }
  for (; x < xv; ++x) {
    for (int64_t p = 0; p < n8; ++p) std::memcpy(out + p * w + x, src + x * ld + p * 4, 4);
  }
  for (int64_t p = n8; p < n; ++p) {
    for (int xx = 0; xx < xv; ++xx) std::memcpy(out + p * w + xx, src + xx * ld + p * 4, 4);
  }
}

// o[0..w) = row[0..xv) followed by zeros. (No masked stores: they are slow
// on some CPUs.)
inline void CopyRowPadded(const float* row, int xv, int w, float* o) {
  int x = 0;
  for (; x + 8 <= xv; x += 8) _mm256_storeu_ps(o + x, _mm256_loadu_ps(row + x));
  for (; x + 4 <= xv; x += 4) _mm_storeu_ps(o + x, _mm_loadu_ps(row + x));
  for (; x < xv; ++x) o[x] = row[x];
  for (; x < w; ++x) o[x] = 0.0f;
}

inline void CopyRowPadded(const bf16* row, int xv, int w, float* o) {
  int x = 0;
  for (; x + 8 <= xv; x += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + x));
    _mm256_storeu_ps(o + x, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; x < xv; ++x) o[x] = static_cast<float>(row[x]);
  for (; x < w; ++x) o[x] = 0.0f;
}

template <typename Src>
inline float AsF32(Src v) {
  if constexpr (std::is_same_v<Src, float>) {
    return v;
  } else {
    return static_cast<float>(v);
  }
}

template <typename Src>
void PackF32(const Src* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out) {
  if (sx == 1) {  // each k is a contiguous run of x: copy a few source rows into every panel
    for (int64_t p0 = 0; p0 < kc; p0 += kRowBlock) {
      const int64_t p1 = std::min(kc, p0 + kRowBlock);
      float* o = out;
      for (int64_t x0 = 0; x0 < xs; x0 += w, o += kc * w) {
        const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
        for (int64_t p = p0; p < p1; ++p) {
          PrefetchRun(src + (p + kRowBlock) * sp + x0, p + kRowBlock < kc ? xv : 0);
          CopyRowPadded(src + p * sp + x0, xv, w, o + p * w);
        }
      }
    }
    return;
  }
  for (int64_t x0 = 0; x0 < xs; x0 += w, out += kc * w) {
    const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
    const Src* s = src + x0 * sx;
    if constexpr (std::is_same_v<Src, float>) {
      if (sp == 1) {
        TransposePanel32(reinterpret_cast<const char*>(s), sx * 4, xv, kc, w, out);
      } else {
        for (int x = 0; x < xv; ++x) {
          for (int64_t p = 0; p < kc; ++p) out[p * w + x] = s[x * sx + p * sp];
        }
      }
    } else {
      for (int x = 0; x < xv; ++x) {
        for (int64_t p = 0; p < kc; ++p) out[p * w + x] = AsF32(s[x * sx + p * sp]);
      }
    }
    if (xv < w) {
      for (int64_t p = 0; p < kc; ++p) std::memset(out + p * w + xv, 0, sizeof(float) * (w - xv));
    }
  }
}

// Interleaves n elements of two bf16 rows into (r0[x], r1[x]) pairs.
void InterleaveRows(const bf16* r0, const bf16* r1, int n, bf16* out) {
  int x = 0;
  for (; x + 16 <= n; x += 16) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + x));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + x));
    __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * x), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * x + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  for (; x + 8 <= n; x += 8) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + x));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + x));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * x), _mm_unpacklo_epi16(a, b));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * x + 8), _mm_unpackhi_epi16(a, b));
  }
  for (; x + 4 <= n; x += 4) {
    __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r0 + x));
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r1 + x));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * x), _mm_unpacklo_epi16(a, b));
  }
  for (; x < n; ++x) {
    out[2 * x] = r0[x];
    out[2 * x + 1] = r1[x];
  }
}

// Interleaves n bytes of four rows into (r0[x], r1[x], r2[x], r3[x]) quads.
void InterleaveRows4(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3, int n,
                     uint8_t* out) {
  int x = 0;
  for (; x + 16 <= n; x += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + x));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + x));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + x));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + x));
    const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
    const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
    auto* o = reinterpret_cast<__m128i*>(out + 4 * x);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
  }
  for (; x < n; ++x) {
    out[4 * x] = r0[x];
    out[4 * x + 1] = r1[x];
    out[4 * x + 2] = r2[x];
    out[4 * x + 3] = r3[x];
  }
}

// Integer k-group panels, element by element (partial groups, widening,
// strided sources).
template <typename S, typename P>
void PackGroupsGeneric(const S* src, int64_t sx, int64_t sp, int64_t xs, int64_t q0, int64_t kc, int w, int g,
                       P* out) {
  const int64_t groups = (kc + g - 1) / g;
  const int64_t panel = groups * g * w;
  for (int64_t x0 = 0, pi = 0; x0 < xs; x0 += w, ++pi) {
    const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
    const S* s = src + x0 * sx;
    for (int64_t q = q0; q < groups; ++q) {
      P* o = out + pi * panel + q * g * w;
      const int rows = static_cast<int>(kc - q * g < g ? kc - q * g : g);
      for (int r = 0; r < rows; ++r) {
        const S* row = s + (q * g + r) * sp;
        if (sx == 1) {
          for (int x = 0; x < xv; ++x) o[g * x + r] = static_cast<P>(row[x]);
        } else {
          for (int x = 0; x < xv; ++x) o[g * x + r] = static_cast<P>(row[x * sx]);
        }
      }
      for (int r = rows; r < g; ++r) {
        for (int x = 0; x < xv; ++x) o[g * x + r] = P{0};
      }
    }
    if (xv < w) {  // zero columns of the last panel
      for (int64_t q = q0; q < groups; ++q) {
        std::memset(static_cast<void*>(out + pi * panel + q * g * w + g * xv), 0, sizeof(P) * g * (w - xv));
      }
    }
  }
}

// Integer k-group panels. Bytes in groups of 4 (the VPDPBUSD layout) take
// two fast paths over their full groups: contiguous k (a row-major A, a
// transposed B) is a 32-bit transpose, contiguous x (a row-major B) a 4-way
// byte interleave; the rest goes element by element.
template <typename S, typename P>
void PackGroups(const S* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int g, P* out) {
  if constexpr (sizeof(S) == 1 && sizeof(P) == 1) {
    if (g == 4 && (sp == 1 || sx == 1)) {
      const int64_t full = kc / 4;
      const int64_t panel = (kc + 3) / 4 * 4 * w;
      for (int64_t x0 = 0, pi = 0; x0 < xs; x0 += w, ++pi) {
        const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
        P* o = out + pi * panel;
        const S* s = src + x0 * sx;
        if (sp == 1) {
          TransposePanel32(reinterpret_cast<const char*>(s), sx, xv, full, w, reinterpret_cast<float*>(o));
        } else {
          for (int64_t q = 0; q < full; ++q) {
            const auto* r0 = reinterpret_cast<const uint8_t*>(s + 4 * q * sp);
            InterleaveRows4(r0, r0 + sp, r0 + 2 * sp, r0 + 3 * sp, xv, reinterpret_cast<uint8_t*>(o + q * 4 * w));
          }
        }
        if (xv < w) {
          for (int64_t q = 0; q < full; ++q) std::memset(o + q * 4 * w + 4 * xv, 0, 4 * (w - xv));
        }
      }
      if (full * 4 < kc) PackGroupsGeneric(src, sx, sp, xs, full, kc, w, g, out);
      return;
    }
  }
  PackGroupsGeneric(src, sx, sp, xs, 0, kc, w, g, out);
}

}  // namespace

void PackPanelsGroups(const uint8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      uint8_t* out) {
  PackGroups(src, sx, sp, xs, kc, w, group, out);
}
void PackPanelsGroups(const int8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int8_t* out) {
  PackGroups(src, sx, sp, xs, kc, w, group, out);
}
void PackPanelsGroups(const uint8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int16_t* out) {
  PackGroups(src, sx, sp, xs, kc, w, group, out);
}
void PackPanelsGroups(const int8_t* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, int group,
                      int16_t* out) {
  PackGroups(src, sx, sp, xs, kc, w, group, out);
}

void PackPanelsF32(const float* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out) {
  PackF32(src, sx, sp, xs, kc, w, out);
}

void PackPanelsF32(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, float* out) {
  PackF32(src, sx, sp, xs, kc, w, out);
}

void PackPanelsPairs(const bf16* src, int64_t sx, int64_t sp, int64_t xs, int64_t kc, int w, bf16* out) {
  const int64_t kp = RoundUp(kc, 2);
  const int64_t full_pairs = kc / 2;
  const int64_t panel = kp * w;
  if (sx == 1) {  // interleave pairs of contiguous rows, streaming them across all panels
    for (int64_t q0 = 0; q0 < full_pairs; q0 += kRowBlock / 2) {
      const int64_t q1 = std::min(full_pairs, q0 + kRowBlock / 2);
      bf16* o = out;
      for (int64_t x0 = 0; x0 < xs; x0 += w, o += panel) {
        const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
        for (int64_t q = q0; q < q1; ++q) {
          const bf16* r0 = src + 2 * q * sp + x0;
          if (2 * q + kRowBlock + 1 < kc) {
            PrefetchRun(r0 + kRowBlock * sp, xv);
            PrefetchRun(r0 + (kRowBlock + 1) * sp, xv);
          }
          InterleaveRows(r0, r0 + sp, xv, o + q * 2 * w);
        }
      }
    }
  }
  for (int64_t x0 = 0; x0 < xs; x0 += w, out += panel) {
    const int xv = static_cast<int>(xs - x0 < w ? xs - x0 : w);
    const bf16* s = src + x0 * sx;
    if (sx == 1) {
      // done above
    } else if (sp == 1) {  // each pair is one 32-bit word of a row: a 32-bit transpose
      TransposePanel32(reinterpret_cast<const char*>(s), sx * 2, xv, full_pairs, w, reinterpret_cast<float*>(out));
    } else {
      for (int64_t q = 0; q < full_pairs; ++q) {
        for (int x = 0; x < xv; ++x) {
          out[q * 2 * w + 2 * x] = s[x * sx + 2 * q * sp];
          out[q * 2 * w + 2 * x + 1] = s[x * sx + (2 * q + 1) * sp];
        }
      }
    }
    if (kc & 1) {  // the last k has no partner: pair it with zero
      bf16* o = out + full_pairs * 2 * w;
      for (int x = 0; x < xv; ++x) {
        o[2 * x] = s[x * sx + (kc - 1) * sp];
        o[2 * x + 1] = bf16{};
      }
    }
    if (xv < w) {
      for (int64_t q = 0; q < kp / 2; ++q) {
        std::memset(static_cast<void*>(out + q * 2 * w + 2 * xv), 0, sizeof(bf16) * 2 * (w - xv));
      }
    }
  }
}

}  // namespace tessera::tile
