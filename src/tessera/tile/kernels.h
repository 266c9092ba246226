// The registry of instantiated tile GEMM micro-kernels, named by dtype,
// op, register tile and ISA as XNNPACK does (`f32_gemm_12x32_avx512`,
// `bf16f32_gemm_12x32_avx512bf16`, `u8s8s32_gemm_12x32_avx512vnni`,
// `u8s8s32_gemm_6x16_avx2`, `f32_gemm_4x16_portable`, ...). Each entry
// says how its operands are packed (element type and k-group of the "shared"
// panels), its K block, and its numerics class: kernels of one class give
// bitwise-identical results for any tile shape, blocking or thread grid, so
// the autotuner may choose among them freely. The registry is built once;
// entries are immutable and kernels are pure functions (thread-safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/tile/microkernel.h"

namespace tessera::tile {

// What a GEMM computes: inputs -> accumulation/output.
enum class GemmType { kF32, kBf16F32, kU8S8S32 };
// Element type of a packed ("shared") panel.
enum class PackType { kF32, kBf16, kU8, kS8, kS16 };

const char* GemmTypeName(GemmType type);  // "f32", "bf16f32", "u8s8s32"

struct KernelInfo {
  const char* name;
  GemmType type;
  const char* isa;       // "avx512", "avx512bf16", "avx512vnni", "avx2", "portable"
  int mr, nr, group;     // register tile and k-group
  PackType pack_a, pack_b;
  int kc;                // K block, elements (the same for one numerics class)
  int mc, nc;            // default M and N blocks (multiples of mr / nr)
  const char* numerics;  // e.g. "f32-fma", "bf16-dpbf16", "bf16-via-f32", "int32"
  TileKernel rows;       // A read in place (row-major source of pack_a's type); null: always packed
  TileKernel packed;     // A from a packed panel
  bool (*supported)();   // the CPU (and OS) can run it
};

// Every kernel this build has, supported or not.
const std::vector<const KernelInfo*>& AllKernels();
// Kernels of `type` the CPU supports, the default first (fastest ISA, its
// standard tile), then the others of the default's numerics class.
std::vector<const KernelInfo*> SupportedKernels(GemmType type);
// The default kernel of `type`: TESSERA_GEMM_ISA (auto|avx512|avx2|portable)
// restricts the ISA family. Never null (portable kernels run anywhere).
const KernelInfo& DefaultKernel(GemmType type);
// By name; null when unknown or not supported by this CPU.
const KernelInfo* FindKernel(std::string_view name);

// Tests only: the kernel DefaultKernel(type) returns (nullptr restores the
// automatic choice). Not thread-safe against concurrent GEMMs.
void SetDefaultKernelForTesting(GemmType type, const KernelInfo* kernel);

// Per-ISA tables (kernels_avx512.cc, kernels_avx2.cc, kernels_portable.cc).
// Each instantiates its kernels with TESSERA_TILE_KERNEL: NAME_rows (A read
// in place) and NAME_packed, both `flatten` so every trait call is inlined
// under the ISA's target attribute.
#define TESSERA_TILE_KERNEL(name, target, Op, MR, NR)                                  \
  [[maybe_unused]] target __attribute__((flatten)) void name##_rows(const TileArgs& t) { \
    GemmTile<Op, MR, NR, ALayout::kRows>(t);                                           \
  }                                                                                    \
  target __attribute__((flatten)) void name##_packed(const TileArgs& t) { GemmTile<Op, MR, NR, ALayout::kPacked>(t); }

template <size_t N>
std::vector<const KernelInfo*> TableOf(const KernelInfo (&table)[N]) {
  std::vector<const KernelInfo*> out;
  for (const KernelInfo& k : table) out.push_back(&k);
  return out;
}

std::vector<const KernelInfo*> Avx512Kernels();
std::vector<const KernelInfo*> Avx2Kernels();
std::vector<const KernelInfo*> PortableKernels();

}  // namespace tessera::tile
