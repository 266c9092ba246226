// The engine of `tessera ccl-perf`: an nccl-tests-compatible sweep of one
// collective over message sizes, timing out-of-place and in-place runs and
// optionally checking results, printed in nccl-tests' format:
//   #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//   ...
//   # Avg bus bandwidth    : X
// Sizes follow nccl-tests: `size` is the per-rank buffer in bytes (the
// whole gathered/scattered array for all_gather, reduce_scatter and
// all_to_all, whose `count` column is then per rank); algbw = size / time;
// busbw = algbw x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter,
// all_to_all (n-1)/n; broadcast, reduce, sendrecv 1. Times are the mean over
// ranks (nccl-tests' default -a 1; -a 0 rank 0, 2 min, 3 max) of each rank's
// mean per iteration. Buffers are allocated once (huge-page advised,
// touched once) for the largest size and reused; with -R 1 (nccl-tests'
// buffer registration flag) they come from AllocShared, so the shm
// transport's zero-copy paths run. Every rank calls RunPerf;
// rank 0 prints. Not thread-safe per communicator.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"

namespace tessera::comm {

enum class PerfOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kSendRecv };
StatusOr<PerfOp> ParsePerfOp(std::string_view text);
std::string_view PerfOpName(PerfOp op);  // nccl-tests' name: all_reduce, ...
// nccl-tests' bus-bandwidth factor for n ranks.
double BusBandwidthFactor(PerfOp op, int n);
// Parses "64", "8K", "1M", "2G" (powers of 1024).
StatusOr<size_t> ParseByteSize(std::string_view text);

struct PerfOptions {
  PerfOp op = PerfOp::kAllReduce;
  size_t min_bytes = 8;
  size_t max_bytes = 64 << 20;
  double factor = 2;    // -f (used when step == 0)
  size_t step = 0;      // -i: additive step
  int iters = 20;       // -n
  int warmup = 5;       // -w
  DataType dtype = DataType::kFloat32;
  ReduceOp redop = ReduceOp::kSum;
  int root = 0;
  bool check = true;    // -c
  bool blocking = true;   // -z: blocking calls (default) or queued async ones
  int average = 1;      // -a: 0 rank 0, 1 mean, 2 min, 3 max over ranks
  bool shared_buffers = false;  // -R: buffers from AllocShared (zero copy)
};

struct PerfRow {
  size_t size = 0;
  size_t count = 0;
  double time_us[2] = {0, 0};  // out-of-place, in-place
  double algbw[2] = {0, 0};
  double busbw[2] = {0, 0};
  int64_t wrong[2] = {-1, -1};  // -1: not checked
};

struct PerfResult {
  std::vector<PerfRow> rows;
  double avg_busbw = 0;  // mean busbw over rows and both placements
  int64_t wrong = 0;
};

// Runs the sweep on every rank; rank 0 writes the report to `out` (may be
// null on other ranks).
StatusOr<PerfResult> RunPerf(Communicator& comm, const PerfOptions& options, std::FILE* out);

}  // namespace tessera::comm
