#include "tessera/ops/elementwise/kernel_util.h"

#include <immintrin.h>

#include <atomic>
#include <memory>

#include "tessera/base/check.h"
#include "tessera/ops/elementwise/simd.h"

namespace tessera::ops::kern {
namespace {

constexpr int kScratchSlots = 8;

struct ScratchBuffer {
  std::unique_ptr<float[]> data;
  int64_t capacity = 0;
};

TESSERA_MULTIVERSION void LoadBf16(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16BitsToF32(src[i]);
}

TESSERA_MULTIVERSION void StoreBf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToBf16Bits(src[i]);
}

void LoadF16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = fp16::ToFloatBits(src[i]);
}

void StoreF16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = fp16::FromFloat(src[i]);
}

std::atomic<bool> g_force_avx2{false};

bool CpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

bool HasAvx512() {
  static const bool cpu = CpuHasAvx512();
  return cpu && !g_force_avx2.load(std::memory_order_relaxed);
}

void ForceAvx2ForTesting(bool force) { g_force_avx2.store(force); }

float* Scratch(int slot, int64_t n) {
  thread_local ScratchBuffer buffers[kScratchSlots];
  TESSERA_CHECK(slot >= 0 && slot < kScratchSlots, "scratch slot {} out of range", slot);
  ScratchBuffer& b = buffers[slot];
  if (b.capacity < n) {
    int64_t capacity = std::max<int64_t>(n, 2 * b.capacity);
    capacity = (capacity + 15) / 16 * 16;
    b.data = std::make_unique<float[]>(static_cast<size_t>(capacity));
    b.capacity = capacity;
  }
  return b.data.get();
}

void LoadF32(DType dt, const void* src, float* dst, int64_t n) {
  switch (dt) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16:
      LoadBf16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kF16:
      LoadF16(static_cast<const uint16_t*>(src), dst, n);
      return;
    default:
      TESSERA_CHECK(false, "LoadF32 of a {} buffer", DTypeName(dt));
  }
}

void StoreF32(DType dt, const float* src, void* dst, int64_t n) {
  switch (dt) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16:
      StoreBf16(src, static_cast<uint16_t*>(dst), n);
      return;
    case DType::kF16:
      StoreF16(src, static_cast<uint16_t*>(dst), n);
      return;
    default:
      TESSERA_CHECK(false, "StoreF32 to a {} buffer", DTypeName(dt));
  }
}

}  // namespace tessera::ops::kern
