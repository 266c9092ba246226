// Element-wise reductions for collectives: sum, prod, min, max, avg over
// fp32, fp64, bf16, fp16, int8, uint8, int32, int64. Vectorized (AVX2/F16C,
// auto-vectorized fixed-size blocks; the build targets x86-64-v3), memory
// bound by design. Semantics:
//   - integers wrap on overflow (two's complement); avg divides the sum by
//     the rank count, truncating toward zero;
//   - bf16/fp16: ReduceMany accumulates in fp32 across all sources and
//     rounds once (nearest even); ReduceInto rounds after each step;
//   - min/max of floats follow (a < b ? a : b), so NaN handling is that of
//     the underlying compare (not propagated); fp32/fp64 are not fused.
//   - sources are combined strictly in the order given, so every rank that
//     reduces the same buffers in the same order gets bitwise-equal results.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/comm/api/types.h"

namespace tessera::comm::algo {

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i] (n >= 1). For
// kAvg the sum is divided by `avg_divisor` (the group size) when it is > 0,
// and left as a sum when it is 0. dst may be the same buffer as any source
// (not a partial overlap).
// stream_dst writes dst with non-temporal stores (large outputs that are
// not read back soon; see algorithm.h).
void ReduceMany(void* dst, const void* const* srcs, int num_srcs, size_t count, DataType dtype, ReduceOp op,
                int avg_divisor, bool stream_dst = false);

// dsts[d][i] = srcs[0][i] op ... op srcs[n-1][i] for every d < num_dsts:
// one pass that reads each source once and writes every destination (the
// zero-copy all-reduce writes a rank's slice straight into every rank's
// output). Same semantics and rounding as ReduceMany. Destination d gets
// non-temporal stores when bit d of stream_mask is set and it is 32-byte
// aligned (kStreamAll: every destination). At most 64 destinations. No
// destination may overlap a source except identically (in place).
inline constexpr uint64_t kStreamAll = ~uint64_t{0};
void ReduceToMany(void* const* dsts, int num_dsts, const void* const* srcs, int num_srcs, size_t count,
                  DataType dtype, ReduceOp op, int avg_divisor, uint64_t stream_mask);

// dst[i] = dst[i] op src[i]; kAvg adds (finalize with DivideBy).
void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);

// dst[i] = dst[i] / divisor (the kAvg finalization).
void DivideBy(void* dst, size_t count, DataType dtype, int divisor);

}  // namespace tessera::comm::algo
