// Compute / communication overlap benchmark, run one process per host under
// `tessera launch` (bench/overlap.sh puts two "hosts" in network
// namespaces joined by a veth pair shaped with tc):
//   tessera launch --nproc 1 --nnodes 2 ... -- build/bin/overlap_perf --mib 64
// Each iteration times, interleaved and on every rank:
//   comm    a blocking all-reduce of --mib MiB of fp32;
//   gemm    --gemms fp32 GEMMs of --n³ on this rank (auto: as many as
//           take 1.2× the comm time, so that all of it can be hidden);
//   overlap the all-reduce started asynchronously, the same GEMMs, then
//           the wait.
// Rank 0 prints one JSON object (nlohmann): medians over --iters of each
// (the slowest rank's), overlap / (comm + gemm), and the fraction of the
// communication hidden, (comm + gemm − overlap) / comm, clamped to [0, 1].
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm_bench_util.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/ops/matmul/gemm.h"

using namespace tessera;
using namespace tessera::comm;

using bench::Check;
using bench::Median;
constexpr auto Timed = [](Communicator& c, auto&& fn) { return bench::TimedOnSlowestRank(c, fn); };

int main(int argc, char** argv) {
  int64_t mib = 64, n = 1024;
  int gemms = 0, iters = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--mib") mib = v;
    else if (a == "--n") n = v;
    else if (a == "--gemms") gemms = static_cast<int>(v);
    else if (a == "--iters") iters = static_cast<int>(v);
    else {
      std::fprintf(stderr, "overlap_perf: unknown option %s (--mib, --n, --gemms, --iters)\n", a.c_str());
      return 2;
    }
  }
  auto comm_or = Communicator::FromEnvironment();
  Check(comm_or.status(), "communicator");
  Communicator& c = **comm_or;
  const size_t count = static_cast<size_t>(mib) << 18;  // fp32 elements
  std::vector<float> grad(count, 1.0f);
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(a.size(), 0.25f), out(a.size());
  auto gemm_once = [&] { ops::GemmF32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, out.data(), n); };
  auto all_reduce = [&] { Check(c.AllReduce(grad.data(), grad.data(), count, DataType::kFloat32, ReduceOp::kSum), "all-reduce"); };

  // Warm up both, then size the GEMM batch to a little more than the
  // communication time (all of it can then be hidden): medians of 3.
  all_reduce();
  gemm_once();
  std::vector<double> comm_cal, gemm_cal;
  for (int i = 0; i < 3; ++i) {
    comm_cal.push_back(Timed(c, all_reduce));
    gemm_cal.push_back(Timed(c, [&] {
      for (int g = 0; g < 4; ++g) gemm_once();
    }) / 4);
  }
  if (gemms <= 0) gemms = std::max(1, static_cast<int>(std::ceil(1.2 * Median(comm_cal) / Median(gemm_cal))));
  auto gemm_batch = [&] {
    for (int g = 0; g < gemms; ++g) gemm_once();
  };

  std::vector<double> t_comm, t_gemm, t_overlap, t_run;
  for (int it = 0; it < iters; ++it) {
    t_comm.push_back(Timed(c, all_reduce));
    t_gemm.push_back(Timed(c, gemm_batch));
    double run = 0;
    t_overlap.push_back(Timed(c, [&] {
      Work w = c.AllReduceAsync(grad.data(), grad.data(), count, DataType::kFloat32, ReduceOp::kSum);
      gemm_batch();
      Check(w.Wait(std::chrono::minutes(5)), "overlapped all-reduce");
      run = w.run_seconds();
    }));
    t_run.push_back(run);
  }
  const double comm = Median(t_comm), gemm = Median(t_gemm), overlap = Median(t_overlap);
  if (c.rank() == 0) {
    const double gflop = 2.0 * static_cast<double>(n) * n * n * gemms / 1e9;
    nlohmann::json j = {{"ranks", c.size()},
                        {"transport", std::string(transport::TransportKindName(c.transport_kind()))},
                        {"mib", mib},
                        {"gemm_n", n},
                        {"gemms", gemms},
                        {"iters", iters},
                        {"comm_s", comm},
                        {"comm_busbw_gbit_s", 2.0 * (c.size() - 1) / c.size() * count * 4 * 8 / comm / 1e9},
                        {"gemm_s", gemm},
                        {"gemm_gflop_s", gflop / gemm},
                        {"overlap_s", overlap},
                        {"overlapped_comm_run_s", Median(t_run)},
                        {"overlap_over_sum", overlap / (comm + gemm)},
                        {"gemm_over_comm", gemm / comm},  // < 1: only this fraction could be hidden
                        {"hidden_fraction", std::clamp((comm + gemm - overlap) / comm, 0.0, 1.0)}};
    std::printf("%s\n", j.dump().c_str());
  }
  Check(c.Barrier(), "final barrier");
  return 0;
}
