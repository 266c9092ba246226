// Flash-attention kernels compiled for AVX-512 (16 lanes); selected at run
// time only on CPUs that have it (see attention.cc).
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

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")

namespace tessera::ops::attention_internal {
namespace avx512 {

using Tr = tile::Avx512;
inline Tr::VF Exp(Tr::VF x) { return detail::Exp512(x); }

#include "tessera/ops/attention/flash_kernels.inc"
#include "tessera/ops/attention/flash_forward.inc"
#include "tessera/ops/attention/flash_backward.inc"

}  // namespace avx512

const FlashKernels& FlashAvx512() {
  static const FlashKernels k{"flash_attention_f32_64x64_avx512", &avx512::Forward, &avx512::Backward};
  return k;
}

}  // namespace tessera::ops::attention_internal

#pragma GCC pop_options
