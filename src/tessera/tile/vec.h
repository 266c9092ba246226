// Register-level vocabulary of the tile layer: one traits struct per ISA
// (Avx512, Avx2, Portable) giving its fp32 and int32 vector types, lane
// count and the handful of operations a tile kernel is written with —
// zero, broadcast, load/store (whole or the first n lanes), FMA, add,
// subtract, multiply, max, horizontal sum, a 32-bit broadcast of a k-group
// of narrow elements, prefetch.
// Every member carries its ISA's target attribute, so a kernel template
// written once against `Tr::` compiles for each ISA inside one function
// that has the same attribute (see microkernel.h); the rest of the build
// stays at the baseline ISA (x86-64-v3). ISA members are plain `inline`
// (an always-inline one could not be inlined into the generic, untargeted
// templates in between); the kernels are `flatten`, which inlines them all.
// Stateless; thread-safe.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

// Vector arguments of always-inline helpers: the ABI note is irrelevant.
#pragma GCC diagnostic ignored "-Wpsabi"

#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define TESSERA_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define TESSERA_TARGET_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TESSERA_INLINE inline __attribute__((always_inline))

namespace tessera::tile {

inline uint32_t LoadWord(const void* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

// The first `bytes` (< 4) bytes of p as a zero-extended word.
inline uint32_t LoadPartialWord(const void* p, int bytes) {
  uint32_t w = 0;
  std::memcpy(&w, p, static_cast<size_t>(bytes));
  return w;
}

struct Avx512 {
  static constexpr const char* kName = "avx512";
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  using VF = __m512;
  using VI = __m512i;

  TESSERA_TARGET_AVX512 static inline VF ZeroF() { return _mm512_setzero_ps(); }
  TESSERA_TARGET_AVX512 static inline VI ZeroI() { return _mm512_setzero_si512(); }
  TESSERA_TARGET_AVX512 static inline VF Set1(float x) { return _mm512_set1_ps(x); }
  TESSERA_TARGET_AVX512 static inline VI Set1Word(uint32_t w) { return _mm512_set1_epi32(static_cast<int>(w)); }
  TESSERA_TARGET_AVX512 static inline VF BroadcastF(const float* p) { return _mm512_set1_ps(*p); }
  TESSERA_TARGET_AVX512 static inline VF LoadF(const float* p) { return _mm512_loadu_ps(p); }
  TESSERA_TARGET_AVX512 static inline VI LoadI(const void* p) { return _mm512_loadu_si512(p); }
  TESSERA_TARGET_AVX512 static inline void StoreF(float* p, VF v) { _mm512_storeu_ps(p, v); }
  TESSERA_TARGET_AVX512 static inline void StoreI(int32_t* p, VI v) { _mm512_storeu_si512(p, v); }
  TESSERA_TARGET_AVX512 static inline __mmask16 Mask(int n) {
    return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
  }
  TESSERA_TARGET_AVX512 static inline VF LoadFN(const float* p, int n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  TESSERA_TARGET_AVX512 static inline void StoreFN(float* p, VF v, int n) { _mm512_mask_storeu_ps(p, Mask(n), v); }
  TESSERA_TARGET_AVX512 static inline VI LoadIN(const int32_t* p, int n) {
    return _mm512_maskz_loadu_epi32(Mask(n), p);
  }
  TESSERA_TARGET_AVX512 static inline void StoreIN(int32_t* p, VI v, int n) { _mm512_mask_storeu_epi32(p, Mask(n), v); }
  TESSERA_TARGET_AVX512 static inline VF Fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  TESSERA_TARGET_AVX512 static inline VF Mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  TESSERA_TARGET_AVX512 static inline VF Add(VF a, VF b) { return _mm512_add_ps(a, b); }
  TESSERA_TARGET_AVX512 static inline VF Sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
  TESSERA_TARGET_AVX512 static inline VF Max(VF a, VF b) { return _mm512_max_ps(a, b); }
  TESSERA_TARGET_AVX512 static inline float ReduceAdd(VF x) { return _mm512_reduce_add_ps(x); }
  TESSERA_TARGET_AVX512 static inline VI AddI(VI a, VI b) { return _mm512_add_epi32(a, b); }
  static TESSERA_INLINE void Prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
};

struct Avx2 {
  static constexpr const char* kName = "avx2";
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  using VF = __m256;
  using VI = __m256i;

  TESSERA_TARGET_AVX2 static inline VF ZeroF() { return _mm256_setzero_ps(); }
  TESSERA_TARGET_AVX2 static inline VI ZeroI() { return _mm256_setzero_si256(); }
  TESSERA_TARGET_AVX2 static inline VF Set1(float x) { return _mm256_set1_ps(x); }
  TESSERA_TARGET_AVX2 static inline VI Set1Word(uint32_t w) { return _mm256_set1_epi32(static_cast<int>(w)); }
  TESSERA_TARGET_AVX2 static inline VF BroadcastF(const float* p) { return _mm256_broadcast_ss(p); }
  TESSERA_TARGET_AVX2 static inline VF LoadF(const float* p) { return _mm256_loadu_ps(p); }
  TESSERA_TARGET_AVX2 static inline VI LoadI(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  TESSERA_TARGET_AVX2 static inline void StoreF(float* p, VF v) { _mm256_storeu_ps(p, v); }
  TESSERA_TARGET_AVX2 static inline void StoreI(int32_t* p, VI v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  // Partial vectors go through a stack copy (masked moves are slow on AMD).
  TESSERA_TARGET_AVX2 static inline VF LoadFN(const float* p, int n) {
    alignas(32) float t[8] = {};
    for (int j = 0; j < n && j < 8; ++j) t[j] = p[j];
    return _mm256_load_ps(t);
  }
  TESSERA_TARGET_AVX2 static inline void StoreFN(float* p, VF v, int n) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    for (int j = 0; j < n && j < 8; ++j) p[j] = t[j];
  }
  TESSERA_TARGET_AVX2 static inline VI LoadIN(const int32_t* p, int n) {
    alignas(32) int32_t t[8] = {};
    for (int j = 0; j < n && j < 8; ++j) t[j] = p[j];
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
  }
  TESSERA_TARGET_AVX2 static inline void StoreIN(int32_t* p, VI v, int n) {
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), v);
    for (int j = 0; j < n && j < 8; ++j) p[j] = t[j];
  }
  TESSERA_TARGET_AVX2 static inline VF Fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  TESSERA_TARGET_AVX2 static inline VF Mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  TESSERA_TARGET_AVX2 static inline VF Add(VF a, VF b) { return _mm256_add_ps(a, b); }
  TESSERA_TARGET_AVX2 static inline VF Sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
  TESSERA_TARGET_AVX2 static inline VF Max(VF a, VF b) { return _mm256_max_ps(a, b); }
  TESSERA_TARGET_AVX2 static inline float ReduceAdd(VF x) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
  TESSERA_TARGET_AVX2 static inline VI AddI(VI a, VI b) { return _mm256_add_epi32(a, b); }
  static TESSERA_INLINE void Prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
};

// Plain C++ (GCC/Clang vector extensions, 4 lanes): the reference-speed
// fallback that runs anywhere, and a check that kernels are written against
// the traits and nothing else.
struct Portable {
  static constexpr const char* kName = "portable";
  static constexpr int kLanes = 4;
  static constexpr int kRegisters = 16;
  typedef float VF __attribute__((vector_size(16)));
  typedef int32_t VI __attribute__((vector_size(16)));

  static TESSERA_INLINE VF ZeroF() { return VF{0, 0, 0, 0}; }
  static TESSERA_INLINE VI ZeroI() { return VI{0, 0, 0, 0}; }
  static TESSERA_INLINE VF Set1(float x) { return VF{x, x, x, x}; }
  static TESSERA_INLINE VI Set1Word(uint32_t w) {
    const auto x = static_cast<int32_t>(w);
    return VI{x, x, x, x};
  }
  static TESSERA_INLINE VF BroadcastF(const float* p) { return Set1(*p); }
  static TESSERA_INLINE VF LoadF(const float* p) {
    VF v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static TESSERA_INLINE VI LoadI(const void* p) {
    VI v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static TESSERA_INLINE void StoreF(float* p, VF v) { std::memcpy(p, &v, sizeof(v)); }
  static TESSERA_INLINE void StoreI(int32_t* p, VI v) { std::memcpy(p, &v, sizeof(v)); }
  static TESSERA_INLINE VF LoadFN(const float* p, int n) {
    VF v = ZeroF();
    for (int j = 0; j < n && j < 4; ++j) v[j] = p[j];
    return v;
  }
  static TESSERA_INLINE void StoreFN(float* p, VF v, int n) {
    for (int j = 0; j < n && j < 4; ++j) p[j] = v[j];
  }
  static TESSERA_INLINE VI LoadIN(const int32_t* p, int n) {
    VI v = ZeroI();
    for (int j = 0; j < n && j < 4; ++j) v[j] = p[j];
    return v;
  }
  static TESSERA_INLINE void StoreIN(int32_t* p, VI v, int n) {
    for (int j = 0; j < n && j < 4; ++j) p[j] = v[j];
  }
  // Rounds once, like the hardware FMAs (the build's -std=c++20 does not
  // contract a*b+c), so portable kernels give the ISA kernels' bits.
  static TESSERA_INLINE VF Fma(VF a, VF b, VF c) {
    VF r;
    for (int j = 0; j < 4; ++j) r[j] = __builtin_fmaf(a[j], b[j], c[j]);
    return r;
  }
  static TESSERA_INLINE VF Mul(VF a, VF b) { return a * b; }
  static TESSERA_INLINE VF Add(VF a, VF b) { return a + b; }
  static TESSERA_INLINE VF Sub(VF a, VF b) { return a - b; }
  static TESSERA_INLINE VF Max(VF a, VF b) {  // as MAXPS: b when either is NaN
    VF r;
    for (int j = 0; j < 4; ++j) r[j] = a[j] > b[j] ? a[j] : b[j];
    return r;
  }
  static TESSERA_INLINE float ReduceAdd(VF x) { return (x[0] + x[2]) + (x[1] + x[3]); }
  static TESSERA_INLINE VI AddI(VI a, VI b) { return a + b; }
  static TESSERA_INLINE void Prefetch(const void* p) { __builtin_prefetch(p); }
};

}  // namespace tessera::tile
