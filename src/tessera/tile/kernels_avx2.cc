// AVX2 + FMA tile kernels, the fallback for CPUs without AVX-512: fp32 6x16
// (12 ymm accumulators) and 4x24, bf16 through the fp32 kernels, and
// u8 x s8 as s16 pairs (VPMADDWD; operands widened exactly while packing).
// Instantiated from microkernel.h.
#include "tessera/hal/cpu_features.h"
#include "tessera/tile/kernels.h"

namespace tessera::tile {
namespace {

TESSERA_TILE_KERNEL(f32_6x16, TESSERA_TARGET_AVX2, F32Fma<Avx2>, 6, 16)
TESSERA_TILE_KERNEL(f32_4x24, TESSERA_TARGET_AVX2, F32Fma<Avx2>, 4, 24)
TESSERA_TILE_KERNEL(s16_6x16, TESSERA_TARGET_AVX2, S16DotAvx2, 6, 16)
TESSERA_TILE_KERNEL(s16_4x24, TESSERA_TARGET_AVX2, S16DotAvx2, 4, 24)

bool HasAvx2() { return hal::GetCpuFeatures().avx2 && hal::GetCpuFeatures().fma; }

constexpr auto pF32 = PackType::kF32;
constexpr auto pS16 = PackType::kS16;

const KernelInfo kKernels[] = {
    {"f32_gemm_6x16_avx2", GemmType::kF32, "avx2", 6, 16, 1, pF32, pF32, 256, 144, 2048, "f32-fma", &f32_6x16_rows,
     &f32_6x16_packed, &HasAvx2},
    {"f32_gemm_4x24_avx2", GemmType::kF32, "avx2", 4, 24, 1, pF32, pF32, 256, 144, 2040, "f32-fma", &f32_4x24_rows,
     &f32_4x24_packed, &HasAvx2},
    {"bf16f32_gemm_6x16_avx2_via_f32", GemmType::kBf16F32, "avx2", 6, 16, 1, pF32, pF32, 256, 144, 2048,
     "bf16-via-f32", nullptr, &f32_6x16_packed, &HasAvx2},
    {"bf16f32_gemm_4x24_avx2_via_f32", GemmType::kBf16F32, "avx2", 4, 24, 1, pF32, pF32, 256, 144, 2040,
     "bf16-via-f32", nullptr, &f32_4x24_packed, &HasAvx2},
    {"u8s8s32_gemm_6x16_avx2", GemmType::kU8S8S32, "avx2", 6, 16, 2, pS16, pS16, 512, 144, 2048, "int32", nullptr,
     &s16_6x16_packed, &HasAvx2},
    {"u8s8s32_gemm_4x24_avx2", GemmType::kU8S8S32, "avx2", 4, 24, 2, pS16, pS16, 512, 144, 2040, "int32", nullptr,
     &s16_4x24_packed, &HasAvx2},
};

}  // namespace

std::vector<const KernelInfo*> Avx2Kernels() { return TableOf(kKernels); }

}  // namespace tessera::tile
