// The engine of `tessera ccl-perf allreduce|reducescatter --compress C`: a
// sweep of compressed all-reduce / reduce-scatter (compressed_collectives.h)
// over message sizes, in the spirit of nccl-tests. `size` is the logical
// fp32 buffer (all-reduce: per rank; reduce-scatter: the whole array);
// algbw = size / time and busbw = algbw x the fp32 collective's factor, so
// they compare directly with an uncompressed run; `sent` is the bytes a rank
// actually put on the wire per call and `ratio` sent / fp32-equivalent.
// `maxerr` is the largest |result - exact sum| over the elements relative to
// the largest |exact sum| (one untimed call without error feedback).
// Times are each rank's mean per call, averaged over the ranks. Every rank
// calls RunCompressedPerf; rank 0 prints.
#pragma once

#include <cstdio>

#include "tessera/base/status.h"
#include "tessera/comm/api/ccl_perf.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/compress/codec.h"

namespace tessera::comm::compress {

struct CompressedPerfRow {
  size_t size = 0;
  double time_us = 0;
  double algbw = 0, busbw = 0;
  double sent_bytes = 0;  // per rank per call
  double ratio = 0;       // sent / fp32 equivalent
  double max_rel_error = 0;
};

// options.op must be kAllReduce or kReduceScatter, dtype float32.
StatusOr<std::vector<CompressedPerfRow>> RunCompressedPerf(Communicator& comm, const PerfOptions& options,
                                                           const CompressionSpec& spec, std::FILE* out);

}  // namespace tessera::comm::compress
