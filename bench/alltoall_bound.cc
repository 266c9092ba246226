// All-to-all against the memory-copy bound, run under `tessera launch`:
//   tessera launch --nproc 4 -- build/bin/alltoall_bound --mib 64
// An all-to-all on shared buffers (AllocShared: the zero-copy path) must
// read every byte of each rank's input once and write every byte of its
// output once: exactly what a memcpy of the same size does. Each round
// times, interleaved and with every rank at once (barrier, then the
// slowest rank): `copy`, every rank memcpy's its --mib MiB input into its
// output (glibc: streaming stores at this size); `alltoall`, the
// all-to-all of the same buffers. Rank 0 prints one JSON object
// (nlohmann): medians over --rounds, and copy / alltoall (1 = at the
// bound). Results are checked once.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm_bench_util.h"
#include "tessera/comm/api/communicator.h"

using namespace tessera;
using namespace tessera::comm;

using bench::Check;
using bench::Median;

namespace {

// Seconds per call of fn (iters calls) on the slowest rank.
template <typename F>
double Timed(Communicator& c, int iters, F&& fn) {
  return bench::TimedOnSlowestRank(c, [&] {
           for (int i = 0; i < iters; ++i) fn();
         }) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 64;
  int rounds = 7, iters = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--mib") mib = v;
    else if (a == "--rounds") rounds = static_cast<int>(v);
    else if (a == "--iters") iters = static_cast<int>(v);
    else {
      std::fprintf(stderr, "alltoall_bound: unknown option %s (--mib, --rounds, --iters)\n", a.c_str());
      return 2;
    }
  }
  auto comm_or = Communicator::FromEnvironment();
  Check(comm_or.status(), "communicator");
  Communicator& c = **comm_or;
  const int n = c.size();
  const size_t bytes = (static_cast<size_t>(mib) << 20) / (4 * n) * (4 * n);
  const size_t count = bytes / 4 / n;  // fp32 elements per peer
  auto send_or = AllocShared(bytes);
  auto recv_or = AllocShared(bytes);
  Check(send_or.status(), "AllocShared");
  Check(recv_or.status(), "AllocShared");
  auto* send = static_cast<float*>(*send_or);
  auto* recv = static_cast<float*>(*recv_or);
  for (size_t i = 0; i < bytes / 4; ++i) send[i] = static_cast<float>(c.rank() * 1000003 + static_cast<int64_t>(i % 999983));
  std::memset(recv, 0, bytes);

  auto copy = [&] { std::memcpy(recv, send, bytes); };
  auto all_to_all = [&] { Check(c.AllToAll(send, recv, count, DataType::kFloat32), "all-to-all"); };
  all_to_all();
  for (int j = 0; j < n; ++j) {  // block j came from rank j's block for this rank
    for (size_t i = 0; i < count; i += 997) {
      const size_t src = static_cast<size_t>(c.rank()) * count + i;
      const float want = static_cast<float>(j * 1000003 + static_cast<int64_t>(src % 999983));
      if (recv[j * count + i] != want) {
        std::fprintf(stderr, "alltoall_bound: wrong element %zu of block %d on rank %d\n", i, j, c.rank());
        return 1;
      }
    }
  }
  copy();
  std::vector<double> t_copy, t_a2a;
  for (int r = 0; r < rounds; ++r) {
    t_copy.push_back(Timed(c, iters, copy));
    t_a2a.push_back(Timed(c, iters, all_to_all));
  }
  if (c.rank() == 0) {
    const double tc = Median(t_copy), ta = Median(t_a2a);
    nlohmann::json j = {{"ranks", n},
                        {"mib_per_rank", static_cast<double>(bytes) / (1 << 20)},
                        {"rounds", rounds},
                        {"copy_ms", tc * 1e3},
                        {"alltoall_ms", ta * 1e3},
                        {"copy_gb_s_per_rank", 2.0 * bytes / tc / 1e9},
                        {"fraction_of_copy_bound", tc / ta}};
    std::printf("%s\n", j.dump().c_str());
  }
  Check(c.Barrier(), "final barrier");
  Check(FreeShared(send), "FreeShared");
  Check(FreeShared(recv), "FreeShared");
  return 0;
}
