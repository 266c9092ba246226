// Internal interface between the attention front end (validation and
// dispatch, attention.cc), the scalar reference kernels
// (attention_reference.cc) and the tiled flash-attention kernels
// (attention_flash_*.cc, one per ISA). Not part of the public API.
#pragma once

#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera::ops::attention_internal {

// Shapes of one call: q, k, v are contiguous [B, H, T, Dh], bh = B·H.
struct Dims {
  int64_t bh = 0;
  int64_t t = 0;
  int64_t dh = 0;
};

// Writes out [B,H,T,Dh] (q's dtype) and lse [B,H,T] fp32.
void ReferenceForward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const Dims& d, Tensor& out,
                      Tensor& lse);
void ReferenceBackward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, float scale, const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv);

// Tiled kernels for one ISA: fp32 inside, any floating dtype outside.
struct FlashKernels {
  const char* name;
  void (*forward)(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const Dims& d, Tensor& out,
                  Tensor& lse);
  void (*backward)(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, float scale, const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv);
};
const FlashKernels& FlashAvx2();
const FlashKernels& FlashAvx512();

}  // namespace tessera::ops::attention_internal
