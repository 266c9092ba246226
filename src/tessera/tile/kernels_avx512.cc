// AVX-512 tile kernels: fp32 FMA, bf16 pairs (VDPBF16PS) and u8 x s8 quads
// (VPDPBUSD), each at five register tiles (12x32 the default; 14x32, 8x48
// and 6x64 for wide N, 28x16 for N <= 16), plus bf16 through the fp32
// kernels on CPUs without AVX512-BF16. Instantiated from microkernel.h.
#include "tessera/hal/cpu_features.h"
#include "tessera/tile/kernels.h"

namespace tessera::tile {
namespace {

TESSERA_TILE_KERNEL(f32_12x32, TESSERA_TARGET_AVX512, F32Fma<Avx512>, 12, 32)
TESSERA_TILE_KERNEL(f32_14x32, TESSERA_TARGET_AVX512, F32Fma<Avx512>, 14, 32)
TESSERA_TILE_KERNEL(f32_8x48, TESSERA_TARGET_AVX512, F32Fma<Avx512>, 8, 48)
TESSERA_TILE_KERNEL(f32_6x64, TESSERA_TARGET_AVX512, F32Fma<Avx512>, 6, 64)
TESSERA_TILE_KERNEL(f32_28x16, TESSERA_TARGET_AVX512, F32Fma<Avx512>, 28, 16)
TESSERA_TILE_KERNEL(bf16_12x32, TESSERA_TARGET_AVX512BF16, Bf16Dot, 12, 32)
TESSERA_TILE_KERNEL(bf16_14x32, TESSERA_TARGET_AVX512BF16, Bf16Dot, 14, 32)
TESSERA_TILE_KERNEL(bf16_8x48, TESSERA_TARGET_AVX512BF16, Bf16Dot, 8, 48)
TESSERA_TILE_KERNEL(bf16_6x64, TESSERA_TARGET_AVX512BF16, Bf16Dot, 6, 64)
TESSERA_TILE_KERNEL(bf16_28x16, TESSERA_TARGET_AVX512BF16, Bf16Dot, 28, 16)
TESSERA_TILE_KERNEL(u8s8_12x32, TESSERA_TARGET_AVX512VNNI, U8S8DotVnni, 12, 32)
TESSERA_TILE_KERNEL(u8s8_14x32, TESSERA_TARGET_AVX512VNNI, U8S8DotVnni, 14, 32)
TESSERA_TILE_KERNEL(u8s8_8x48, TESSERA_TARGET_AVX512VNNI, U8S8DotVnni, 8, 48)
TESSERA_TILE_KERNEL(u8s8_6x64, TESSERA_TARGET_AVX512VNNI, U8S8DotVnni, 6, 64)
TESSERA_TILE_KERNEL(u8s8_28x16, TESSERA_TARGET_AVX512VNNI, U8S8DotVnni, 28, 16)

bool HasAvx512() { return hal::GetCpuFeatures().HasAvx512Core() && hal::GetCpuFeatures().fma; }
bool HasAvx512Bf16() { return HasAvx512() && hal::GetCpuFeatures().avx512_bf16; }
bool HasAvx512Vnni() { return HasAvx512() && hal::GetCpuFeatures().avx512_vnni; }
bool HasAvx512NoBf16() { return HasAvx512() && !hal::GetCpuFeatures().avx512_bf16; }

constexpr auto kF32 = GemmType::kF32;
constexpr auto kBf16 = GemmType::kBf16F32;
constexpr auto kInt8 = GemmType::kU8S8S32;
constexpr auto pF32 = PackType::kF32;
constexpr auto pBf16 = PackType::kBf16;
constexpr auto pU8 = PackType::kU8;
constexpr auto pS8 = PackType::kS8;

// K blocks: the A micro-panel (mr x kc) stays in L1 while B's kc x nc block
// (512 KiB for every type at the default nc) streams from L2 (Zen 5: 48 KiB
// L1D, 1 MiB L2); A's mc x kc block is packed once per mc rows.
const KernelInfo kKernels[] = {
    {"f32_gemm_12x32_avx512", kF32, "avx512", 12, 32, 1, pF32, pF32, 256, 1920, 512, "f32-fma", &f32_12x32_rows,
     &f32_12x32_packed, &HasAvx512},
    {"f32_gemm_14x32_avx512", kF32, "avx512", 14, 32, 1, pF32, pF32, 256, 1918, 512, "f32-fma", &f32_14x32_rows,
     &f32_14x32_packed, &HasAvx512},
    {"f32_gemm_8x48_avx512", kF32, "avx512", 8, 48, 1, pF32, pF32, 256, 1920, 528, "f32-fma", &f32_8x48_rows,
     &f32_8x48_packed, &HasAvx512},
    {"f32_gemm_6x64_avx512", kF32, "avx512", 6, 64, 1, pF32, pF32, 256, 1920, 512, "f32-fma", &f32_6x64_rows,
     &f32_6x64_packed, &HasAvx512},
    {"f32_gemm_28x16_avx512", kF32, "avx512", 28, 16, 1, pF32, pF32, 256, 1904, 512, "f32-fma", &f32_28x16_rows,
     &f32_28x16_packed, &HasAvx512},
    {"bf16f32_gemm_12x32_avx512bf16", kBf16, "avx512bf16", 12, 32, 2, pBf16, pBf16, 512, 1920, 512,
     "bf16-dpbf16", &bf16_12x32_rows, &bf16_12x32_packed, &HasAvx512Bf16},
    {"bf16f32_gemm_14x32_avx512bf16", kBf16, "avx512bf16", 14, 32, 2, pBf16, pBf16, 512, 1918, 512,
     "bf16-dpbf16", &bf16_14x32_rows, &bf16_14x32_packed, &HasAvx512Bf16},
    {"bf16f32_gemm_8x48_avx512bf16", kBf16, "avx512bf16", 8, 48, 2, pBf16, pBf16, 512, 1920, 528, "bf16-dpbf16",
     &bf16_8x48_rows, &bf16_8x48_packed, &HasAvx512Bf16},
    {"bf16f32_gemm_6x64_avx512bf16", kBf16, "avx512bf16", 6, 64, 2, pBf16, pBf16, 512, 1920, 512, "bf16-dpbf16",
     &bf16_6x64_rows, &bf16_6x64_packed, &HasAvx512Bf16},
    {"bf16f32_gemm_28x16_avx512bf16", kBf16, "avx512bf16", 28, 16, 2, pBf16, pBf16, 512, 1904, 512,
     "bf16-dpbf16", &bf16_28x16_rows, &bf16_28x16_packed, &HasAvx512Bf16},
    // Without AVX512-BF16: bf16 is widened to fp32 while packing.
    {"bf16f32_gemm_12x32_avx512_via_f32", kBf16, "avx512", 12, 32, 1, pF32, pF32, 256, 1920, 512, "bf16-via-f32",
     nullptr, &f32_12x32_packed, &HasAvx512NoBf16},
    {"u8s8s32_gemm_12x32_avx512vnni", kInt8, "avx512vnni", 12, 32, 4, pU8, pS8, 1024, 1920, 512, "int32",
     &u8s8_12x32_rows, &u8s8_12x32_packed, &HasAvx512Vnni},
    {"u8s8s32_gemm_14x32_avx512vnni", kInt8, "avx512vnni", 14, 32, 4, pU8, pS8, 1024, 1918, 512, "int32",
     &u8s8_14x32_rows, &u8s8_14x32_packed, &HasAvx512Vnni},
    {"u8s8s32_gemm_8x48_avx512vnni", kInt8, "avx512vnni", 8, 48, 4, pU8, pS8, 1024, 1920, 528, "int32",
     &u8s8_8x48_rows, &u8s8_8x48_packed, &HasAvx512Vnni},
    {"u8s8s32_gemm_6x64_avx512vnni", kInt8, "avx512vnni", 6, 64, 4, pU8, pS8, 1024, 1920, 512, "int32",
     &u8s8_6x64_rows, &u8s8_6x64_packed, &HasAvx512Vnni},
    {"u8s8s32_gemm_28x16_avx512vnni", kInt8, "avx512vnni", 28, 16, 4, pU8, pS8, 1024, 1904, 512, "int32",
     &u8s8_28x16_rows, &u8s8_28x16_packed, &HasAvx512Vnni},
};

}  // namespace

std::vector<const KernelInfo*> Avx512Kernels() { return TableOf(kKernels); }

}  // namespace tessera::tile
