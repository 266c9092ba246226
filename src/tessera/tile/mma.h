// Tile MMA operations: how one k-group of A (one value per row, broadcast
// across a vector) and of B (a vector per nr/lanes columns) update a
// fragment of accumulators, per element type and ISA. A tile kernel
// (microkernel.h) is written once against this interface:
//   Traits        the ISA's vector traits (vec.h)
//   PA, PB        element types of A and B in registers / packed panels
//   Acc, AV, BV   accumulator, broadcast-A and B vector types
//   Out           what the tile stores (float or int32_t)
//   kGroup        k consumed per step (1 fp32, 2 bf16 pairs, 4 u8*s8 quads,
//                 2 s16 pairs): A's group for row i is kGroup consecutive k,
//                 B's group for column j is kGroup consecutive k in one lane
//   kNumerics     ops with the same numerics and K block produce identical
//                 bits for every tile shape and blocking (the autotuner
//                 relies on it)
// Ops:
//   F32Fma<Tr>        fp32 FMA (any ISA)
//   Bf16Dot           bf16 pairs, VDPBF16PS (AVX512-BF16), fp32 accumulate
//   U8S8DotVnni       u8 x s8 quads, VPDPBUSD (AVX512-VNNI), int32 accumulate
//   S16DotAvx2        s16 pairs, VPMADDWD (AVX2): u8/s8 widened while packing
//   U8S8Portable<Tr>  u8 x s8 one k at a time (portable), int32 accumulate
// Integer products are exact: |sum| < 2^31 holds for K < 65793.
#pragma once

#include <cstdint>

#include "tessera/base/float16.h"
#include "tessera/tile/vec.h"

namespace tessera::tile {

template <class Tr>
struct F32Fma {
  using Traits = Tr;
  using PA = float;
  using PB = float;
  using Out = float;
  using Acc = typename Tr::VF;
  using AV = typename Tr::VF;
  using BV = typename Tr::VF;
  static constexpr int kGroup = 1;
  static constexpr const char* kNumerics = "f32-fma";
  static TESSERA_INLINE Acc Zero() { return Tr::ZeroF(); }
  static TESSERA_INLINE AV BroadcastA(const PA* p) { return Tr::BroadcastF(p); }
  static TESSERA_INLINE AV BroadcastAPartial(const PA* p, int) { return Tr::BroadcastF(p); }
  static TESSERA_INLINE BV LoadB(const PB* p) { return Tr::LoadF(p); }
  static TESSERA_INLINE Acc Mma(Acc acc, AV a, BV b) { return Tr::Fma(a, b, acc); }
};

struct Bf16Dot {
  using Traits = Avx512;
  using PA = bf16;
  using PB = bf16;
  using Out = float;
  using Acc = __m512;
  using AV = __m512bh;
  using BV = __m512bh;
  static constexpr int kGroup = 2;
  static constexpr const char* kNumerics = "bf16-dpbf16";
  TESSERA_TARGET_AVX512BF16 static inline Acc Zero() { return _mm512_setzero_ps(); }
  TESSERA_TARGET_AVX512BF16 static inline AV BroadcastA(const PA* p) {
    return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(LoadWord(p))));
  }
  // The last k alone (odd K, A read in place): its partner is zero.
  TESSERA_TARGET_AVX512BF16 static inline AV BroadcastAPartial(const PA* p, int) {
    return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(p->bits)));
  }
  TESSERA_TARGET_AVX512BF16 static inline BV LoadB(const PB* p) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
  }
  TESSERA_TARGET_AVX512BF16 static inline Acc Mma(Acc acc, AV a, BV b) {
    return _mm512_dpbf16_ps(acc, a, b);
  }
};

struct U8S8DotVnni {
  using Traits = Avx512;
  using PA = uint8_t;
  using PB = int8_t;
  using Out = int32_t;
  using Acc = __m512i;
  using AV = __m512i;
  using BV = __m512i;
  static constexpr int kGroup = 4;
  static constexpr const char* kNumerics = "int32";
  TESSERA_TARGET_AVX512VNNI static inline Acc Zero() { return _mm512_setzero_si512(); }
  TESSERA_TARGET_AVX512VNNI static inline AV BroadcastA(const PA* p) {
    return _mm512_set1_epi32(static_cast<int>(LoadWord(p)));
  }
  TESSERA_TARGET_AVX512VNNI static inline AV BroadcastAPartial(const PA* p, int n) {
    return _mm512_set1_epi32(static_cast<int>(LoadPartialWord(p, n)));
  }
  TESSERA_TARGET_AVX512VNNI static inline BV LoadB(const PB* p) { return _mm512_loadu_si512(p); }
  TESSERA_TARGET_AVX512VNNI static inline Acc Mma(Acc acc, AV a, BV b) {
    return _mm512_dpbusd_epi32(acc, a, b);
  }
};

struct S16DotAvx2 {
  using Traits = Avx2;
  using PA = int16_t;
  using PB = int16_t;
  using Out = int32_t;
  using Acc = __m256i;
  using AV = __m256i;
  using BV = __m256i;
  static constexpr int kGroup = 2;
  static constexpr const char* kNumerics = "int32";
  TESSERA_TARGET_AVX2 static inline Acc Zero() { return _mm256_setzero_si256(); }
  TESSERA_TARGET_AVX2 static inline AV BroadcastA(const PA* p) {
    return _mm256_set1_epi32(static_cast<int>(LoadWord(p)));
  }
  TESSERA_TARGET_AVX2 static inline AV BroadcastAPartial(const PA* p, int) {
    return _mm256_set1_epi32(static_cast<int>(static_cast<uint16_t>(*p)));
  }
  TESSERA_TARGET_AVX2 static inline BV LoadB(const PB* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  TESSERA_TARGET_AVX2 static inline Acc Mma(Acc acc, AV a, BV b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
};

struct U8S8Portable {
  using Traits = Portable;
  using PA = uint8_t;
  using PB = int8_t;
  using Out = int32_t;
  using Acc = Portable::VI;
  using AV = Portable::VI;
  using BV = Portable::VI;
  static constexpr int kGroup = 1;
  static constexpr const char* kNumerics = "int32";
  static TESSERA_INLINE Acc Zero() { return Portable::ZeroI(); }
  static TESSERA_INLINE AV BroadcastA(const PA* p) { return Portable::Set1Word(*p); }
  static TESSERA_INLINE AV BroadcastAPartial(const PA* p, int) { return Portable::Set1Word(*p); }
  static TESSERA_INLINE BV LoadB(const PB* p) { return BV{p[0], p[1], p[2], p[3]}; }
  static TESSERA_INLINE Acc Mma(Acc acc, AV a, BV b) { return acc + a * b; }
};

}  // namespace tessera::tile
