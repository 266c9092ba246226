// Portable tile kernels (C++ vector extensions, 4 lanes; run on any CPU):
// fp32 6x8, bf16 through the fp32 kernel, u8 x s8 one k at a time.
// Instantiated from microkernel.h; they compute what the ISA kernels of the
// same numerics class compute, bit for bit.
#include "tessera/tile/kernels.h"

namespace tessera::tile {
namespace {

TESSERA_TILE_KERNEL(f32_6x8, , F32Fma<Portable>, 6, 8)
TESSERA_TILE_KERNEL(u8s8_6x8, , U8S8Portable, 6, 8)

bool Always() { return true; }

constexpr auto pF32 = PackType::kF32;

const KernelInfo kKernels[] = {
    {"f32_gemm_6x8_portable", GemmType::kF32, "portable", 6, 8, 1, pF32, pF32, 256, 144, 1024, "f32-fma",
     &f32_6x8_rows, &f32_6x8_packed, &Always},
    {"bf16f32_gemm_6x8_portable_via_f32", GemmType::kBf16F32, "portable", 6, 8, 1, pF32, pF32, 256, 144, 1024,
     "bf16-via-f32", nullptr, &f32_6x8_packed, &Always},
    {"u8s8s32_gemm_6x8_portable", GemmType::kU8S8S32, "portable", 6, 8, 1, PackType::kU8, PackType::kS8, 256, 144,
     1024, "int32", &u8s8_6x8_rows, &u8s8_6x8_packed, &Always},
};

}  // namespace

std::vector<const KernelInfo*> PortableKernels() { return TableOf(kKernels); }

}  // namespace tessera::tile
