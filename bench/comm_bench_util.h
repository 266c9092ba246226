// Helpers shared by the communication benchmarks run under `tessera launch`
// (moe_perf, overlap_perf, alltoall_bound, nccl_api_perf): the median of
// repeated timings, exiting with a message on an error, and timing an
// operation on every rank at once (barrier first) as the slowest rank saw it.
// Header-only; not part of the library.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/comm/api/communicator.h"

namespace tessera::bench {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prints "<program>: <what>: <status>" and exits 1 when `st` is an error.
inline void Check(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, st.ToString().c_str());
  std::exit(1);
}

// Seconds of fn() on the slowest rank (all ranks start after a barrier).
template <typename F>
double TimedOnSlowestRank(comm::Communicator& c, F&& fn) {
  Check(c.Barrier(), "barrier");
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Check(c.AllReduce(&s, &s, 1, comm::DataType::kFloat64, comm::ReduceOp::kMax), "max");
  return s;
}

}  // namespace tessera::bench
