// The NCCL C API (libtessera_nccl.so) against Tessera's C++ Communicator,
// in the same run, ranks as threads of this process:
//   build/bin/nccl_api_perf [--ranks 2,4] [--reps 7] [--lat-iters 2000]
//                           [--bw-iters 4] [--bytes 67108864]
// For each rank count: one communicator of each kind (the C API's from a
// unique id; the C++ one over an in-memory store), then `reps` rounds, each
// measuring, interleaved (the order alternates per round): 8-byte float
// all-reduce latency (mean over lat-iters; the slowest rank's) and the
// all-reduce bus bandwidth of `bytes` (nccl-tests' 2(n-1)/n factor).
// Prints one line per rank count with the medians and the C API's overhead
// (latency difference, bandwidth ratio: of the medians, and the median of
// the per-round paired difference / ratio). NULL stream (blocking) calls.
#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm_bench_util.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/nccl.h"

using namespace tessera;
using namespace tessera::comm;
using Clock = std::chrono::steady_clock;
using bench::Median;

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "nccl_api_perf: %s\n", what.c_str());
  std::exit(1);
}

// Runs op(rank) `iters` times on every rank after `warm` untimed calls;
// returns the slowest rank's seconds per call.
double Time(int n, int warm, int iters, const std::function<void(int)>& op) {
  std::barrier sync(n);
  std::vector<double> secs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < warm; ++i) op(r);
      sync.arrive_and_wait();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) op(r);
      secs[r] = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    });
  }
  for (auto& t : threads) t.join();
  return *std::max_element(secs.begin(), secs.end());
}

std::vector<int> ParseList(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    const char* comma = std::strchr(p, ',');
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks = {2, 4};
  int reps = 7, lat_iters = 2000, bw_iters = 4;
  size_t bytes = size_t{64} << 20;
  bool control = false;  // --control 1: a second C++ communicator in place of the C API (an A/A check)
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--ranks") ranks = ParseList(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--lat-iters") lat_iters = std::atoi(argv[i + 1]);
    else if (flag == "--bw-iters") bw_iters = std::atoi(argv[i + 1]);
    else if (flag == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--control") control = std::atoi(argv[i + 1]) != 0;
    else Die("unknown flag " + flag);
  }
  const size_t count = bytes / sizeof(float);
  std::printf("# nccl_api_perf: all-reduce float sum, ranks as threads, %d interleaved rounds, medians%s\n", reps,
              control ? " (CONTROL: the capi columns are a second C++ communicator)" : "");
  std::printf("# ranks  cxx_lat_us  capi_lat_us  delta_us  cxx_busbw_GBps  capi_busbw_GBps  ratio"
              "  paired_dlat_us  paired_ratio\n");
  for (int n : ranks) {
    // Communicators.
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) Die(ncclGetLastError(nullptr));
    std::vector<ncclComm_t> capi(n);
    std::vector<std::unique_ptr<Communicator>> cxx(n), cxx2(n);
    auto store = MakeInMemoryStore();
    {
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
          if (ncclCommInitRank(&capi[r], n, id, r) != ncclSuccess) Die(ncclGetLastError(nullptr));
          CommOptions o;
          o.name = "cxx";
          auto c = Communicator::Create(store, r, n, o);
          if (!c.ok()) Die(c.status().ToString());
          cxx[r] = std::move(*c);
          if (control) {
            o.name = "cxx2";
            auto c2 = Communicator::Create(store, r, n, o);
            if (!c2.ok()) Die(c2.status().ToString());
            cxx2[r] = std::move(*c2);
          }
        });
      }
      for (auto& t : threads) t.join();
    }
    std::vector<std::vector<float>> send(n, std::vector<float>(count, 1.0f)), recv(n, std::vector<float>(count));
    std::vector<std::array<float, 2>> small(n);
    auto cxx_small = [&](int r) {
      if (!cxx[r]->AllReduce(small[r].data(), small[r].data(), 2, DataType::kFloat32, ReduceOp::kSum).ok()) Die("cxx");
    };
    auto capi_small = [&](int r) {
      if (control) {
        if (!cxx2[r]->AllReduce(small[r].data(), small[r].data(), 2, DataType::kFloat32, ReduceOp::kSum).ok()) Die("cxx2");
      } else if (ncclAllReduce(small[r].data(), small[r].data(), 2, ncclFloat32, ncclSum, capi[r], nullptr) != ncclSuccess) {
        Die(ncclGetLastError(nullptr));
      }
    };
    auto cxx_big = [&](int r) {
      if (!cxx[r]->AllReduce(send[r].data(), recv[r].data(), count, DataType::kFloat32, ReduceOp::kSum).ok()) Die("cxx");
    };
    auto capi_big = [&](int r) {
      if (control) {
        if (!cxx2[r]->AllReduce(send[r].data(), recv[r].data(), count, DataType::kFloat32, ReduceOp::kSum).ok()) Die("cxx2");
      } else if (ncclAllReduce(send[r].data(), recv[r].data(), count, ncclFloat32, ncclSum, capi[r], nullptr) != ncclSuccess) {
        Die(ncclGetLastError(nullptr));
      }
    };
    std::vector<double> lat_cxx, lat_capi, bw_cxx, bw_capi;
    const double factor = 2.0 * (n - 1) / n;
    for (int rep = 0; rep < reps; ++rep) {
      const bool capi_first = rep % 2 == 1;
      for (int k = 0; k < 2; ++k) {
        const bool is_capi = (k == 0) == capi_first;
        const double lat = Time(n, 200, lat_iters, is_capi ? std::function<void(int)>(capi_small) : cxx_small);
        const double t = Time(n, 1, bw_iters, is_capi ? std::function<void(int)>(capi_big) : cxx_big);
        (is_capi ? lat_capi : lat_cxx).push_back(lat * 1e6);
        (is_capi ? bw_capi : bw_cxx).push_back(static_cast<double>(bytes) / t * factor / 1e9);
      }
    }
    // Paired per round (both measured back to back): robust to load that
    // drifts between rounds.
    std::vector<double> dlat, ratio;
    for (int rep = 0; rep < reps; ++rep) {
      dlat.push_back(lat_capi[rep] - lat_cxx[rep]);
      ratio.push_back(bw_capi[rep] / bw_cxx[rep]);
    }
    const double lc = Median(lat_cxx), la = Median(lat_capi), bc = Median(bw_cxx), ba = Median(bw_capi);
    std::printf("%7d  %10.2f  %11.2f  %8.2f  %14.2f  %15.2f  %5.3f  %13.2f  %12.3f\n", n, lc, la, la - lc, bc, ba,
                ba / bc, Median(dlat), Median(ratio));
    std::fflush(stdout);
    for (int r = 0; r < n; ++r) ncclCommDestroy(capi[r]);
  }
  return 0;
}
