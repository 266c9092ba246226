// Element copy between two strided layouts of one shape, with dtype
// conversion (internal to tensor/; Tensor::CopyFrom, Clone, Contiguous and To
// run on it).
//
// Dimensions that are contiguous in both layouts are merged first, so a
// transposed view such as [B, T, H, Dh] -> [B, H, T, Dh] becomes rows of Dh
// elements and a dense copy one long row. Rows are copied with memcpy (same
// dtype, unit strides), vectorizable fp32 <-> bf16 loops (bit-identical to
// bf16::FromFloat / ToFloat), or a generic per-element conversion through
// double. Copies of at least kParallelCopyElements elements are split over
// OpenMP threads by rows (or by ranges of one long row) unless the caller is
// already inside a parallel region. Results do not depend on the thread
// count. The two buffers must not overlap.
#pragma once

#include <cstdint>

#include "tessera/tensor/dtype.h"

namespace tessera::internal {

inline constexpr int64_t kParallelCopyElements = int64_t{1} << 16;

struct StridedBuffer {
  char* base;              // element 0 of the storage (not of the view)
  const int64_t* strides;  // in elements, one per dimension
  int64_t offset;          // in elements
  DType dtype;
};

// One element of `dtype` at p, as a double / written from a double (integers
// truncate, floating types round to nearest even).
double ReadAsDouble(const void* p, DType dtype);
void WriteFromDouble(void* p, DType dtype, double v);

// Copies src into dst, element by element over `shape` (rank `rank`).
void CopyStrided(const int64_t* shape, int rank, const StridedBuffer& dst, const StridedBuffer& src);

}  // namespace tessera::internal
