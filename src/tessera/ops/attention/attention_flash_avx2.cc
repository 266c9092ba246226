// Flash-attention kernels compiled for the AVX2 + FMA baseline (8 lanes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/ops/attention/attention_internal.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/tile/small_gemm.h"
#include "tessera/tile/vec.h"

namespace tessera::ops::attention_internal {
namespace avx2 {

using Tr = tile::Avx2;
inline Tr::VF Exp(Tr::VF x) { return detail::Exp256(x); }

#include "tessera/ops/attention/flash_kernels.inc"
#include "tessera/ops/attention/flash_forward.inc"
#include "tessera/ops/attention/flash_backward.inc"

}  // namespace avx2

const FlashKernels& FlashAvx2() {
  static const FlashKernels k{"flash_attention_f32_64x64_avx2", &avx2::Forward, &avx2::Backward};
  return k;
}

}  // namespace tessera::ops::attention_internal
